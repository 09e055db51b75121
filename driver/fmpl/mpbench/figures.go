package mpbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/fmpl"
	"github.com/dimmnet/dimmnet/driver/fmpl/blacs"
	"github.com/dimmnet/dimmnet/driver/ompi"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/vdev"
)

// Fig is one point of one of the FMPL paper's Figs. 7-11, as mpbench
// --figures --json prints it: the figure, the library, how its ranks ran,
// the rank count and message size, and the figure's quantity (µs for the
// barrier, the 8 KB broadcast and the 8 KB reduction; MB/s for the
// point-to-point and broadcast bandwidths, with the one-way µs they come
// from).
type Fig struct {
	Figure string `json:"figure"`
	// Lib is fmpl (link-memory buffers, zero copy), fmpl-copy (host
	// buffers, copied through link memory), blacs-fmpl or ompi.
	Lib string `json:"lib"`
	// Where the ranks ran: "processes" (a process each, on Medium),
	// "inprocess" (one Go process, a device each on an in-memory link) or
	// Open MPI's "vader".
	Where  string  `json:"where"`
	Medium string  `json:"medium,omitempty"`
	Ranks  int     `json:"ranks"`
	Size   int     `json:"size"`
	US     float64 `json:"us"`
	MBps   float64 `json:"mbps,omitempty"`
	// Cores is how many cores the ranks shared: every figure is "N ranks
	// on Cores cores".
	Cores int `json:"cores"`
}

// FigOptions chooses a figure sweep.
type FigOptions struct {
	// Ranks are the rank counts of Figs. 8, 9 and 11 (default 2..16); the
	// largest is Fig. 10's.
	Ranks []int
	// MaxSize is the largest message of Figs. 7 and 10 (default 16 MiB).
	MaxSize int
	// Scale divides iteration counts (quick runs).
	Scale int
	// Link is the processes' medium (default shm).
	Link string
	// InProcess and Processes choose how ranks run (neither: both).
	InProcess, Processes bool
	// NoOMPI leaves Open MPI out.
	NoOMPI bool
	// Loops is how many timed loops an operation's median is over
	// (default 5; quick runs take 1).
	Loops int
}

