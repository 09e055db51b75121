package lmmcbench

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/lmmc"
	"github.com/dimmnet/dimmnet/uapi"
)

// NodeReport is what one node of a Bench run across processes reports to
// the process that launched it: its share of the counts Bench sums, its
// tables for the pair check, and (pattern "paper") its clock stamps. The
// stamps are CLOCK_MONOTONIC, one clock for every process of a host, so
// the launcher subtracts one node's from another's.
type NodeReport struct {
	Node        uint16  `json:"node"`
	Lat         NodeLat `json:"lat"`
	Misplaced   uint64  `json:"misplaced"`
	Timeouts    uint64  `json:"timeouts"`
	PagesCopied uint64  `json:"pages_copied"`
	Violations  uint64  `json:"violations"`
	BadTag      uint64  `json:"bad_tag"`
	Errors      uint64  `json:"errors"`
	// Check is the node's own table check (Node.Check) after the run,
	// empty when it held.
	Check string `json:"check,omitempty"`
	// Send and Recv are the frame tables of each connection, by peer.
	Send map[uint16]lmmc.FrameTable `json:"send"`
	Recv map[uint16]lmmc.FrameTable `json:"recv"`
	// Paper is the node's share of pattern "paper".
	Paper *PaperStamps `json:"paper,omitempty"`
}

// PaperStamps is one node's share of pattern "paper" across processes:
// node 1 sends first and times its own write routine and round trips;
// node 2 stamps arrivals and reads its device's trace.
type PaperStamps struct {
	FirstSent, SecondSeen int64      // node 1: before the first write; when the second message arrived
	FirstSeen             int64      // node 2: when the first message arrived
	OneWay                []SizeTime // node 1: half the warm round trip by size
	WriteNs               int64      // node 1: warm 1-byte write routine, summed
	SentSum, SeenSum      int64      // node 1's write starts and node 2's arrivals, summed
	DevNs                 int64      // node 2: device arrival to link memory, summed over DevN pairs
	DevN                  int        // node 2: trace pairs taken (see devSpan)
	Iters                 int
}

// BenchNode runs node me (of cfg.Nodes, or 2 for the two-node patterns)
// of a Bench run on driver d, the other nodes running the same call in
// their own processes over a real medium. barrier must return only once
// every node has called it with the same stage (the launcher's barrier):
// BenchNode calls it with "ready" once its tables are built, so no node
// writes to one whose device is not yet on the medium (its frames would
// be unreachable or wait a retransmission timeout), and with "flushed"
// after its part and a Flush, so no node reads its tables for the pair
// check while another still pages. Then it checks its tables and reports.
func BenchNode(d *driver.Driver, me int, policy, pattern string, ports, frames int, cfg BenchConfig, barrier func(stage string) error) (NodeReport, error) {
	cfg, nodes, err := benchShape(policy, pattern, ports, frames, cfg)
	if err != nil {
		return NodeReport{}, err
	}
	ids := make([]uint16, nodes)
	for i := range ids {
		ids[i] = uint16(i + 1)
	}
	if me < 0 || me >= nodes || d.Node() != ids[me] {
		return NodeReport{}, fmt.Errorf("lmmc bench: node index %d is not device node %d of %v: %w", me, d.Node(), ids, lmmc.ErrConfig)
	}
	n, err := lmmc.Init(d, lmmc.Config{Nodes: ids, FramesPerPeer: frames, Policy: policy})
	if err != nil {
		return NodeReport{}, fmt.Errorf("lmmc bench: %w", err)
	}
	defer n.Close()
	b := &benchNode{n: n, snd: n.NewProcess("send"), rcv: n.NewProcess("recv")}
	if err := b.mapPorts(me, ids, ports); err != nil {
		return NodeReport{}, err
	}
	rep := NodeReport{Node: ids[me], Send: map[uint16]lmmc.FrameTable{}, Recv: map[uint16]lmmc.FrameTable{}}
	if err := barrier("ready"); err != nil {
		return rep, fmt.Errorf("lmmc bench: waiting for the other nodes to start: %w", err)
	}
	if pattern == "paper" {
		rep.Paper, err = paperNode(me, b, ports)
		st := n.Stats()
		rep.Lat.Writes, rep.Lat.Faults = st.Writes, st.Faults
	} else {
		err = nodeRounds(me, b, schedule(pattern, nodes, ports, cfg.Rounds), cfg.Size, ports, &rep.Lat)
	}
	if err != nil {
		return rep, err
	}
	if err := n.Flush(); err != nil {
		return rep, err
	}
	if err := barrier("flushed"); err != nil {
		return rep, fmt.Errorf("lmmc bench: waiting for the other nodes to flush: %w", err)
	}
	if err := n.Check(); err != nil {
		rep.Check = err.Error()
	}
	for _, peer := range ids {
		if s, r, ok := n.FrameTables(peer); ok {
			rep.Send[peer], rep.Recv[peer] = s, r
		}
	}
	rep.Misplaced = d.Counter(uapi.CtrMisplaced)
	rep.Timeouts = d.Counter(uapi.CtrTimeouts)
	rep.Violations = d.Counter(uapi.CtrViolations)
	st := n.Stats()
	rep.PagesCopied, rep.BadTag, rep.Errors = st.PagesCopied(), st.BadTag, st.Errors
	return rep, nil
}

