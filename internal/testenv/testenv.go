// Package testenv holds what tests across the tree ask of the machine
// they run on, once: a test that needs root skips the same way, with its
// reason, everywhere, instead of each package writing its own check; a
// test of CPU binding pins itself to one CPU and checks threads' CPUs
// the same way everywhere too.
package testenv

import (
	"os"
	"testing"

	"github.com/dimmnet/dimmnet/internal/cpubind"
	"golang.org/x/sys/unix"
)

// NeedRoot skips t unless the process runs as root; why says what the
// test does with it (it is the skip message).
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why)
	}
}

// NeedTUN is NeedRoot for tests that make network devices: it also skips
// when the kernel has no /dev/net/tun (a container without it).
func NeedTUN(t testing.TB, why string) {
	t.Helper()
	NeedRoot(t, why)
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
}

// PinToOneCPU pins this whole process to the last CPU it may use, as
// `taskset -c N` would, until t ends, and returns that CPU. It skips t
// when the process may use one CPU already: nothing would change.
func PinToOneCPU(t testing.TB) int {
	t.Helper()
	allowed, err := cpubind.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	cpus := cpubind.CPUs(allowed.Count(), &allowed)
	if cpus == nil {
		t.Skip("one usable CPU already")
	}
	last := cpus[len(cpus)-1]
	b, err := cpubind.Pin(last)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Restore(); err != nil {
			t.Errorf("restore this process's CPUs: %v", err)
		}
	})
	return last
}

// ThreadsOn fails t unless there are threads in sets (cpubind.ThreadSets)
// and every one may run on exactly want; who names them in the failure.
func ThreadsOn(t testing.TB, who string, sets map[int]unix.CPUSet, want unix.CPUSet) {
	t.Helper()
	if len(sets) == 0 {
		t.Errorf("%s: no threads seen", who)
	}
	for tid, s := range sets {
		if s != want {
			t.Errorf("%s thread %d may run on %d CPUs, want the %d of %v", who, tid, s.Count(), want.Count(), want)
		}
	}
}