func (o *FigOptions) defaults() {
	if len(o.Ranks) == 0 {
		for p := 2; p <= 16; p++ {
			o.Ranks = append(o.Ranks, p)
		}
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
	if o.Loops == 0 {
		o.Loops = 5
	}
	if !o.InProcess && !o.Processes {
		o.InProcess, o.Processes = true, true
	}
}

func (o FigOptions) maxRanks() int {
	m := 0
	for _, p := range o.Ranks {
		m = max(m, p)
	}
	return m
}

// ErrFigRanks reports a rank count a sweep cannot run (below 2).
var ErrFigRanks = errors.New("mpbench: figures need at least 2 ranks")

// Figures sweeps the FMPL paper's Figs. 7-11: for every rank count the
// barrier, the 8 KB broadcast (FMPL's and BLACS-FMPL's GEBS2D/GEBR2D) and
// the 8 KB reduction; at 2 ranks the point-to-point bandwidth (FMPL zero
// copy and copying, BLACS-FMPL); at the largest rank count the broadcast
// bandwidth (FMPL, BLACS-FMPL) over sizes; ranks as processes and in one
// process, and Open MPI (vader, oversubscribed) on the same patterns in
// the same run. log hears progress.
func Figures(o FigOptions, log io.Writer) ([]Fig, error) {
	o.defaults()
	for _, p := range o.Ranks {
		if p < 2 {
			return nil, fmt.Errorf("%w: %d", ErrFigRanks, p)
		}
	}
	var out []Fig
	for _, p := range o.Ranks {
		if o.Processes {
			fmt.Fprintf(log, "mpbench figures: %d ranks as processes on %s (%d cores)\n", p, o.Link, runtime.NumCPU())
			r, err := figProcesses(o, p)
			if err != nil {
				return out, fmt.Errorf("%d ranks as processes: %w", p, err)
			}
			out = append(out, r...)
		}
		if o.InProcess {
			fmt.Fprintf(log, "mpbench figures: %d ranks in one process (%d cores)\n", p, runtime.NumCPU())
			r, err := figInProcess(o, p)
			if err != nil {
				return out, fmt.Errorf("%d ranks in one process: %w", p, err)
			}
			out = append(out, r...)
		}
	}
	if !o.NoOMPI {
		r, err := figOMPI(o, log)
		if err != nil {
			fmt.Fprintf(log, "mpbench figures: Open MPI skipped: %v\n", err)
		}
		out = append(out, r...)
	}
	return out, nil
}

// figRegion is the device region a figure rank needs: two MaxSize
// buffers and FMPL's and BLACS's areas, as a power of two.
func figRegion(o FigOptions) int {
	r := 16 << 20
	for r < 2*o.MaxSize+(8<<20) {
		r *= 2
	}
	return r
}

// figInProcess runs p ranks as goroutines of this process, each with its
// own device on one in-memory link and its own driver (run to completion).
func figInProcess(o FigOptions, p int) ([]Fig, error) {
	l, err := vdev.NewLocal(vdev.Config{RegionSize: figRegion(o)}, 0, ranks.Nodes(p)...)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	recs := make([][]Fig, p)
	errs := make([]error, p)
	var wg sync.WaitGroup
	for r, dev := range l.Devices {
		wg.Go(func() {
			d, err := driver.Open(driver.InProcessDevice(dev))
			if err != nil {
				errs[r] = err
				return
			}
			defer d.Close()
			w, err := fmpl.Init(d, fmpl.Config{Rank: r, Size: p, Count: 64})
			if err != nil {
				errs[r] = err
				return
			}
			recs[r], errs[r] = figRank(w, o, "inprocess", "")
			errs[r] = errors.Join(errs[r], w.Finalize())
		})
	}
	wg.Wait()
	return recs[0], errors.Join(errs...)
}

const roleFig = "mpbench-figrank"

func init() { subproc.Register(roleFig, childFig) }

// figProcesses launches p rank processes of this binary on o.Link.
func figProcesses(o FigOptions, p int) ([]Fig, error) {
	opts, _ := json.Marshal(o)
	out, err := ranks.RunLocal(ranks.LocalJob{Role: roleFig, NP: p, Link: o.Link, NSPrefix: "dimmnet-mpfig-", ChildEnv: "MPBENCH_CHILD",
		Args: func(shm, peers string) []string { return []string{shm, peers, string(opts)} }})
	if err != nil {
		return nil, err
	}
	return subproc.Records[Fig](out)
}

func childFig(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("mpbench figure rank: want 3 arguments, got %q", args)
	}
	var o FigOptions
	if err := json.Unmarshal([]byte(args[2]), &o); err != nil {
		return fmt.Errorf("mpbench figure rank: options: %w", err)
	}
	l, ok, err := ranks.FromEnv()
	if err != nil || !ok {
		return fmt.Errorf("mpbench figure rank: launch environment: %v", err)
	}
	dev, err := ranks.Open(ranks.Options{Link: o.Link, Dir: args[0], Peers: args[1], Node: uint16(l.Rank + 1),
		RegionSize: figRegion(o), LocalRanks: l.LocalSize, LocalRank: l.LocalRank, Bind: true})
	if err != nil {
		return err
	}
	w, err := fmpl.Init(dev.Driver, fmpl.Config{Rank: l.Rank, Size: l.Size, Count: 64})
	if err != nil {
		dev.Close()
		return err
	}
	recs, err := figRank(w, o, "processes", o.Link)
	if err != nil {
		dev.Close()
		return err
	}
	if err := errors.Join(w.Finalize(), dev.Close()); err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range recs {
		enc.Encode(r)
	}
	return nil
}

