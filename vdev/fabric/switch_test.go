package fabric

import (
	"container/heap"
	"testing"

	"github.com/dimmnet/dimmnet/driver/collective"
)

// deliveries sends the packets (src, dst pairs, in order, all at time 0:
// each host's NI takes its own in order) through a fresh simulator and
// returns when each packet's tail reached its host.
func deliveries(t *testing.T, topo *Topology, sw Switch, flits int, pairs [][2]int) []int64 {
	t.Helper()
	r, err := NewRouting(topo, "shortest")
	if err != nil {
		t.Fatal(err)
	}
	list := make([]int, topo.Hosts())
	for i := range list {
		list[i] = i
	}
	par := PaperParams(flits, Microsecond)
	par.Switch = sw
	s, err := newSim(r, list, par)
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]*packet, len(pairs))
	for i, pr := range pairs {
		p := &packet{src: pr[0], dst: pr[1], path: r.Path(topo.HostSwitch[pr[0]], pr[1])}
		if len(p.path) > 0 {
			p.vc = p.path[0].VC
		}
		ps[i] = p
		s.queue(s.inject(p.src), p)
	}
	got := map[*packet]int64{}
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(event)
		s.now = e.t
		if e.kind == evDeliver {
			got[e.p] = s.now
			continue
		}
		s.network(e)
	}
	out := make([]int64, len(ps))
	for i, p := range ps {
		out[i] = got[p]
	}
	return out
}

// Hosts 0, 1 and 2 on switch 0, host 3 on switch 1. Host 0 and host 1
// both send to host 2, and host 1 then sends to host 3: with input FIFOs
// host 1's second packet waits behind its first, which waits for host 2's
// ejection link, though the cable to switch 1 is free all along.
func TestInputFIFOHeadOfLineBlocking(t *testing.T) {
	topo := &Topology{Name: "hol", Switches: 2, HostSwitch: []int{0, 0, 0, 1}, Links: [][2]int{{0, 1}}}
	pairs := [][2]int{{0, 2}, {1, 2}, {1, 3}}
	par := PaperParams(17, Microsecond)
	ser, hop := par.Serialization(), par.HopDelay
	out := deliveries(t, topo, Switch{WholePackets: true}, 17, pairs)
	in := deliveries(t, topo, Switch{WholePackets: true, InputFIFO: true}, 17, pairs)
	// Host 1's packet to host 3 leaves its NI one serialization late and
	// crosses two switches: unblocked it arrives at ser + 2 hops + ser.
	if want := 2*ser + 2*hop; out[2] != want {
		t.Errorf("output-queued: packet to host 3 at %d ps, want %d", out[2], want)
	}
	// Blocked, it leaves switch 0 only when the packet ahead of it does,
	// at hop + 2 ser (behind host 0's packet on host 2's link).
	if want := hop + 2*ser + hop + ser; in[2] != want {
		t.Errorf("input FIFO: packet to host 3 at %d ps, want %d (head-of-line blocked)", in[2], want)
	}
	for i := 0; i < 2; i++ {
		if in[i] != out[i] {
			t.Errorf("packet %d: input FIFO %d ps, output-queued %d: only the blocked one should differ", i, in[i], out[i])
		}
	}
}

// Two VCs of one input port bound for two free outputs: with one crossbar
// input per port the second waits for the first's tail.
func TestOneReadPortSerialisesAnInput(t *testing.T) {
	// Host 0 on switch 0 sends to hosts 1 and 2 on switch 1 over a cable
	// with two VCs (DL-style routings alternate destinations between
	// them): both arrive at switch 1's input port from the cable.
	topo := &Topology{Name: "xbar", Switches: 2, HostSwitch: []int{0, 1, 1}, Links: [][2]int{{0, 1}}}
	r, err := NewRouting(topo, "shortest")
	if err != nil {
		t.Fatal(err)
	}
	r.VCs = 2
	par := PaperParams(17, Microsecond)
	ser := par.Serialization()
	for _, sw := range []Switch{{WholePackets: true, InputFIFO: true}, {WholePackets: true, InputFIFO: true, OneReadPort: true}} {
		par.Switch = sw
		s, err := newSim(r, []int{0, 1, 2}, par)
		if err != nil {
			t.Fatal(err)
		}
		// Put both packets in switch 1's FIFOs from the cable at once,
		// one per VC, as if they had come in interleaved.
		var ps []*packet
		for v, dst := range []int{1, 2} {
			p := &packet{src: 0, dst: dst, path: r.Path(0, dst), hop: 1, in: 0, vc: v, upEnd: -par.HopDelay}
			ps = append(ps, p)
			s.arrive(p)
		}
		got := map[*packet]int64{}
		for s.q.Len() > 0 {
			e := heap.Pop(&s.q).(event)
			s.now = e.t
			if e.kind == evDeliver {
				got[e.p] = s.now
				continue
			}
			s.network(e)
		}
		want := ser
		if sw.OneReadPort {
			want = 2 * ser
		}
		if last := max(got[ps[0]], got[ps[1]]); last != want {
			t.Errorf("%v: second packet delivered at %d ps, want %d", sw, last, want)
		}
	}
}

