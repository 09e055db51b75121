// Package lmmcbench measures LMMC on in-process devices: the
// communication patterns and the paper's figures behind dimmnet
// lmmc-bench. It lives apart from package lmmc so that the library links
// only the driver, never the device model it runs on here.
package lmmcbench

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/lmmc"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// waitTimeout bounds one wait for the device, as lmmc's own waits are
// bounded.
const waitTimeout = 10 * time.Second

// Patterns lists the communication patterns Bench runs ("paper" measures
// the paper's figures instead).
var Patterns = []string{"pingpong", "neighbour", "alltoall", "hot", "paper"}

// BenchConfig tunes Bench; zero fields take defaults.
type BenchConfig struct {
	Rounds int // rounds of the pattern (default 400)
	Size   int // message bytes, at least 8 (default 64)
	Nodes  int // nodes for neighbour and alltoall (default 4; pingpong, hot and paper use 2)
	// Capture, if set, records every frame the run's devices send into
	// it, each once; several runs can share one Writer, so one file holds
	// a whole set of runs. Frames are at most BenchFrameMax bytes.
	Capture *capture.Writer
	// Check runs checked devices: the LMMC manager's driver is held to the
	// datasheet, and a violation fails the run (ErrDevice).
	Check bool
}

// BenchFrameMax is the largest frame Bench's devices send: the snapshot
// length a capture of them needs.
const BenchFrameMax = vdev.DefaultHubPayload + wire.FrameOverhead

// SizeTime is one point of one-way time against message size.
type SizeTime struct {
	Size     int     `json:"size"`
	OneWayUs float64 `json:"one_way_us"`
}

// BenchResult is one Bench run. Latencies are in µs. A faulting write's
// time includes waiting for the device's acknowledgement of a signaled
// rewrite of the victim's first word, which arrives only after the
// receiver has handled the previous paging request (an acknowledgement the
// paper's protocol does not have; see docs/lmmc.md), but not the
// receiver's handling of this write's own request.
type BenchResult struct {
	Policy          string  `json:"policy"`
	Pattern         string  `json:"pattern"`
	Ports           int     `json:"ports"`
	Frames          int     `json:"frames"`
	Nodes           int     `json:"nodes"`
	Writes          uint64  `json:"writes"`
	Faults          uint64  `json:"faults"`
	FaultRate       float64 `json:"fault_rate"`
	PagesCopied     uint64  `json:"pages_copied"`
	WriteUsResident float64 `json:"write_us_resident"`
	WriteUsFaulting float64 `json:"write_us_faulting"`
	// WriteUsFaultingP50 is the median faulting write: a few writes that
	// wait for a descheduled goroutine move the mean far more than it.
	WriteUsFaultingP50 float64 `json:"write_us_faulting_p50"`
	Misplaced          uint64  `json:"misplaced"`
	// Timeouts is the devices' TIMEOUTS counter summed over the nodes. The
	// in-memory link loses nothing, so a timeout there means a sender waited
	// a whole retransmission timeout (5 ms at least) for an answer.
	Timeouts uint64 `json:"timeouts"`

	// Pattern "paper" only.
	OneWay             []SizeTime `json:"one_way,omitempty"`
	FirstMsgUs         float64    `json:"first_msg_us,omitempty"`
	SecondMsgUs        float64    `json:"second_msg_us,omitempty"`
	WriteRoutineUs     float64    `json:"write_routine_us,omitempty"`      // warm 1-byte Write
	ArrivalToLinkMemUs float64    `json:"arrival_to_linkmem_us,omitempty"` // device: frame taken off the link -> bytes in link memory
	ArrivalToReaderUs  float64    `json:"arrival_to_reader_us,omitempty"`  // Write start -> a polling reader sees the byte
}

type benchNode struct {
	n        *lmmc.Node
	snd, rcv *lmmc.Process
}

type msg struct{ src, dst, port int }

// mapPorts maps node i's send and receive pages: its send port to node j
// number p (0-based) is j*ports+p+1, at virtual page j*ports+p of its
// sending process, and what node j sends it on its port p lands at the
// same virtual page of its receiving process. Every node maps the same
// way whether the nodes share a process or not.
func (b *benchNode) mapPorts(i int, ids []uint16, ports int) error {
	ps := b.n.PageSize()
	for j := range ids {
		if i == j {
			continue
		}
		for p := range ports {
			if err := b.snd.MapSend(uint64(j*ports+p)*ps, ids[j], uint16(j*ports+p+1)); err != nil {
				return fmt.Errorf("lmmc bench: %w", err)
			}
			if err := b.rcv.MapRecv(uint64(j*ports+p)*ps, ids[j], uint16(i*ports+p+1)); err != nil {
				return fmt.Errorf("lmmc bench: %w", err)
			}
		}
	}
	return nil
}

