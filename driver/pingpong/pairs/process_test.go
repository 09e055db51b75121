package pairs

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/cpubind"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/internal/testenv"
	"golang.org/x/sys/unix"
)

// envResponder makes the test binary a two-process run's responder: Run
// starts its own executable again with `pingpong` and the responder's
// flags, as `dimmnet pingpong --link shm` does.
const envResponder = "DIMMNET_PAIRS_TEST_RESPONDER"

func TestMain(m *testing.M) {
	subproc.Main() // the raw baselines' other ends
	if os.Getenv(envResponder) == "1" {
		if err := respond(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "responder:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// respond runs the responder on the command line Run gives it
// (`pingpong --shm-responder DIR --node N ...`), with the CLI's defaults
// for what that line leaves out.
func respond(args []string) error {
	if len(args) == 0 || args[0] != "pingpong" {
		return fmt.Errorf("want a pingpong command line, have %q", args)
	}
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	o := Options{Time: 30 * time.Second, RawTime: time.Second, VerifySet: true, In: os.Stdin, Out: os.Stdout, Progress: func(string) {}}
	fs.StringVar(&o.ShmResponder, "shm-responder", "", "")
	fs.IntVar(&o.Node, "node", 2, "")
	fs.IntVar(&o.Payload, "mtu", 0, "")
	fs.IntVar(&o.BindCPU, "bind-cpu", -1, "")
	fs.IntVar(&o.Peer, "peer", -1, "")
	fs.IntVar(&o.Max, "max", 0, "")
	fs.IntVar(&o.Iters, "iters", 0, "")
	fs.BoolVar(&o.Verify, "verify", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	return Run(o)
}

// shmRun is what one two-process run on the shared-memory link showed:
// its records, and every thread's CPUs of both processes while they ran,
// and of this one afterwards.
type shmRun struct {
	recs               []pingpong.Result
	self, resp, selfAt map[int]unix.CPUSet
}

// runShm runs the ping-pong on the shared-memory link, the responder a
// child, with each process bound to a CPU of its own if bind and two fit.
func runShm(t *testing.T, bind bool) shmRun {
	t.Helper()
	t.Setenv(envResponder, "1")
	var run shmRun
	running := func(resp int) {
		var err error
		if run.self, err = cpubind.ThreadSets(os.Getpid()); err != nil {
			t.Error(err)
		}
		if run.resp, err = cpubind.ThreadSets(resp); err != nil {
			t.Error(err)
		}
	}
	out, err := os.Create(t.TempDir() + "/out.json")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	err = Run(Options{Link: Link{Kind: "shm", Payload: 4096}, Max: 8, Iters: 20, Time: time.Second, RawTime: 20 * time.Millisecond,
		JSON: true, Bind: bind, Out: out, Progress: func(string) {}, Running: running})
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

// With two CPUs or more, the two processes of a run on the shared-memory
// link run each alone on a CPU of its own, the first two this process
// may use, and this process has them all back afterwards; unbound
// (`--no-bind`) leaves both on all of them.
func TestShmPairBindsBothProcesses(t *testing.T) {
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

	run := runShm(t, true)
	testenv.ThreadsOn(t, "initiator", run.self, a)
	testenv.ThreadsOn(t, "responder", run.resp, b)
	testenv.ThreadsOn(t, "initiator afterwards", run.selfAt, allowed)
	boundAs(t, run.recs, true, three)

	run = runShm(t, false)
	testenv.ThreadsOn(t, "initiator, unbound", run.self, allowed)
	testenv.ThreadsOn(t, "responder, unbound", run.resp, allowed)
	boundAs(t, run.recs, false, three)
}

// A process allowed one CPU (taskset -c N) binds nothing: both processes
// run on that CPU, and no record says bound.
func TestShmPairUnboundOnOneCPU(t *testing.T) {
	t.Setenv(cpubind.EnvBind, "")
	last := testenv.PinToOneCPU(t)
	var one unix.CPUSet
	one.Set(last)
	run := runShm(t, true)
	testenv.ThreadsOn(t, "initiator", run.self, one)
	testenv.ThreadsOn(t, "responder", run.resp, one)
	boundAs(t, run.recs, false, false)
}