// figRank is one rank's part of the figures at the world's size; rank 0
// returns the records. Every operation's time is the median of five
// loops' per-operation means on rank 0, roots rotating as the paper's did;
// broadcast and reduction results are checked.
func figRank(w *fmpl.World, o FigOptions, where, medium string) ([]Fig, error) {
	p := w.Size()
	me := w.Rank()
	cores := runtime.NumCPU()
	var recs []Fig
	add := func(fig, lib string, size int, us float64) {
		if me != 0 {
			return
		}
		f := Fig{Figure: fig, Lib: lib, Where: where, Medium: medium, Ranks: p, Size: size, US: us, Cores: cores}
		if fig == "7" || fig == "10" {
			f.MBps = float64(size) / us
		}
		recs = append(recs, f)
	}
	// timed runs op iters times per loop, o.Loops loops, barrier-separated.
	timed := func(iters int, op func(i int) error) (float64, error) {
		var per []float64
		for l := 0; l < o.Loops; l++ {
			if err := w.Barrier(fmpl.CommWorld); err != nil {
				return 0, err
			}
			t0 := monotime.Now()
			for i := 0; i < iters; i++ {
				if err := op(l*iters + i); err != nil {
					return 0, err
				}
			}
			per = append(per, us(monotime.Now()-t0)/float64(iters))
		}
		return median(per), nil
	}
	small, err := w.Alloc(8192)
	if err != nil {
		return nil, err
	}
	work, _ := w.Alloc(8192)
	n := max(2, 200/o.Scale)
	// FMPL's figures first, then BLACS-FMPL's: a BLACS context puts FMPL
	// into buffered sends (a timeout and a spool, since BLACS sends
	// complete locally), which FMPL's own figures must not run under.
	var ctx *blacs.Context
	for _, lib := range []string{"fmpl", "blacs-fmpl"} {
		if lib == "blacs-fmpl" {
			if ctx, err = blacs.NewContext(w, fmpl.CommWorld, 1, p, blacs.Options{Index: 40, Pack: 64 << 10, Spool: 1 << 20}); err != nil {
				return nil, err
			}
		}
		if lib == "fmpl" {
			// Fig. 8: the barrier.
			t, err := timed(n, func(int) error { return w.Barrier(fmpl.CommWorld) })
			if err != nil {
				return nil, fmt.Errorf("barrier: %w", err)
			}
			add("8", "fmpl", 0, t)
		}
		// Fig. 9: the 8 KB broadcast.
		t, err := timed(n, func(i int) error { return figBcast(w, ctx, lib, small, i%p, i) })
		if err != nil {
			return nil, fmt.Errorf("%s bcast 8 KB: %w", lib, err)
		}
		add("9", lib, 8192, t)
		if lib == "fmpl" {
			// Fig. 11: the 8 KB reduction (float64 sums).
			t, err = timed(n, func(i int) error {
				root := i % p
				check := i%10 == 0
				if check {
					fill64(small, me)
				}
				if err := w.Reduce(small, 1024, fmpl.Sum(fmpl.Float64), root, fmpl.CommWorld, work); err != nil {
					return err
				}
				if me == root && check {
					return checkSum64(small, p)
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("reduce 8 KB: %w", err)
			}
			add("11", "fmpl", 8192, t)
		}
		if p == 2 {
			libs := []string{"fmpl", "fmpl-copy"}
			if lib == "blacs-fmpl" {
				libs = []string{lib}
			}
			if err := figPointToPoint(w, ctx, o, libs, add); err != nil {
				return nil, err
			}
		}
		if p == o.maxRanks() {
			big, err := w.Alloc(o.MaxSize)
			if err != nil {
				return nil, err
			}
			for size := 8; size <= o.MaxSize; size *= 8 {
				iters := max(2, min(n, (32<<20)/size/o.Scale))
				t, err := timed(iters, func(i int) error { return figBcast(w, ctx, lib, big[:size], i%p, i) })
				if err != nil {
					return nil, fmt.Errorf("%s bcast %d: %w", lib, size, err)
				}
				add("10", lib, size, t)
			}
			w.Free(big)
		}
	}
	w.Free(small)
	w.Free(work)
	if me != 0 {
		return nil, nil
	}
	return recs, nil
}

// figBcast is one broadcast of buf from root by lib, checked every tenth
// operation from the first (the check costs as much as a small broadcast).
func figBcast(w *fmpl.World, ctx *blacs.Context, lib string, buf []byte, root, i int) error {
	me := w.Rank()
	check := i%10 == 0
	if check && me == root {
		stamp(buf, root, i)
	}
	var err error
	if lib == "fmpl" {
		err = w.Bcast(buf, root, fmpl.CommWorld)
	} else {
		a := unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)/8)
		if me == root {
			err = blacs.GEBS2D(ctx, 'A', len(a), 1, a, len(a))
		} else {
			err = blacs.GEBR2D(ctx, 'A', len(a), 1, a, len(a), 0, root)
		}
	}
	if err != nil || !check {
		return err
	}
	return checkStamp(buf, root, i)
}

