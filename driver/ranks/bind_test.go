package ranks

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/internal/cpubind"
)

// A rank whose host's ranks fit its cores binds every thread of its
// process to its core and runs one thread of Go code while its device is
// open (so two ranks cannot be put on one core while another task holds
// the other, the slow state of docs/fmpl.md), and Close gives the process
// its CPUs and GOMAXPROCS back.
func TestRankBindsToItsCore(t *testing.T) {
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	if before.Count() < 2 {
		t.Skip("one usable CPU: nothing to bind to")
	}
	t.Setenv("DIMMNET_BIND", "")
	t.Setenv("GOMAXPROCS", "")
	procs := runtime.GOMAXPROCS(0)
	want, _ := cpubind.CPU(1, 2, &before)
	dev, err := Open(Options{Link: "shm", Dir: t.TempDir(), Node: 1, RegionSize: 4 << 20, LocalRanks: 2, LocalRank: 1, Bind: true})
	if err != nil {
		t.Fatal(err)
	}
	for tid, s := range threadSets(t) {
		if s.Count() != 1 || !s.IsSet(want) {
			t.Errorf("thread %d may run on %d CPUs (CPU %d: %v), want CPU %d alone", tid, s.Count(), want, s.IsSet(want), want)
		}
	}
	if p := runtime.GOMAXPROCS(0); p != 1 {
		t.Errorf("bound rank runs GOMAXPROCS=%d, want 1", p)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if p := runtime.GOMAXPROCS(0); p != procs {
		t.Errorf("GOMAXPROCS after Close %d, want the %d it had", p, procs)
	}
	for tid, s := range threadSets(t) {
		if s != before {
			t.Errorf("thread %d after Close may run on %d CPUs, want the %d it had", tid, s.Count(), before.Count())
		}
	}
}

// threadSets is the CPU affinity of every thread of this process.
func threadSets(t *testing.T) map[int]unix.CPUSet {
	t.Helper()
	sets, err := cpubind.ThreadSets(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return sets
}