// Bench runs pattern with ports ports per connection and frames receive
// frames per connected node under policy, on real in-process devices, and
// reports faults, page copies and write latencies. More ports than frames
// make it page.
func Bench(policy, pattern string, ports, frames int, cfg BenchConfig) (BenchResult, error) {
	cfg, nodes, err := benchShape(policy, pattern, ports, frames, cfg)
	r := BenchResult{Policy: policy, Pattern: pattern, Ports: ports, Frames: frames, Nodes: nodes}
	if err != nil {
		return r, err
	}
	ids := make([]uint16, nodes)
	for i := range ids {
		ids[i] = uint16(i + 1)
	}
	l, err := benchDevices(ids, cfg.Capture, cfg.Check)
	if err != nil {
		return r, fmt.Errorf("lmmc bench: %w", err)
	}
	defer l.Close()
	bn := make([]*benchNode, nodes)
	for i, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			return r, fmt.Errorf("lmmc bench: %w", err)
		}
		n, err := lmmc.Init(d, lmmc.Config{Nodes: ids, FramesPerPeer: frames, Policy: policy})
		if err != nil {
			return r, fmt.Errorf("lmmc bench: %w", err)
		}
		defer n.Close()
		bn[i] = &benchNode{n: n, snd: n.NewProcess("send"), rcv: n.NewProcess("recv")}
	}
	ps := bn[0].n.PageSize()
	for i, b := range bn {
		if err := b.mapPorts(i, ids, ports); err != nil {
			return r, err
		}
	}
	if pattern == "paper" {
		err = paper(&r, bn, ps)
	} else {
		err = runPattern(&r, bn, schedule(pattern, nodes, ports, cfg.Rounds), cfg.Size, ports)
	}
	for i, b := range bn {
		r.Misplaced += b.n.Driver().Counter(uapi.CtrMisplaced)
		r.Timeouts += b.n.Driver().Counter(uapi.CtrTimeouts)
		s := b.n.Stats()
		r.PagesCopied += s.PagesCopied()
		if v := b.n.Driver().Counter(uapi.CtrViolations); v != 0 {
			err = errors.Join(err, fmt.Errorf("lmmc bench: node %d: %d violations of the datasheet (%v): %w", ids[i], v, b.n.Driver().Region().ReadViolations(), lmmc.ErrDevice))
		}
		if s.BadTag != 0 || s.Errors != 0 {
			err = errors.Join(err, fmt.Errorf("lmmc bench: node %d: %d BAD_TAG, %d errors: %w", ids[i], s.BadTag, s.Errors, lmmc.ErrDevice))
		}
	}
	if r.Writes > 0 {
		r.FaultRate = float64(r.Faults) / float64(r.Writes)
	}
	return r, err
}

// benchDevices starts one device per node on an in-memory hub, each
// port recording what it sends into cw when cw is set: every frame on the
// hub is sent by one of them, so the capture holds each frame once.
func benchDevices(ids []uint16, cw *capture.Writer, check bool) (*vdev.Local, error) {
	cfg := vdev.Config{Check: check}
	if cw == nil {
		return vdev.NewLocal(cfg, 0, ids...)
	}
	hub := link.NewHub(BenchFrameMax, 256)
	l, err := vdev.NewLocalPorts(cfg, ids, func(d *vdev.Device) (link.Port, error) {
		p, err := hub.Attach(d.MAC())
		if err != nil {
			return nil, err
		}
		return cw.WrapSent(p), nil
	})
	if l != nil {
		l.Hub = hub
	}
	return l, err
}

// schedule lists the messages of every round.
func schedule(pattern string, nodes, ports, rounds int) [][]msg {
	var s [][]msg
	for r := range rounds {
		var m []msg
		switch pattern {
		case "pingpong": // one message each way per port, ports in turn
			k := r / 2
			if r%2 == 0 {
				m = append(m, msg{0, 1, k % ports})
			} else {
				m = append(m, msg{1, 0, k % ports})
			}
		case "hot": // port 0 every other message, the cold ones in turn between; replies on port 0
			k := r / 2
			port := 0
			if k%2 == 1 && ports > 1 {
				port = 1 + (k/2)%(ports-1)
			}
			if r%2 == 0 {
				m = append(m, msg{0, 1, port})
			} else {
				m = append(m, msg{1, 0, 0})
			}
		case "neighbour": // a ring: each node to both neighbours
			for i := range nodes {
				m = append(m, msg{i, (i + 1) % nodes, r % ports}, msg{i, (i + nodes - 1) % nodes, r % ports})
			}
		case "alltoall":
			for i := range nodes {
				for j := range nodes {
					if i != j {
						m = append(m, msg{i, j, r % ports})
					}
				}
			}
		}
		s = append(s, m)
	}
	return s
}

