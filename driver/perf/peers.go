package perf

import (
	_ "embed"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/dimmnet/dimmnet/driver/ompi"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/subproc"
)

//go:embed ompi.c.in
var ompiSource string

// ErrNoMPI reports a machine without Open MPI's mpicc or mpirun.
var ErrNoMPI = ompi.ErrNoMPI

// OMPI measures Open MPI's two byte transfer layers between two local
// ranks, vader (shared memory) and tcp (loopback), running the three
// patterns: lat and bw at each size, rate at 8 bytes, each windowed
// pattern with window. Each measurement's timed part takes about per.
//
// vader runs as Open MPI configures it here: above its eager limit it
// moves a message with one copy across address spaces (CMA) when the
// kernel lets it; if that mechanism cannot run, the job is run again
// without it and the records' note says so.
func OMPI(sizes []int, window int, per time.Duration) ([]Record, error) {
	dir, err := os.MkdirTemp("", "dimmnet-perf-ompi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	prog, err := ompi.Build(dir, "mpicc", "perf_ompi", ompiSource, "-lm")
	if err != nil {
		return nil, err
	}
	args := []string{"", strconv.FormatFloat(per.Seconds(), 'f', 3, 64), strconv.Itoa(window)}
	for _, s := range sizes {
		args = append(args, strconv.Itoa(s))
	}
	var all []Record
	for _, m := range []struct {
		lib string
		t   ompi.Transport
	}{{LibOMPIVader, ompi.Vader}, {LibOMPITCP, ompi.TCP}} {
		args[0] = m.lib
		job := ompi.Job{NP: 2, T: m.t, Prog: prog, Args: args}
		out, err := ompi.Run(job)
		note := ""
		if err != nil && m.lib == LibOMPIVader {
			job.Env = []string{"OMPI_MCA_btl_vader_single_copy_mechanism=none"}
			out, err = ompi.Run(job)
			note = "single-copy (CMA) unavailable: vader copied through its own buffers"
		}
		if err != nil {
			return all, err
		}
		recs, err := subproc.Records[Record](out)
		if err != nil {
			return all, fmt.Errorf("%s: %w", m.lib, err)
		}
		in := CollectInfo()
		for i := range recs {
			recs[i].Binding, recs[i].Note, recs[i].Info = "mpirun", note, in
		}
		all = append(all, recs...)
	}
	return all, nil
}

// Raw measures the floors beside the device on medium: the word
// ping-pong between two processes (lat at 8 bytes: one cache line
// crossing each way), the UDP ping-pong between two processes on the udp
// medium, and memcpy at each bw size (what moving link memory can cost
// at best). bind binds the processes as the device's were.
func Raw(medium string, sizes []int, per time.Duration, bind bool) ([]Record, error) {
	conds := []string{pingpong.CondWord}
	if medium == "udp" {
		conds = append(conds, pingpong.CondUDP)
	}
	var recs []Record
	in := CollectInfo()
	for _, c := range conds {
		r, err := pingpong.RawBaseline(c, per, bind)
		if err != nil {
			return recs, err
		}
		binding := "unbound"
		if r.Bound {
			binding = "bound"
		}
		recs = append(recs, Record{Pattern: PatternLat, Lib: LibRaw, Medium: c, Op: c, Size: 8, P50Us: r.RTTHalfP50Us, P99Us: r.P99Us, P999Us: r.P999Us,
			MeanUs: r.RTTHalfUs, MinUs: r.MinUs, MaxUs: r.MaxUs, StdevUs: r.StdevUs, Iters: r.Iters, Binding: binding, Info: in})
	}
	for _, s := range sizes {
		it := max(int((256<<20)/int64(s)), 20)
		recs = append(recs, Record{Pattern: PatternBW, Lib: LibRaw, Medium: "memcpy", Op: "memcpy", Size: s, MBps: pingpong.RawMemcpy(s, it), Iters: it, Binding: "one-process", Info: in})
	}
	return recs, nil
}
