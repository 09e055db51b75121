package pingpong

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/internal/cpubind"
	"github.com/dimmnet/dimmnet/internal/testenv"
	"golang.org/x/sys/unix"
)

// masks is what a baseline's hook saw: every thread's CPUs of this
// process and of each child, while the baseline ran.
type masks struct {
	self map[int]unix.CPUSet
	kids []map[int]unix.CPUSet
}

// watchMasks sets the hook to record the masks of the next baseline.
func watchMasks(t *testing.T) *masks {
	t.Helper()
	m := &masks{}
	testHookStarted = func(f *family) {
		var err error
		if m.self, err = cpubind.ThreadSets(os.Getpid()); err != nil {
			t.Error(err)
		}
		for _, c := range f.kids {
			s, err := cpubind.ThreadSets(c.Process.Pid)
			if err != nil {
				t.Error(err)
			}
			m.kids = append(m.kids, s)
		}
	}
	t.Cleanup(func() { testHookStarted = nil })
	return m
}

// one is the CPU set of cpu alone.
func one(cpu int) unix.CPUSet {
	var s unix.CPUSet
	s.Set(cpu)
	return s
}

// With bind, a baseline whose processes fit the CPUs runs each on a CPU
// of its own, this process on the first, every child alone on its own
// from its start; one that does not fit (three hand-off processes on two
// CPUs), or without bind, runs every process on all of them. Afterwards
// this process has its CPUs back.
func TestRawBaselinesBindTheProcessesThatFit(t *testing.T) {
	allowed, err := cpubind.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if allowed.Count() < 2 {
		t.Skip("one usable CPU: nothing to bind to")
	}
	t.Setenv(cpubind.EnvBind, "")
	cases := []struct {
		cond string
		n    int // processes, this one included
		bind bool
	}{
		{CondWord, 2, true},
		{CondUDP, 2, true}, // blocking: never bound (udpBaseline)
		{CondHandoffSpin, 3, true},
		{CondWord, 2, false},
	}
	for _, c := range cases {
		m := watchMasks(t)
		r, err := RawBaseline(c.cond, 20*time.Millisecond, c.bind)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.kids) != c.n-1 {
			t.Fatalf("%s: %d children seen, want %d", c.cond, len(m.kids), c.n-1)
		}
		want := cpubind.CPUs(c.n, &allowed)
		if !c.bind || c.cond == CondUDP {
			want = nil
		}
		if r.Bound != (want != nil) {
			t.Errorf("%s bind %v: record says bound %v, want %v", c.cond, c.bind, r.Bound, want != nil)
		}
		if want == nil {
			testenv.ThreadsOn(t, c.cond+" this process", m.self, allowed)
			for i, k := range m.kids {
				testenv.ThreadsOn(t, fmt.Sprintf("%s child %d", c.cond, i+1), k, allowed)
			}
		} else {
			testenv.ThreadsOn(t, c.cond+" this process", m.self, one(want[0]))
			for i, k := range m.kids {
				testenv.ThreadsOn(t, fmt.Sprintf("%s child %d", c.cond, i+1), k, one(want[1+i]))
			}
		}
		self, err := cpubind.ThreadSets(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		testenv.ThreadsOn(t, c.cond+" this process afterwards", self, allowed)
	}
}

// A process allowed one CPU (taskset -c N, a launcher's binding) binds
// nothing: both ends of the word ping-pong run on that CPU, and the
// record says unbound.
func TestRawBaselinesUnboundOnOneCPU(t *testing.T) {
	t.Setenv(cpubind.EnvBind, "")
	last := testenv.PinToOneCPU(t)
	m := watchMasks(t)
	r, err := RawBaseline(CondWord, 20*time.Millisecond, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bound {
		t.Error("record says bound on one CPU")
	}
	testenv.ThreadsOn(t, "this process", m.self, one(last))
	if len(m.kids) != 1 {
		t.Fatalf("%d children seen, want 1", len(m.kids))
	}
	testenv.ThreadsOn(t, "child", m.kids[0], one(last))
}
