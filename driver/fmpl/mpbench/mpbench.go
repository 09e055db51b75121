// Package mpbench is `dimmnet mpbench`: FMPL's figures (one-way latency
// and bandwidth beside raw PUSH on the same medium, the paper's Tables 1
// and 2, collectives and their tree stage counts) and Open MPI's on the
// same machine in the same run, so every ratio compares numbers taken
// under the same load. Its ranks are processes: it launches its own on
// one host, or runs as one rank of a job mpirun started.
package mpbench

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/fmpl"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/uapi"
)

// Record is one measurement, as --json prints it.
type Record struct {
	Lib      string  `json:"lib"`    // fmpl, raw (the device's PUSH alone), ompi
	Medium   string  `json:"medium"` // shm, udp; Open MPI: vader, tcp, dimmnet
	Test     string  `json:"test"`   // pingpong, table1_send, table2_inorder, barrier, bcast, reduce, stages_...
	Buffer   string  `json:"buffer,omitempty"`
	Size     int     `json:"size"`
	P        int     `json:"p"`
	OnewayUS float64 `json:"oneway_us"` // median
	MBps     float64 `json:"mbps,omitempty"`
	GapUS    float64 `json:"gap_us,omitempty"`
	Gap1US   float64 `json:"gap1_us,omitempty"`
	Stages   []int   `json:"stages,omitempty"` // counted rounds per phase (tree depth; the barrier's dissemination rounds)
}

// Options of a run.
type Options struct {
	NP      int    // ranks to launch (when no launcher started us)
	Link    string // shm, udp or afpacket (launched here: a namespace with a bridge and a veth per rank; needs root)
	MaxSize int    // largest ping-pong message (default 16 MiB)
	Scale   int    // divide iteration counts by this (quick runs)
	NoOMPI  bool
	Stages  int // ranks of the stage-count job (default 8; 0 skips)
}

