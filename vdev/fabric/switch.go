package fabric

import (
	"fmt"
	"sort"
	"strings"
)

// Switch selects how the model's switches and NIs queue and forward
// packets. The zero value is the default model: a packet waits at the
// output channel it needs (so a blocked packet never delays another), and
// the packets on different VCs of one link share it flit by flit. Each
// field changes one structural effect of RHiNET-2's hardware, so each can
// be tested alone and together against the paper's findings;
// docs/rhinet.md says which the paper supports and what each does to the
// tables.
type Switch struct {
	// InputFIFO buffers packets per input port and VC, as RHiNET-2/SW
	// does (4 KB per VC of each port, Go & Stop between the upstream
	// sender and that buffer): only the head of an input VC's FIFO may
	// request an output, so a packet waiting for a busy output holds up
	// the packets behind it (head-of-line blocking).
	InputFIFO bool
	// OneReadPort lets an input port feed one output at a time, whatever
	// VC the packet is on: the crossbar has one input per port at link
	// rate (the paper's 64 Gbps = 8 ports x 8 Gbps), not one per VC.
	// Needs InputFIFO.
	OneReadPort bool
	// PCIStream makes a remote-DMA packet (more than 17 flits) stream out
	// of the NI at PCI speed (64 bit x 66 MHz, 528 MB/s) instead of link
	// speed: cut through, it then holds every channel of its path as long
	// as the NI takes to read it.
	PCIStream bool
	// WholePackets makes a link carry one packet at a time, its VCs served
	// round robin a packet at a time (the model before flit-level
	// multiplexing). Without it, a link's VCs are multiplexed flit by
	// flit, as VCs are: packets on different VCs of one cable share its
	// bandwidth (each gets 1/k of it while k send), so both finish late.
	// The NI's injection link sends one packet at a time either way.
	WholePackets bool
}

// SwitchVariants are the names ParseSwitch takes, each one effect.
var SwitchVariants = []string{"flit", "packet", "input", "crossbar", "pci"}

// ParseSwitch reads a comma-separated list of SwitchVariants ("flit" is
// the zero value, output-queued with flit-interleaved links; "packet"
// carries a packet at a time; "crossbar" implies "input"), so
// fabric-bench can run each effect alone or in combination.
func ParseSwitch(spec string) (Switch, error) {
	var sw Switch
	for _, f := range strings.Split(spec, ",") {
		switch strings.TrimSpace(f) {
		case "", "flit":
		case "packet":
			sw.WholePackets = true
		case "input":
			sw.InputFIFO = true
		case "crossbar":
			sw.InputFIFO, sw.OneReadPort = true, true
		case "pci":
			sw.PCIStream = true
		default:
			return Switch{}, fmt.Errorf("fabric: switch variant %q: want a comma-separated list of %s", f, strings.Join(SwitchVariants, ", "))
		}
	}
	return sw, nil
}

// String names the variant as ParseSwitch reads it.
func (sw Switch) String() string {
	var fs []string
	if sw.WholePackets {
		fs = append(fs, "packet")
	}
	switch {
	case sw.OneReadPort:
		fs = append(fs, "crossbar")
	case sw.InputFIFO:
		fs = append(fs, "input")
	}
	if sw.PCIStream {
		fs = append(fs, "pci")
	}
	if len(fs) == 0 {
		return "flit"
	}
	return strings.Join(fs, ",")
}

// pciBytesPerUs is the PCI bus's peak: 64 bits at 66 MHz.
const pciBytesPerUs = 528

// injectHold is how long the NI's injection link holds packet bytes.
func (s *sim) injectHold() int64 {
	if !s.par.Switch.PCIStream || s.par.Flits <= 17 {
		return s.ser
	}
	b := int64(s.par.Flits * s.par.FlitBytes)
	return max(s.ser, b*Microsecond/pciBytesPerUs)
}

// setupInputs builds the input-queued switches' state: an input port per
// channel that ends at a switch (inter-switch channels and the hosts'
// injection links), a FIFO per input port and VC, and per switch the
// inputs and outputs its crossbar joins.
func (s *sim) setupInputs() {
	n := len(s.hosts)
	s.vcs = max(s.r.VCs, 1)
	ports := s.inter + n // inputs: inter-switch channels, then injection links
	s.inQ = make([][]*packet, ports*s.vcs)
	s.inBusy = make([]bool, ports*s.vcs)
	s.readBusy = make([]bool, ports)
	s.swIn = make([][]int, s.topo.Switches)
	s.swOut = make([][]int, s.topo.Switches)
	s.outRR = make([]int, len(s.chans))
	cs := s.topo.Channels()
	for c, ch := range cs {
		for v := 0; v < s.vcs; v++ {
			s.swIn[ch.To] = append(s.swIn[ch.To], c*s.vcs+v)
		}
		s.swOut[ch.From] = append(s.swOut[ch.From], c)
	}
	for h := 0; h < n; h++ {
		sw := s.topo.HostSwitch[h]
		for v := 0; v < s.vcs; v++ {
			s.swIn[sw] = append(s.swIn[sw], (s.inter+h)*s.vcs+v)
		}
		s.swOut[sw] = append(s.swOut[sw], s.eject(h))
	}
	for _, in := range s.swIn {
		sort.Ints(in)
	}
}

// nextHop is the channel and VC a packet at a switch needs next.
func (s *sim) nextHop(p *packet) (int, int) {
	if p.hop == len(p.path) {
		return s.eject(p.dst), 0
	}
	return p.path[p.hop].Channel, p.path[p.hop].VC
}

// arrive files a packet whose head reached a switch in its input FIFO.
func (s *sim) arrive(p *packet) {
	if ch, _ := s.nextHop(p); ch < s.inter && s.inUse(ch) {
		s.res.Contended++
	}
	id := p.in*s.vcs + p.vc
	s.inQ[id] = append(s.inQ[id], p)
	if b := len(s.inQ[id]) * s.par.Flits * s.par.FlitBytes; b > s.maxQ {
		s.maxQ = b
	}
	s.arbitrateSwitch(s.switchOfInput(p.in))
}

func (s *sim) switchOfInput(port int) int {
	if port >= s.inter {
		return s.topo.HostSwitch[port-s.inter]
	}
	return s.topo.Channels()[port].To
}

// arbitrateSwitch grants every free output of switch sw to the head of an
// input FIFO that wants it, round robin over the inputs per output.
func (s *sim) arbitrateSwitch(sw int) {
	ins := s.swIn[sw]
	for _, o := range s.swOut[sw] {
		for k := 0; k < len(ins); k++ {
			i := (s.outRR[o] + k) % len(ins)
			id := ins[i]
			if len(s.inQ[id]) == 0 || s.inBusy[id] || (s.par.Switch.OneReadPort && s.readBusy[id/s.vcs]) {
				continue
			}
			p := s.inQ[id][0]
			ch, vc := s.nextHop(p)
			if ch != o || !s.free(o, vc) {
				continue
			}
			s.outRR[o] = (i + 1) % len(ins)
			s.inBusy[id] = true
			s.readBusy[id/s.vcs] = true
			p.vc = vc
			s.transmit(o, p, id)
			if !s.shared(o) {
				break
			}
		}
	}
}

// leave runs when a packet's tail has left input FIFO id: the FIFO's
// next packet and the port's crossbar input are free.
func (s *sim) leave(id int) {
	s.inQ[id] = s.inQ[id][1:]
	s.inBusy[id] = false
	s.readBusy[id/s.vcs] = false
}
