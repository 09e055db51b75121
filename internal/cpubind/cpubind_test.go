package cpubind

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// envChild makes the test binary a child that prints its GOMAXPROCS and
// waits for its stdin to close.
const envChild = "CPUBIND_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		fmt.Println(runtime.GOMAXPROCS(0))
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func set(cpus ...int) *unix.CPUSet {
	var s unix.CPUSet
	for _, c := range cpus {
		s.Set(c)
	}
	return &s
}

// The processes of a host that fit its cores each take the core of their
// local index among the CPUs the process may use; processes that do not
// fit, an unknown count, a process alone, a process already bound to one
// CPU, and DIMMNET_BIND=0 leave the scheduler to place them.
func TestCPUChoosesOneCorePerProcess(t *testing.T) {
	cases := []struct {
		name     string
		local, n int
		allowed  *unix.CPUSet
		env      string
		cpu      int
		ok       bool
	}{
		{"first of two", 0, 2, set(0, 1), "", 0, true},
		{"second of two", 1, 2, set(0, 1), "", 1, true},
		{"the allowed CPUs, in order", 1, 2, set(2, 5, 7), "", 5, true},
		{"more processes than CPUs", 2, 3, set(0, 1), "", 0, false},
		{"count unknown", 0, 0, set(0, 1), "", 0, false},
		{"bound already", 0, 2, set(3), "", 0, false},
		{"alone on its host", 0, 1, set(0, 1), "", 0, false},
		{"local index out of range", 2, 2, set(0, 1, 2), "", 0, false},
		{"environment says no", 1, 2, set(0, 1), "0", 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(EnvBind, c.env)
			cpu, ok := CPU(c.local, c.n, c.allowed)
			if ok != c.ok || ok && cpu != c.cpu {
				t.Fatalf("local %d of %d: CPU %d, %v; want %d, %v", c.local, c.n, cpu, ok, c.cpu, c.ok)
			}
		})
	}
	t.Setenv(EnvBind, "")
	if got := CPUs(2, set(1, 3)); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("CPUs(2, {1,3}) = %v, want [1 3]", got)
	}
	if got := CPUs(3, set(1, 3)); got != nil {
		t.Errorf("CPUs(3, {1,3}) = %v, want none: they do not fit", got)
	}
}

// Pin binds every thread of the process to one CPU with one thread of Go
// code, and Restore gives back the CPUs and GOMAXPROCS it had.
func TestPinAndRestore(t *testing.T) {
	before, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if before.Count() < 2 {
		t.Skip("one usable CPU: nothing to bind to")
	}
	t.Setenv("GOMAXPROCS", "")
	procs := runtime.GOMAXPROCS(0)
	cpus := CPUs(2, &before)
	b, err := Pin(cpus[1])
	if err != nil {
		t.Fatal(err)
	}
	for tid, s := range taskSets(t, os.Getpid()) {
		if s != *set(cpus[1]) {
			t.Errorf("thread %d may run on %d CPUs (CPU %d: %v), want CPU %d alone", tid, s.Count(), cpus[1], s.IsSet(cpus[1]), cpus[1])
		}
	}
	if p := runtime.GOMAXPROCS(0); p != 1 {
		t.Errorf("pinned process runs GOMAXPROCS=%d, want 1", p)
	}
	if err := b.Restore(); err != nil {
		t.Fatal(err)
	}
	if p := runtime.GOMAXPROCS(0); p != procs {
		t.Errorf("GOMAXPROCS after Restore %d, want the %d it had", p, procs)
	}
	for tid, s := range taskSets(t, os.Getpid()) {
		if s != before {
			t.Errorf("thread %d after Restore may run on %d CPUs, want the %d it had", tid, s.Count(), before.Count())
		}
	}
	if _, err := Pin(len(before) * 64); err == nil {
		t.Error("pinned to a CPU that does not exist")
	}
}

// Start binds the child alone, from its first thread to its last, and
// leaves every thread of the parent with the CPUs it had; a Go child
// sizes GOMAXPROCS to its one CPU.
func TestStartBindsTheChildOnly(t *testing.T) {
	before, err := Allowed()
	if err != nil {
		t.Fatal(err)
	}
	if before.Count() < 2 {
		t.Skip("one usable CPU: nothing to bind to")
	}
	cpu := CPUs(2, &before)[1]
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envChild+"=1", "GOMAXPROCS=")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := Start(cmd, cpu); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if line != "1\n" {
		t.Errorf("child runs GOMAXPROCS=%q, want 1", line)
	}
	kids := taskSets(t, cmd.Process.Pid)
	if len(kids) < 2 {
		t.Errorf("child has %d threads, want the runtime's several", len(kids))
	}
	for tid, s := range kids {
		if s != *set(cpu) {
			t.Errorf("child thread %d may run on %d CPUs (CPU %d: %v), want CPU %d alone", tid, s.Count(), cpu, s.IsSet(cpu), cpu)
		}
	}
	for tid, s := range taskSets(t, os.Getpid()) {
		if s != before {
			t.Errorf("parent thread %d may run on %d CPUs, want the %d it had", tid, s.Count(), before.Count())
		}
	}
	if err := Start(exec.Command(exe), len(before)*64); err == nil {
		t.Error("started on a CPU that does not exist")
	}
}

// taskSets is ThreadSets, failing the test on an error.
func taskSets(t *testing.T, pid int) map[int]unix.CPUSet {
	t.Helper()
	sets, err := ThreadSets(pid)
	if err != nil {
		t.Fatal(err)
	}
	return sets
}