// NodeLat is one node's writes and their latencies in a pattern run, as
// a node in its own process reports them (NodeReport).
type NodeLat struct {
	Res, Flt       time.Duration
	NRes, NFlt     uint64
	Writes, Faults uint64
	Flts           []time.Duration // every faulting write, for the median
}

// nodeRounds is node me's part of the rounds: it writes its messages of a
// round (the last 8 bytes carry the round number), then polls until every
// message addressed to it in that round has arrived. A lost or misplaced
// write never arrives, so it fails the run with ErrTimeout.
func nodeRounds(me int, b *benchNode, sched [][]msg, size, ports int, L *NodeLat) error {
	ps := b.n.PageSize()
	buf := make([]byte, size)
	got := make([]byte, 8)
	var prev []int // ports written the round before last: consumed now
	for round, ms := range sched {
		var mine []int
		for _, m := range ms {
			if m.src != me {
				continue
			}
			binary.LittleEndian.PutUint64(buf[size-8:], uint64(round+1))
			f0 := b.n.Stats().Faults
			t0 := time.Now()
			if err := b.snd.Write(uint64(m.dst*ports+m.port)*ps, buf); err != nil {
				return err
			}
			dt := time.Since(t0)
			L.Writes++
			if b.n.Stats().Faults != f0 {
				L.Flt += dt
				L.Flts = append(L.Flts, dt)
				L.NFlt++
				L.Faults++
			} else {
				L.Res += dt
				L.NRes++
			}
			mine = append(mine, m.dst*ports+m.port+1)
		}
		for _, m := range ms {
			if m.dst != me {
				continue
			}
			va := uint64(m.src*ports+m.port)*ps + uint64(size-8)
			err := poll(func() (bool, error) {
				_, err := b.rcv.Read(va, got)
				return err == nil && binary.LittleEndian.Uint64(got) == uint64(round+1), err
			})
			if err != nil {
				return fmt.Errorf("node %d round %d: message from node %d port %d: %w", me+1, round, m.src+1, m.port, err)
			}
		}
		for _, p := range prev {
			b.n.Consumed(uint16(p))
		}
		prev = mine
	}
	return nil
}

// runPattern runs every node's rounds, each node on its own goroutine.
func runPattern(r *BenchResult, bn []*benchNode, sched [][]msg, size, ports int) error {
	lats := make([]NodeLat, len(bn))
	var wg sync.WaitGroup
	errs := make([]error, len(bn))
	for me := range bn {
		wg.Go(func() { errs[me] = nodeRounds(me, bn[me], sched, size, ports, &lats[me]) })
	}
	wg.Wait()
	r.addLats(lats)
	return errors.Join(errs...)
}

// addLats files the nodes' write counts and latencies into r.
func (r *BenchResult) addLats(lats []NodeLat) {
	var res, flt time.Duration
	var nres, nflt uint64
	var flts []time.Duration
	for _, L := range lats {
		r.Writes += L.Writes
		r.Faults += L.Faults
		res, flt, nres, nflt = res+L.Res, flt+L.Flt, nres+L.NRes, nflt+L.NFlt
		flts = append(flts, L.Flts...)
	}
	if len(flts) > 0 {
		slices.Sort(flts)
		r.WriteUsFaultingP50 = flts[len(flts)/2].Seconds() * 1e6
	}
	if nres > 0 {
		r.WriteUsResident = res.Seconds() * 1e6 / float64(nres)
	}
	if nflt > 0 {
		r.WriteUsFaulting = flt.Seconds() * 1e6 / float64(nflt)
	}
}

// poll calls arrived until it reports true or fails, for at most
// waitTimeout (then ErrTimeout), yielding the processor between calls.
//
// A receiver polls while what it waits for is being delivered by other
// goroutines: the device engine and every node's management goroutine
// (the paging request, PAGE_DONE, the held data). A goroutine that never
// yields keeps its processor until the Go runtime preempts it, 10-20 ms
// later; with more pollers than processors (4 nodes on 2 cores) every
// paging then waited that long, and the senders' retransmission timers
// (5 ms on the lossless link) ran out while the receiver still held
// their data.
func poll(arrived func() (bool, error)) error {
	deadline := time.Now().Add(waitTimeout)
	for {
		if ok, err := arrived(); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return lmmc.ErrTimeout
		}
		runtime.Gosched()
	}
}