// Every variant fabric-bench takes parses and prints back as itself.
func TestParseSwitchVariants(t *testing.T) {
	for _, spec := range []string{"flit", "packet", "input", "crossbar", "pci", "packet,crossbar,pci", "crossbar,pci"} {
		sw, err := ParseSwitch(spec)
		if err != nil {
			t.Fatal(err)
		}
		if sw.String() != spec {
			t.Errorf("%q parses to %q", spec, sw)
		}
	}
	if _, err := ParseSwitch("omega"); err == nil {
		t.Error("an unknown variant parsed")
	}
}

// RHiNET-2/SW buffers 4 KB per input port and VC: with input FIFOs the
// barrier workloads never queue more (seven 69-flit packets), so Go &
// Stop never stops a sender and the model need not model it.
func TestInputFIFOsStayWithinFourKB(t *testing.T) {
	topo := Mesh("mesh4x4", 4, 4, 4)
	r, err := NewRouting(topo, "updown")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"RO", "SCO", "HIO"} {
		lists, err := collectiveLists(topo, o)
		if err != nil {
			t.Fatal(err)
		}
		par := PaperParams(69, 3*Microsecond)
		par.Switch = Switch{InputFIFO: true, OneReadPort: true, PCIStream: true}
		res, err := Barriers(r, collective.Binomial{}, lists[0], par, 2000)
		if err != nil {
			t.Fatal(err)
		}
		if res.MaxQueueBytes > 4096 {
			t.Errorf("%s: an input VC held %d bytes, more than RHiNET-2/SW's 4 KB", o, res.MaxQueueBytes)
		}
	}
}

func collectiveLists(topo *Topology, order string) ([][]int, error) {
	return collective.Map{HostSwitch: topo.HostSwitch}.Lists(order, 1, 1)
}

// Two packets on the two VCs of one cable at once: flit by flit they share
// it and both arrive a serialization late; a packet at a time, the first
// arrives on time and the second as late.
func TestInterleavedVCsShareTheLink(t *testing.T) {
	topo := &Topology{Name: "flit", Switches: 2, HostSwitch: []int{0, 1, 1}, Links: [][2]int{{0, 1}}}
	r, err := NewRouting(topo, "shortest")
	if err != nil {
		t.Fatal(err)
	}
	r.VCs = 2
	par := PaperParams(17, Microsecond)
	ser, hop := par.Serialization(), par.HopDelay
	for _, sw := range []Switch{{WholePackets: true}, {}} {
		par.Switch = sw
		s, err := newSim(r, []int{0, 1, 2}, par)
		if err != nil {
			t.Fatal(err)
		}
		var ps []*packet
		for v, dst := range []int{1, 2} {
			// Both heads wait at switch 0 for the cable, their tails in.
			p := &packet{src: 0, dst: dst, path: []Hop{{Channel: 0, VC: v}}, vc: v, upEnd: -hop, last: &xfer{}}
			ps = append(ps, p)
			s.queue(0, p)
		}
		got := map[*packet]int64{}
		for s.q.Len() > 0 {
			e := heap.Pop(&s.q).(event)
			s.now = e.t
			if e.kind == evDeliver {
				got[e.p] = s.now
				continue
			}
			s.network(e)
		}
		first, second := min(got[ps[0]], got[ps[1]]), max(got[ps[0]], got[ps[1]])
		wantFirst := ser + hop
		if !sw.WholePackets {
			wantFirst = 2*ser + hop
		}
		if first != wantFirst || second != 2*ser+hop {
			t.Errorf("%v: delivered at %d and %d ps, want %d and %d", sw, first, second, wantFirst, 2*ser+hop)
		}
	}
}