func (o *Options) defaults() {
	if o.NP == 0 {
		o.NP = 4
	}
	if o.MaxSize == 0 {
		o.MaxSize = 16 << 20
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	if o.Link == "" {
		o.Link = "shm"
	}
}

const roleRank = "mpbench-rank"

func init() { subproc.Register(roleRank, childRank) }

// ErrRankFailed reports a launched rank that failed (ranks.RunLocal's).
var ErrRankFailed = ranks.ErrRankFailed

// Run measures and returns the records. Under a launcher (mpirun, srun)
// this process is one rank and only rank 0 returns records; Open MPI is
// not run from inside a job. Otherwise it launches o.NP ranks of its own,
// then Open MPI beside them.
func Run(o Options, log io.Writer) ([]Record, error) {
	o.defaults()
	if l, ok, err := ranks.FromEnv(); err != nil {
		return nil, err
	} else if ok && os.Getenv("MPBENCH_CHILD") == "" {
		return rankRun(o, l, "", "")
	}
	fmt.Fprintf(log, "mpbench: %d FMPL ranks on the %s link\n", o.NP, o.Link)
	recs, err := launch(o, o.NP, "bench")
	if err != nil {
		return recs, err
	}
	if o.Stages > 0 {
		fmt.Fprintf(log, "mpbench: stage counts on %d ranks\n", o.Stages)
		st, err := launch(o, o.Stages, "stages")
		if err != nil {
			return recs, err
		}
		recs = append(recs, st...)
	}
	if !o.NoOMPI {
		fmt.Fprintf(log, "mpbench: Open MPI, %d ranks, vader, tcp and dimmnet (mtl ofi)\n", o.NP)
		om, err := RunOMPI(o.NP, o.MaxSize, o.Scale, log)
		if err != nil {
			fmt.Fprintf(log, "mpbench: Open MPI skipped: %v\n", err)
		}
		recs = append(recs, om...)
	}
	return recs, nil
}

// launch starts np rank processes of this binary on one host and returns
// rank 0's records.
func launch(o Options, np int, what string) ([]Record, error) {
	out, err := ranks.RunLocal(ranks.LocalJob{Role: roleRank, NP: np, Link: o.Link, NSPrefix: "dimmnet-mpbench-", ChildEnv: "MPBENCH_CHILD",
		Args: func(shm, peers string) []string {
			return []string{what, shm, peers, o.Link, strconv.Itoa(o.MaxSize), strconv.Itoa(o.Scale)}
		}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return subproc.Records[Record](out)
}

func childRank(args []string) error {
	if len(args) != 6 {
		return fmt.Errorf("mpbench rank: want 6 arguments, got %q", args)
	}
	l, ok, err := ranks.FromEnv()
	if err != nil || !ok {
		return fmt.Errorf("mpbench rank: launch environment: %v", err)
	}
	o := Options{Link: args[3]}
	o.MaxSize, _ = strconv.Atoi(args[4])
	o.Scale, _ = strconv.Atoi(args[5])
	o.defaults()
	var recs []Record
	if args[0] == "stages" {
		recs, err = stagesRun(o, l, args[1], args[2])
	} else {
		recs, err = rankRun(o, l, args[1], args[2])
	}
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range recs {
		enc.Encode(r)
	}
	return nil
}

// rank is one benchmark rank: its device and FMPL.
type rank struct {
	dev *ranks.Device
	w   *fmpl.World
	o   Options
	med string
}

func openRank(o Options, l ranks.Launch, dir, peers string) (*rank, error) {
	dev, err := ranks.Open(ranks.Options{Link: o.Link, Dir: dir, Peers: peers, Node: uint16(l.Rank + 1), LocalRanks: l.LocalSize, LocalRank: l.LocalRank, Bind: true})
	if err != nil {
		return nil, err
	}
	w, err := fmpl.Init(dev.Driver, fmpl.Config{Rank: l.Rank, Size: l.Size, Count: 1024})
	if err != nil {
		dev.Close()
		return nil, err
	}
	return &rank{dev: dev, w: w, o: o, med: o.Link}, nil
}

func (rk *rank) close() error {
	err := rk.w.Finalize()
	return errors.Join(err, rk.dev.Close())
}

// sizes are the ping-pong's message sizes: 8 B to MaxSize by factors of 8.
func (o Options) sizes() []int {
	var s []int
	for n := 8; n <= o.MaxSize; n *= 8 {
		s = append(s, n)
	}
	return s
}

// iters is how many round trips a size gets (the first one, a warm-up,
// is not counted: the paper measured from the second exchange on).
func (o Options) iters(n int) int {
	return max(8, min(2000/o.Scale, (128<<20)/n/o.Scale))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(ns int64) float64 { return float64(ns) / 1e3 }

// rankRun is the whole benchmark on one rank; rank 0 returns the records.
func rankRun(o Options, l ranks.Launch, dir, peers string) ([]Record, error) {
	rk, err := openRank(o, l, dir, peers)
	if err != nil {
		return nil, err
	}
	var recs []Record
	steps := []func() ([]Record, error){rk.raw, rk.pingpong, rk.table1, rk.table2, rk.collectives}
	for _, step := range steps {
		if err := rk.w.Barrier(fmpl.CommWorld); err != nil {
			return nil, err
		}
		r, err := step()
		if err != nil {
			rk.dev.Close()
			return nil, err
		}
		recs = append(recs, r...)
	}
	if err := rk.close(); err != nil {
		return nil, err
	}
	if l.Rank != 0 {
		return nil, nil
	}
	return recs, nil
}

// exchange swaps one word with the peer of a pair (ranks 0 and 1).
func (rk *rank) exchange(v uint64) (uint64, error) {
	w := rk.w
	var b, r [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	peer := 1 - w.Rank()
	if w.Rank() == 0 {
		if err := w.Send(b[:], peer, 0, fmpl.CommWorld); err != nil {
			return 0, err
		}
		if _, err := w.Recv(r[:], peer, 0, fmpl.CommWorld); err != nil {
			return 0, err
		}
	} else {
		if _, err := w.Recv(r[:], peer, 0, fmpl.CommWorld); err != nil {
			return 0, err
		}
		if err := w.Send(b[:], peer, 0, fmpl.CommWorld); err != nil {
			return 0, err
		}
	}
	return binary.LittleEndian.Uint64(r[:]), nil
}

// raw is the device's own PUSH ping-pong between ranks 0 and 1 on the
// same medium, measured the same way: the floor FMPL is judged by.
func (rk *rank) raw() ([]Record, error) {
	w := rk.w
	if w.Rank() > 1 {
		return nil, nil
	}
	sb, err := w.Alloc(rk.o.MaxSize)
	if err != nil {
		return nil, err
	}
	rb, err := w.Alloc(rk.o.MaxSize)
	if err != nil {
		return nil, err
	}
	defer w.Free(sb)
	defer w.Free(rb)
	la, _ := rk.linkAddr(rb)
	sa, _ := rk.linkAddr(sb)
	remote, err := rk.exchange(la)
	if err != nil {
		return nil, err
	}
	// Rank 1 is in the raw loop before rank 0 pushes: its go-ahead is
	// the last FMPL message, and statuses that are FMPL's go back to it.
	if err := w.Quiesce(); err != nil {
		return nil, err
	}
	var tok [8]byte
	if w.Rank() == 0 {
		if _, err := w.Recv(tok[:], 1, 0, fmpl.CommWorld); err != nil {
			return nil, err
		}
	} else if err := w.Send(tok[:], 0, 0, fmpl.CommWorld); err != nil {
		return nil, err
	}
	d := w.Driver()
	peerNode := uint16(2 - w.Rank())
	wait := func() error {
		for {
			s, err := d.Wait(0)
			if err != nil {
				return err
			}
			if s.Type == uapi.StPUSH && s.Addr == la {
				return nil
			}
			w.Pass(s)
		}
	}
	// A ping posted with the doorbell not rung is sent (driver.Posted):
	// it leaves at the device's next look, and its reply still comes.
	var recs []Record
	for _, n := range rk.o.sizes() {
		it := rk.o.iters(n)
		t := make([]float64, 0, it)
		for i := 0; i <= it; i++ {
			t0 := monotime.Now()
			if w.Rank() == 0 {
				if _, err := d.Push(peerNode, sa, remote, uint32(n), 0, 0); !driver.Posted(err) {
					return nil, err
				}
				if err := wait(); err != nil {
					return nil, err
				}
			} else {
				if err := wait(); err != nil {
					return nil, err
				}
				if _, err := d.Push(peerNode, sa, remote, uint32(n), 0, 0); !driver.Posted(err) {
					return nil, err
				}
			}
			if i > 0 {
				t = append(t, us(monotime.Now()-t0)/2)
			}
		}
		m := median(t)
		recs = append(recs, Record{Lib: "raw", Medium: rk.med, Test: "pingpong", Buffer: "link", Size: n, P: 2, OnewayUS: m, MBps: float64(n) / m})
	}
	st, err := rk.rawStages(sa, la, remote, wait)
	if err != nil {
		return nil, err
	}
	return append(recs, st...), nil
}

// rawStages repeats the 8-byte raw ping-pong with the devices' stage
// stamps on (apart from the timed run: stamping costs a little) and
// returns the medians of one ping's device stages, beside Table 1: the
// sender's device from descriptor to frame, the link, the receiver's
// placement and its status. The stamps are CLOCK_MONOTONIC in both
// processes, so they subtract across them.
func (rk *rank) rawStages(sa, la, remote uint64, wait func() error) ([]Record, error) {
	w := rk.w
	d := w.Driver()
	d.SetTrace(true)
	defer d.SetTrace(false)
	peerNode := uint16(2 - w.Rank())
	it := 1000 / rk.o.Scale
	stamps := make([]byte, 0, 24*it)
	for i := 0; i <= it; i++ {
		if w.Rank() == 0 {
			if _, err := d.Push(peerNode, sa, remote, 8, 0, 0); !driver.Posted(err) {
				return nil, err
			}
			if err := wait(); err != nil {
				return nil, err
			}
			// The ping's own stamps: nothing else left this device since.
			stamps = binary.LittleEndian.AppendUint64(stamps, uint64(d.TraceStamp(uapi.TraceCmdSeen)))
			stamps = binary.LittleEndian.AppendUint64(stamps, uint64(d.TraceStamp(uapi.TraceTx)))
			stamps = binary.LittleEndian.AppendUint64(stamps, 0)
		} else {
			if err := wait(); err != nil {
				return nil, err
			}
			for _, k := range []int{uapi.TraceRx, uapi.TracePlaced, uapi.TraceStatus} {
				stamps = binary.LittleEndian.AppendUint64(stamps, uint64(d.TraceStamp(k)))
			}
			if _, err := d.Push(peerNode, sa, remote, 8, 0, 0); !driver.Posted(err) {
				return nil, err
			}
		}
	}
	// FMPL again: the peer's stamps come to rank 0.
	peer := 1 - w.Rank()
	other := make([]byte, len(stamps))
	if w.Rank() == 0 {
		if _, err := w.Recv(other, peer, 0, fmpl.CommWorld); err != nil {
			return nil, err
		}
	} else {
		return nil, w.Send(stamps, peer, 0, fmpl.CommWorld)
	}
	at := func(b []byte, i, k int) int64 { return int64(binary.LittleEndian.Uint64(b[24*i+8*k:])) }
	// Descriptor to frame taken by the receiver, as one stage: on the
	// shared-memory link the receiver takes the frame before the sender's
	// pass has stamped it sent (the TX stamp follows the copy into the
	// ring), so the two apart would show a negative link.
	var send, place, status []float64
	for i := 1; i <= it; i++ { // the first exchange is the warm-up
		cmd, tx := at(stamps, i, 0), at(stamps, i, 1)
		rx, placed, st := at(other, i, 0), at(other, i, 1), at(other, i, 2)
		if cmd == 0 || tx == 0 || rx == 0 || placed == 0 || st == 0 {
			continue
		}
		send = append(send, us(rx-cmd))
		place = append(place, us(placed-rx))
		status = append(status, us(st-placed))
	}
	var recs []Record
	for _, s := range []struct {
		name string
		v    []float64
	}{{"device_send_link", send}, {"device_place", place}, {"device_status", status}} {
		recs = append(recs, Record{Lib: "raw", Medium: rk.med, Test: s.name, Size: 8, P: 2, OnewayUS: median(s.v)})
	}
	return recs, nil
}

func (rk *rank) linkAddr(b []byte) (uint64, bool) {
	return linkOffset(rk.w.Driver().LinkMem(), b)
}

// pingpong is FMPL's blocking Send/Recv ping-pong between ranks 0 and 1,
// buffers in link memory (zero copy) and in host memory (copied through
// link memory), contents checked on the last exchange.
func (rk *rank) pingpong() ([]Record, error) {
	w := rk.w
	if w.Rank() > 1 {
		return nil, nil
	}
	peer := 1 - w.Rank()
	var recs []Record
	for _, buffer := range []string{"link", "host"} {
		var sb, rb []byte
		if buffer == "link" {
			var err error
			if sb, err = w.Alloc(rk.o.MaxSize); err != nil {
				return nil, err
			}
			if rb, err = w.Alloc(rk.o.MaxSize); err != nil {
				return nil, err
			}
		} else {
			sb, rb = make([]byte, rk.o.MaxSize), make([]byte, rk.o.MaxSize)
		}
		for _, n := range rk.o.sizes() {
			it := rk.o.iters(n)
			t := make([]float64, 0, it)
			for i := 0; i <= it; i++ {
				if i == it {
					stamp(sb[:n], w.Rank(), n)
				}
				t0 := monotime.Now()
				if w.Rank() == 0 {
					if err := w.Send(sb[:n], peer, 1, fmpl.CommWorld); err != nil {
						return nil, err
					}
					if _, err := w.Recv(rb[:n], peer, 1, fmpl.CommWorld); err != nil {
						return nil, err
					}
				} else {
					if _, err := w.Recv(rb[:n], peer, 1, fmpl.CommWorld); err != nil {
						return nil, err
					}
					if err := w.Send(sb[:n], peer, 1, fmpl.CommWorld); err != nil {
						return nil, err
					}
				}
				if i > 0 {
					t = append(t, us(monotime.Now()-t0)/2)
				}
			}
			if err := checkStamp(rb[:n], peer, n); err != nil {
				return nil, fmt.Errorf("ping-pong %d bytes in %s memory: %w", n, buffer, err)
			}
			m := median(t)
			recs = append(recs, Record{Lib: "fmpl", Medium: rk.med, Test: "pingpong", Buffer: buffer, Size: n, P: 2, OnewayUS: m, MBps: float64(n) / m})
		}
		if buffer == "link" {
			w.Free(sb)
			w.Free(rb)
		}
	}
	return recs, nil
}

func stamp(b []byte, r, n int) {
	for i := range b {
		b[i] = byte(r*13 + n + i)
	}
}

func checkStamp(b []byte, r, n int) error {
	for i := range b {
		if b[i] != byte(r*13+n+i) {
			return fmt.Errorf("byte %d differs", i)
		}
	}
	return nil
}

// table1 times the stages of one 8-byte Send and Recv with the CPU clock
// (the paper's Table 1), medians over a ping-pong.
func (rk *rank) table1() ([]Record, error) {
	w := rk.w
	if w.Rank() > 1 {
		return nil, nil
	}
	peer := 1 - w.Rank()
	b := make([]byte, 8)
	w.SetBreakdown(true)
	defer w.SetBreakdown(false)
	it := 2000 / rk.o.Scale
	var s [6][]float64
	for i := 0; i <= it; i++ {
		var err error
		if w.Rank() == 0 {
			if err = w.Send(b, peer, 2, fmpl.CommWorld); err == nil {
				_, err = w.Recv(b, peer, 2, fmpl.CommWorld)
			}
		} else {
			if _, err = w.Recv(b, peer, 2, fmpl.CommWorld); err == nil {
				err = w.Send(b, peer, 2, fmpl.CommWorld)
			}
		}
		if err != nil {
			return nil, err
		}
		if i == 0 {
			continue
		}
		bd := w.LastBreakdown()
		for j, v := range []int64{bd.SendInit, bd.SendHeaderWait, bd.SendData, bd.RecvInit, bd.RecvHeaderSend, bd.RecvData} {
			s[j] = append(s[j], us(v))
		}
	}
	if w.Rank() != 0 {
		return nil, nil
	}
	names := []string{"table1_send_init", "table1_send_header_wait", "table1_send_data", "table1_recv_init", "table1_recv_header_send", "table1_recv_data"}
	var recs []Record
	for j, n := range names {
		recs = append(recs, Record{Lib: "fmpl", Medium: rk.med, Test: n, Size: 8, P: 2, OnewayUS: median(s[j])})
	}
	return recs, nil
}

// table2 posts 600 Irecvs of 4-byte messages on both ranks (tags in order,
// then reversed), times the gap per post against the gap of one post
// alone, and the one-way latency of the sends that find their headers
// already there.
func (rk *rank) table2() ([]Record, error) {
	w := rk.w
	if w.Rank() > 1 {
		return nil, nil
	}
	const k = 600
	peer := 1 - w.Rank()
	bufs, err := w.Alloc(8 * k)
	if err != nil {
		return nil, err
	}
	defer w.Free(bufs)
	out := make([]byte, 4)
	var recs []Record
	for _, rev := range []bool{false, true} {
		// The gap of one post alone: post, and let the peer's send complete it.
		var g1 []float64
		for i := 0; i < 200/rk.o.Scale+1; i++ {
			t0 := monotime.Now()
			if err := w.Irecv(bufs[:4], peer, 3, fmpl.CommWorld); err != nil {
				return nil, err
			}
			g1 = append(g1, us(monotime.Now()-t0))
			if err := w.Send(out, peer, 3, fmpl.CommWorld); err != nil {
				return nil, err
			}
			if _, err := w.IrecvWait(peer, 3, fmpl.CommWorld); err != nil {
				return nil, err
			}
		}
		// Three bursts of 600 posts: the gap is the median burst's mean,
		// the latency the median over all 1800 sends.
		var gaps []float64
		t := make([]float64, 0, 3*k)
		for burst := 0; burst < 3; burst++ {
			if _, err := rk.exchange(0); err != nil {
				return nil, err
			}
			t0 := monotime.Now()
			for i := 0; i < k; i++ {
				tag := i
				if rev {
					tag = k - 1 - i
				}
				if err := w.Irecv(bufs[8*tag:8*tag+4], peer, 10+tag, fmpl.CommWorld); err != nil {
					return nil, err
				}
			}
			gaps = append(gaps, us(monotime.Now()-t0)/k)
			if _, err := rk.exchange(0); err != nil { // every header is at its sender now
				return nil, err
			}
			for i := 0; i < k; i++ {
				t0 := monotime.Now()
				if w.Rank() == 0 {
					if err := w.Send(out, peer, 10+i, fmpl.CommWorld); err != nil {
						return nil, err
					}
					if _, err := w.IrecvWait(peer, 10+i, fmpl.CommWorld); err != nil {
						return nil, err
					}
				} else {
					if _, err := w.IrecvWait(peer, 10+i, fmpl.CommWorld); err != nil {
						return nil, err
					}
					if err := w.Send(out, peer, 10+i, fmpl.CommWorld); err != nil {
						return nil, err
					}
				}
				t = append(t, us(monotime.Now()-t0)/2)
			}
		}
		gap := median(gaps)
		name := "table2_inorder"
		if rev {
			name = "table2_reverse"
		}
		recs = append(recs, Record{Lib: "fmpl", Medium: rk.med, Test: name, Size: 4, P: 2, GapUS: gap, Gap1US: median(g1), OnewayUS: median(t)})
	}
	if w.Rank() != 0 {
		return nil, nil
	}
	return recs, nil
}

// collectives times barrier, bcast of 8 KB and 8 MB and reduce of 8 KB
// (float64 sums), roots rotating, at p = 2, 3, 4 (communicators of the
// first p ranks), per-operation time on the group's rank 0, median of 5
// loops; results are checked.
func (rk *rank) collectives() ([]Record, error) {
	w := rk.w
	var recs []Record
	big, err := w.Alloc(8 << 20)
	if err != nil {
		return nil, err
	}
	small, _ := w.Alloc(8192)
	work, _ := w.Alloc(8192)
	defer w.Free(big)
	defer w.Free(small)
	defer w.Free(work)
	for p := 2; p <= min(4, w.Size()); p++ {
		key := fmpl.NoKey
		if w.Rank() < p {
			key = 0
		}
		c, err := w.CommCreate(key)
		if err != nil {
			return nil, err
		}
		if c == fmpl.CommNull {
			continue
		}
		me, _ := w.CommRank(c)
		type test struct {
			name  string
			size  int
			iters int
			run   func(i int) error
		}
		tests := []test{
			{"barrier", 0, 100, func(int) error { return w.Barrier(c) }},
			{"bcast", 8192, 100, func(i int) error {
				root := i % p
				check := i%10 == 9 // every tenth: the check costs as much as the bcast
				if me == root && check {
					stamp(small, root, i)
				}
				if err := w.Bcast(small, root, c); err != nil || !check {
					return err
				}
				return checkStamp(small, root, i)
			}},
			{"bcast", 8 << 20, 4, func(i int) error { return w.Bcast(big, i%p, c) }},
			{"reduce", 8192, 100, func(i int) error {
				root := i % p
				check := i%10 == 9
				if check {
					fill64(small, me)
				}
				if err := w.Reduce(small, 1024, fmpl.Sum(fmpl.Float64), root, c, work); err != nil {
					return err
				}
				if me == root && check {
					return checkSum64(small, p)
				}
				return nil
			}},
		}
		for _, ts := range tests {
			iters := max(10, ts.iters/rk.o.Scale) // at least one checked operation
			var per []float64
			for l := 0; l < 5; l++ {
				if err := w.Barrier(c); err != nil {
					return nil, err
				}
				t0 := monotime.Now()
				for i := 0; i < iters; i++ {
					if err := ts.run(i); err != nil {
						return nil, fmt.Errorf("%s %d at p=%d: %w", ts.name, ts.size, p, err)
					}
				}
				per = append(per, us(monotime.Now()-t0)/float64(iters))
			}
			if me == 0 {
				recs = append(recs, Record{Lib: "fmpl", Medium: rk.med, Test: ts.name, Size: ts.size, P: p, OnewayUS: median(per)})
			}
		}
	}
	return recs, nil
}

func fill64(b []byte, me int) {
	for j := 0; j < len(b)/8; j++ {
		binary.LittleEndian.PutUint64(b[8*j:], mathFloat64bits(float64(j+me)))
	}
}

func checkSum64(b []byte, p int) error {
	for j := 0; j < len(b)/8; j++ {
		want := float64(p*j + p*(p-1)/2)
		if got := mathFloat64frombits(binary.LittleEndian.Uint64(b[8*j:])); got != want {
			return fmt.Errorf("reduce element %d: %v, want %v", j, got, want)
		}
	}
	return nil
}

// stagesRun counts the rounds of barrier, bcast and reduce at every
// p from 1 to the job's size (communicators of the first p ranks); the
// maximum over the group's ranks is the tree's depth per phase (the
// barrier's: its dissemination rounds).
func stagesRun(o Options, l ranks.Launch, dir, peers string) ([]Record, error) {
	rk, err := openRank(o, l, dir, peers)
	if err != nil {
		return nil, err
	}
	w := rk.w
	var recs []Record
	b := make([]byte, 8)
	for p := 1; p <= w.Size(); p++ {
		key := fmpl.NoKey
		if w.Rank() < p {
			key = 0
		}
		c, err := w.CommCreate(key)
		if err != nil {
			return nil, err
		}
		if c == fmpl.CommNull {
			continue
		}
		me, _ := w.CommRank(c)
		for _, name := range []string{"barrier", "bcast", "reduce"} {
			switch name {
			case "barrier":
				err = w.Barrier(c)
			case "bcast":
				err = w.Bcast(b, 0, c)
			case "reduce":
				err = w.Reduce(b, 2, fmpl.Sum(fmpl.Int32), 0, c, make([]byte, 8))
			}
			if err != nil {
				return nil, err
			}
			st := w.LastStages()
			m := make([]byte, 8)
			binary.LittleEndian.PutUint32(m, uint32(st.Up))
			binary.LittleEndian.PutUint32(m[4:], uint32(st.Down))
			if err := w.Allreduce(m, 2, fmpl.AbsMax(fmpl.Int32), c, make([]byte, 8)); err != nil {
				return nil, err
			}
			if me == 0 {
				recs = append(recs, Record{Lib: "fmpl", Medium: rk.med, Test: "stages_" + name, P: p,
					Stages: []int{int(binary.LittleEndian.Uint32(m)), int(binary.LittleEndian.Uint32(m[4:]))}})
			}
		}
	}
	if err := rk.close(); err != nil {
		return nil, err
	}
	if l.Rank != 0 {
		return nil, nil
	}
	return recs, nil
}