// paper measures the paper's figures between nodes 1 and 2 on port 0 of
// each direction: first message against second, one-way time against
// size (half the round trip), the warm 1-byte write routine, and the
// device's arrival-to-link-memory time.
func paper(r *BenchResult, bn []*benchNode, ps uint64) error {
	a, b := bn[0], bn[1]
	vaAB, vaBA := uint64(1*r.Ports)*ps, uint64(0)
	// Node 1 sends to node 2 at vpage ports and receives from it there;
	// node 2 sends to node 1 at vpage 0 and receives from it there.
	wait := func(p *lmmc.Process, va uint64, want byte) (time.Time, error) {
		got := []byte{0}
		err := poll(func() (bool, error) {
			_, err := p.Read(va, got)
			return err == nil && got[0] == want, err
		})
		if err != nil {
			return time.Time{}, err
		}
		return time.Now(), nil
	}
	// First message (node 1 -> 2, first use: a fault and a page-in) and
	// second (node 2 -> 1, also its first use of its port), one-way each,
	// both clocks being this process's.
	t0 := time.Now()
	if err := a.snd.Write(vaAB, []byte{1}); err != nil {
		return err
	}
	t1, err := wait(b.rcv, 0, 1) // node 2 receives node 1's port at its vpage 0
	if err != nil {
		return fmt.Errorf("first message: %w", err)
	}
	if err := b.snd.Write(vaBA, []byte{2}); err != nil {
		return err
	}
	t2, err := wait(a.rcv, vaAB, 2)
	if err != nil {
		return fmt.Errorf("second message: %w", err)
	}
	r.FirstMsgUs = t1.Sub(t0).Seconds() * 1e6
	r.SecondMsgUs = t2.Sub(t1).Seconds() * 1e6
	// One-way against size: warm ping-pong on the same ports.
	const iters = 200
	seq := byte(3)
	for _, size := range []int{8, 64, 256, 1024, 4096} {
		if uint64(size) > ps {
			break
		}
		buf := make([]byte, size)
		start := time.Now()
		for range iters {
			seq++
			buf[size-1] = seq
			if err := a.snd.Write(vaAB, buf); err != nil {
				return err
			}
			if _, err := wait(b.rcv, uint64(size-1), seq); err != nil {
				return err
			}
			seq++
			buf[size-1] = seq
			if err := b.snd.Write(vaBA, buf); err != nil {
				return err
			}
			if _, err := wait(a.rcv, vaAB+uint64(size-1), seq); err != nil {
				return err
			}
		}
		r.OneWay = append(r.OneWay, SizeTime{size, time.Since(start).Seconds() * 1e6 / (2 * iters)})
	}
	// Warm 1-byte write routine, and arrival to link memory (device trace
	// stamps) and to a polling reader.
	b.n.Driver().SetTrace(true)
	defer b.n.Driver().SetTrace(false)
	var wr, dev, rd time.Duration
	devN := 0
	for range iters {
		seq++
		t0 := time.Now()
		if err := a.snd.Write(vaAB, []byte{seq}); err != nil {
			return err
		}
		wr += time.Since(t0)
		t1, err := wait(b.rcv, 0, seq)
		if err != nil {
			return err
		}
		rd += t1.Sub(t0)
		if ns, ok := devSpan(b.n.Driver()); ok {
			dev += time.Duration(ns)
			devN++
		}
	}
	r.WriteRoutineUs = wr.Seconds() * 1e6 / iters
	if devN > 0 {
		r.ArrivalToLinkMemUs = dev.Seconds() * 1e6 / float64(devN)
	}
	r.ArrivalToReaderUs = rd.Seconds() * 1e6 / iters
	st := a.n.Stats()
	r.Writes, r.Faults = st.Writes, st.Faults
	return nil
}

// devSpan is the device's arrival-to-link-memory time for the frame it
// placed last. The device stamps TRACE_RX for every data frame it takes
// off the link, a retransmitted duplicate too, so under a retransmission
// the RX stamp can postdate the placement it is paired with: such a pair
// measures nothing and is left out (ok false) rather than averaged in
// as a negative time.
func devSpan(d *driver.Driver) (ns int64, ok bool) {
	placed := d.TraceStamp(uapi.TracePlaced)
	rx := d.TraceStamp(uapi.TraceRx)
	if rx == 0 || placed < rx {
		return 0, false
	}
	return placed - rx, true
}