// benchShape checks a Bench run's parameters and fills the defaults; nodes
// is how many nodes the pattern runs on.
func benchShape(policy, pattern string, ports, frames int, cfg BenchConfig) (BenchConfig, int, error) {
	if cfg.Rounds == 0 {
		cfg.Rounds = 400
	}
	if cfg.Size == 0 {
		cfg.Size = 64
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 4
	}
	nodes := cfg.Nodes
	if pattern == "pingpong" || pattern == "hot" || pattern == "paper" {
		nodes = 2
	}
	if ports < 1 || frames < 1 || cfg.Size < 8 || !slices.Contains(Patterns, pattern) || nodes < 2 {
		return cfg, nodes, fmt.Errorf("lmmc bench %s/%s ports %d frames %d: %w", policy, pattern, ports, frames, lmmc.ErrConfig)
	}
	return cfg, nodes, nil
}

// BenchNodes is how many nodes (processes) pattern runs on under cfg.
func BenchNodes(pattern string, cfg BenchConfig) int {
	_, n, _ := benchShape("", pattern, 1, 1, BenchConfig{Nodes: cfg.Nodes, Size: 8})
	return n
}

// MergeReports sums the nodes' reports of one run across processes into
// the result Bench would give, and holds them to the checks Bench and the
// tests hold one process to: no write misplaced, no device error, every
// node's tables consistent, and every sender's send frame table equal to
// its receiver's receive frame table (CheckFrameTables).
func MergeReports(policy, pattern string, ports, frames int, reps []NodeReport) (BenchResult, error) {
	r := BenchResult{Policy: policy, Pattern: pattern, Ports: ports, Frames: frames, Nodes: len(reps)}
	var errs []error
	lats := make([]NodeLat, len(reps))
	byNode := map[uint16]*NodeReport{}
	for i := range reps {
		rp := &reps[i]
		byNode[rp.Node] = rp
		lats[i] = rp.Lat
		r.Misplaced += rp.Misplaced
		r.Timeouts += rp.Timeouts
		r.PagesCopied += rp.PagesCopied
		if rp.Violations != 0 {
			errs = append(errs, fmt.Errorf("lmmc bench: node %d: %d violations of the datasheet: %w", rp.Node, rp.Violations, lmmc.ErrDevice))
		}
		if rp.BadTag != 0 || rp.Errors != 0 {
			errs = append(errs, fmt.Errorf("lmmc bench: node %d: %d BAD_TAG, %d errors: %w", rp.Node, rp.BadTag, rp.Errors, lmmc.ErrDevice))
		}
		if rp.Check != "" {
			errs = append(errs, fmt.Errorf("lmmc bench: node %d tables: %s", rp.Node, rp.Check))
		}
	}
	for _, s := range reps {
		for peer, send := range s.Send {
			rcv := byNode[peer]
			if rcv == nil {
				errs = append(errs, fmt.Errorf("lmmc bench: node %d sends to node %d, which did not report", s.Node, peer))
				continue
			}
			if err := lmmc.CheckFrameTables(s.Node, peer, send, rcv.Recv[s.Node]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if pattern == "paper" {
		a, b := byNode[1], byNode[2]
		if a == nil || b == nil || a.Paper == nil || b.Paper == nil {
			return r, errors.Join(append(errs, fmt.Errorf("lmmc bench: paper: nodes 1 and 2 must both report"))...)
		}
		pa, pb := a.Paper, b.Paper
		r.FirstMsgUs = float64(pb.FirstSeen-pa.FirstSent) / 1e3
		r.SecondMsgUs = float64(pa.SecondSeen-pb.FirstSeen) / 1e3
		r.OneWay = pa.OneWay
		if it := float64(pa.Iters); it > 0 {
			r.WriteRoutineUs = float64(pa.WriteNs) / 1e3 / it
			if pb.DevN > 0 {
				r.ArrivalToLinkMemUs = float64(pb.DevNs) / 1e3 / float64(pb.DevN)
			}
			r.ArrivalToReaderUs = float64(pb.SeenSum-pa.SentSum) / 1e3 / it
		}
		r.Writes, r.Faults = a.Lat.Writes, a.Lat.Faults
	} else {
		r.addLats(lats)
	}
	if r.Writes > 0 {
		r.FaultRate = float64(r.Faults) / float64(r.Writes)
	}
	return r, errors.Join(errs...)
}

// paperNode is node me's part of pattern "paper" across processes, the
// same exchanges as paper in one process: node 1 (me 0) sends on its
// port 0 to node 2 at virtual page ports and receives there; node 2 sends
// to node 1 at page 0 and receives there. Where one process reads one
// clock, each node stamps CLOCK_MONOTONIC; where one goroutine drove both
// ends in turn, node 2 answers each of node 1's timed writes, so node 1
// never writes again before node 2 has taken the last.
func paperNode(me int, b *benchNode, ports int) (*PaperStamps, error) {
	ps := b.n.PageSize()
	const iters = 200
	st := &PaperStamps{Iters: iters}
	peerVA := uint64(1-me) * uint64(ports) * ps // our send and receive page with the other node
	wait := func(va uint64, want byte) (int64, error) {
		got := []byte{0}
		err := poll(func() (bool, error) {
			_, err := b.rcv.Read(va, got)
			return err == nil && got[0] == want, err
		})
		return monotime.Now(), err
	}
	write := func(buf []byte) error { return b.snd.Write(peerVA, buf) }
	var err error
	if me == 0 {
		st.FirstSent = monotime.Now()
		if err := write([]byte{1}); err != nil {
			return nil, err
		}
		if st.SecondSeen, err = wait(peerVA, 2); err != nil {
			return nil, fmt.Errorf("second message: %w", err)
		}
	} else {
		if st.FirstSeen, err = wait(peerVA, 1); err != nil {
			return nil, fmt.Errorf("first message: %w", err)
		}
		if err := write([]byte{2}); err != nil {
			return nil, err
		}
	}
	seq := byte(3)
	for _, size := range []int{8, 64, 256, 1024, 4096} {
		if uint64(size) > ps {
			break
		}
		buf := make([]byte, size)
		start := time.Now()
		for range iters {
			seq++
			if me == 0 {
				buf[size-1] = seq
				if err := write(buf); err != nil {
					return nil, err
				}
			} else if _, err := wait(peerVA+uint64(size-1), seq); err != nil {
				return nil, err
			}
			seq++
			if me == 1 {
				buf[size-1] = seq
				if err := write(buf); err != nil {
					return nil, err
				}
			} else if _, err := wait(peerVA+uint64(size-1), seq); err != nil {
				return nil, err
			}
		}
		if me == 0 {
			st.OneWay = append(st.OneWay, SizeTime{size, time.Since(start).Seconds() * 1e6 / (2 * iters)})
		}
	}
	d := b.n.Driver()
	if me == 1 {
		d.SetTrace(true)
		defer d.SetTrace(false)
	}
	for range iters {
		seq++
		if me == 0 {
			t0 := monotime.Now()
			if err := write([]byte{seq}); err != nil {
				return nil, err
			}
			st.WriteNs += monotime.Now() - t0
			st.SentSum += t0
			if _, err := wait(peerVA, seq); err != nil { // node 2's answer
				return nil, err
			}
			continue
		}
		t1, err := wait(peerVA, seq)
		if err != nil {
			return nil, err
		}
		st.SeenSum += t1
		if ns, ok := devSpan(d); ok {
			st.DevNs += ns
			st.DevN++
		}
		if err := write([]byte{seq}); err != nil {
			return nil, err
		}
	}
	return st, nil
}
