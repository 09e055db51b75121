package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/cpubind"
	"golang.org/x/sys/unix"
)

// envMain makes the test binary run main: `pingpong --link shm` starts
// its own executable again as the responder.
const envMain = "DIMMNET_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// shmRun is what one `pingpong --link shm` run showed: its records, and
// every thread's CPUs of both processes while they ran, and of this one
// afterwards.
type shmRun struct {
	recs               []pingpong.Result
	self, resp, selfAt map[int]unix.CPUSet
}

// runShm runs `pingpong --link shm` with extra flags in this process, the
// responder a child, and records what it showed.
func runShm(t *testing.T, flags ...string) shmRun {
	t.Helper()
	t.Setenv(envMain, "1")
	var run shmRun
	testHookRunning = func(resp int) {
		var err error
		if run.self, err = cpubind.ThreadSets(os.Getpid()); err != nil {
			t.Error(err)
		}
		if run.resp, err = cpubind.ThreadSets(resp); err != nil {
			t.Error(err)
		}
	}
	defer func() { testHookRunning = nil }()
	out, err := os.Create(filepath.Join(t.TempDir(), "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	stdout := os.Stdout
	os.Stdout = out
	err = pingpongCmd(append([]string{"--link", "shm", "--json", "-q", "--max", "8", "--iters", "20", "--raw-time", "20ms"}, flags...))
	os.Stdout = stdout
	if err != nil {
		t.Fatal(err)
	}
	if run.selfAt, err = cpubind.ThreadSets(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out.Name())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run.recs); err != nil {
		t.Fatalf("json: %v\n%s", err, b)
	}
	return run
}

// only fails the test unless every thread in sets may run on exactly want.
func only(t *testing.T, who string, sets map[int]unix.CPUSet, want unix.CPUSet) {
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

// boundAs checks each record's Bound: the device's and the two-process
// baselines' (word, UDP) as want, the three-process hand-offs' only when
// three fit too.
func boundAs(t *testing.T, recs []pingpong.Result, want, three bool) {
	t.Helper()
	n := 0
	for _, r := range recs {
		w := want
		switch r.Condition {
		case pingpong.CondMemcpy:
			continue // one process
		case pingpong.CondHandoffSpin, pingpong.CondHandoffYield, pingpong.CondHandoffEventfd:
			w = want && three
		case pingpong.CondUDP:
			w = false // its processes block: never bound
		}
		n++
		if r.Bound != w {
			t.Errorf("%s %s: bound %v, want %v", r.Mode, r.Condition, r.Bound, w)
		}
	}
	if n < 4+len(pingpong.RawConditions) {
		t.Errorf("%d records, want the device's 4 and %d raw", n, len(pingpong.RawConditions))
	}
}

// With two CPUs or more, the two processes of `pingpong --link shm` run
// each alone on a CPU of its own, the first two this process may use, and
// this process has them all back afterwards; --no-bind leaves both on all
// of them.
func TestShmPingPongBindsBothProcesses(t *testing.T) {
	allowed, err := cpubind.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	cpus := cpubind.CPUs(2, &allowed)
	if cpus == nil {
		t.Skip("one usable CPU: nothing to bind to")
	}
	t.Setenv(cpubind.EnvBind, "")
	three := cpubind.CPUs(3, &allowed) != nil
	var a, b unix.CPUSet
	a.Set(cpus[0])
	b.Set(cpus[1])

	run := runShm(t)
	only(t, "initiator", run.self, a)
	only(t, "responder", run.resp, b)
	only(t, "initiator afterwards", run.selfAt, allowed)
	boundAs(t, run.recs, true, three)

	run = runShm(t, "--no-bind")
	only(t, "initiator, --no-bind", run.self, allowed)
	only(t, "responder, --no-bind", run.resp, allowed)
	boundAs(t, run.recs, false, three)
}

// A process allowed one CPU (taskset -c N) binds nothing: both processes
// run on that CPU, and no record says bound.
func TestShmPingPongUnboundOnOneCPU(t *testing.T) {
	allowed, err := cpubind.Allowed()
	if err != nil {
		t.Fatal(err)
	}
	cpus := cpubind.CPUs(allowed.Count(), &allowed)
	if cpus == nil {
		t.Skip("one usable CPU already")
	}
	t.Setenv(cpubind.EnvBind, "")
	last := cpus[len(cpus)-1]
	pin, err := cpubind.Pin(last) // the whole process, as taskset would
	if err != nil {
		t.Fatal(err)
	}
	defer pin.Restore()
	var one unix.CPUSet
	one.Set(last)
	run := runShm(t)
	only(t, "initiator", run.self, one)
	only(t, "responder", run.resp, one)
	boundAs(t, run.recs, false, false)
}