// figPointToPoint is Fig. 7 on two ranks for libs: the ping-pong's
// one-way time and bandwidth by size, FMPL with link-memory buffers (zero
// copy, "fmpl") and with host buffers (copied through link memory,
// "fmpl-copy"), and BLACS-FMPL's GESD2D/GERV2D of a contiguous column in
// link memory ("blacs-fmpl", needing ctx).
func figPointToPoint(w *fmpl.World, ctx *blacs.Context, o FigOptions, libs []string, add func(fig, lib string, size int, us float64)) error {
	peer := 1 - w.Rank()
	sb, err := w.Alloc(o.MaxSize)
	if err != nil {
		return err
	}
	rb, err := w.Alloc(o.MaxSize)
	if err != nil {
		return err
	}
	defer w.Free(sb)
	defer w.Free(rb)
	hs, hr := make([]byte, o.MaxSize), make([]byte, o.MaxSize)
	f64 := func(b []byte) []float64 {
		return unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/8)
	}
	for _, lib := range libs {
		s, r := sb, rb
		if lib == "fmpl-copy" {
			s, r = hs, hr
		}
		for n := 8; n <= o.MaxSize; n *= 8 {
			one := func(send bool) error {
				switch {
				case lib == "blacs-fmpl" && send:
					return blacs.GESD2D(ctx, n/8, 1, f64(s[:n]), n/8, 0, peer)
				case lib == "blacs-fmpl":
					return blacs.GERV2D(ctx, n/8, 1, f64(r[:n]), n/8, 0, peer)
				case send:
					return w.Send(s[:n], peer, 1, fmpl.CommWorld)
				default:
					_, err := w.Recv(r[:n], peer, 1, fmpl.CommWorld)
					return err
				}
			}
			it := o.iters(n)
			t := make([]float64, 0, it)
			for i := 0; i <= it; i++ {
				if i == it {
					stamp(s[:n], w.Rank(), n)
				}
				t0 := monotime.Now()
				first, second := true, false
				if w.Rank() == 1 {
					first, second = false, true
				}
				if err := one(first); err != nil {
					return err
				}
				if err := one(second); err != nil {
					return err
				}
				if i > 0 {
					t = append(t, us(monotime.Now()-t0)/2)
				}
			}
			if err := checkStamp(r[:n], peer, n); err != nil {
				return fmt.Errorf("%s ping-pong %d bytes: %w", lib, n, err)
			}
			add("7", lib, n, median(t))
		}
	}
	return nil
}

// iters for the figure ping-pong: Options.iters' rule.
func (o FigOptions) iters(n int) int { return Options{Scale: o.Scale}.iters(n) }

// figOMPI runs Open MPI's side of the figures (ompi.c.in's "figures"
// mode) on vader, oversubscribed where the ranks outnumber the cores, at
// every rank count of the sweep.
func figOMPI(o FigOptions, log io.Writer) ([]Fig, error) {
	dir, err := os.MkdirTemp("", "mpbench-figompi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	prog, err := buildOMPI(dir)
	if err != nil {
		return nil, err
	}
	var all []Fig
	for _, p := range o.Ranks {
		fmt.Fprintf(log, "mpbench figures: Open MPI, %d ranks on vader (%d cores)\n", p, runtime.NumCPU())
		out, err := runOMPI(prog, p, ompi.Vader, "figures", strconv.Itoa(o.MaxSize), strconv.Itoa(o.Scale), strconv.Itoa(o.maxRanks()))
		if err != nil {
			return all, err
		}
		recs, err := subproc.Records[Fig](out)
		if err != nil {
			return all, err
		}
		for i := range recs {
			recs[i].Cores = runtime.NumCPU()
		}
		all = append(all, recs...)
	}
	return all, nil
}

// ErrRanksSpec reports a --ranks list that does not parse.
var ErrRanksSpec = errors.New("mpbench: rank counts: want N, A-B or a comma-separated list of them")

// ParseRanks reads a rank-count list: "2-16", "2,4,8,16" or a mix.
func ParseRanks(spec string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", spec, ErrRanksSpec)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q: %w", spec, ErrRanksSpec)
			}
		}
		for p := a; p <= b; p++ {
			if p < 2 {
				return nil, fmt.Errorf("%q: %w", spec, ErrFigRanks)
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
