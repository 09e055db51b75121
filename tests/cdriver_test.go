package tests

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/conform"
	"github.com/dimmnet/dimmnet/uapi"
)

var (
	cdriverOnce sync.Once
	cdriverPath string
	cdriverErr  error
)

// cdriver builds docs/examples/cdriver with gcc, as its README says, with
// every warning an error.
func cdriver(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed (.ci/run installs it)")
	}
	cdriverOnce.Do(func() {
		dir := filepath.Dir(dimmnet(t)) // the test binary's directory, removed with it
		cdriverPath = filepath.Join(dir, "cdriver")
		out, err := exec.Command(cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-I", "../uapi", "-pthread",
			"-o", cdriverPath, "../docs/examples/cdriver/cdriver.c").CombinedOutput()
		if err != nil {
			cdriverErr = fmt.Errorf("gcc: %v\n%s", err, out)
		}
	})
	if cdriverErr != nil {
		t.Fatal(cdriverErr)
	}
	return cdriverPath
}

func runCDriver(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cdriver(t), args...).CombinedOutput()
	t.Logf("cdriver %v:\n%s", args, out)
	return string(out), err
}

// The C example driver, built on the generated header, passes every
// situation of dimmnet conform with no violation.
func TestCDriverPassesConform(t *testing.T) {
	res := runConform(t, "", cdriver(t))
	if len(res) != len(conform.Situations()) {
		t.Fatalf("%d verdicts, want %d", len(res), len(conform.Situations()))
	}
	for _, r := range res {
		if !r.Pass || r.Violations != 0 {
			t.Errorf("%s: %s (%d violations %v)\n%s", r.Situation, r.Verdict, r.Violations, r.Logged, r.Output)
		}
	}
	if r := res["plain"]; !strings.HasSuffix(strings.TrimSpace(r.Output), "ok") {
		t.Errorf("plain: the driver did not finish with ok:\n%s", r.Output)
	}
}

// On a checked daemon the C driver does everything its README lists with
// no violation, and the devices' counters agree with what it printed.
func TestCDriverOnCheckedDevice(t *testing.T) {
	d := startDaemon(t, 2, "--check")
	out, err := runCDriver(t, d.dir)
	if err != nil {
		t.Fatalf("cdriver: %v\ndaemon:\n%s", err, d.stderr)
	}
	for _, want := range []string{"PUSH 10000 B: DONE", "IPUSH 3000 B into AMT entry 1", "PULL 10000 B from node 1: PULL_DONE",
		"FADD8 40+2: old 40, now 42", "ERROR BAD_ALIGN", "slept on node 1's interrupt eventfd", "\nok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	a, b := observe(t, d.sock(0)), observe(t, d.sock(1))
	for _, r := range []uapi.Region{a, b} {
		if v := r.Counter(uapi.CtrViolations); v != 0 {
			t.Errorf("node %d: %d violations: %v", r.Load64(uapi.RegNodeID), v, r.ReadViolations())
		}
	}
	// node 0 posted PUSH, IPUSH, PULL, FADD8, 2 CAS8, the bad PUSH and the
	// PUSH to the sleeper; one failed. Node 1 served the PULL and the atomics.
	if c, e := a.Counter(uapi.CtrCmds), a.Counter(uapi.CtrCmdErrors); c != 8 || e != 1 {
		t.Errorf("node 0: CMDS %d, CMD_ERRORS %d; want 8 and 1", c, e)
	}
	if p, i := b.Counter(uapi.CtrRxPull), b.Load64(uapi.RegInterrupts); p < 4 || i < 1 {
		t.Errorf("node 1: RX_PULL %d (want the PULL and 3 atomics), INTERRUPTS %d", p, i)
	}
}

// observe maps a device's region read-only in spirit: the test only loads.
func observe(t *testing.T, sock string) uapi.Region {
	t.Helper()
	tr, err := driver.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return uapi.Region(tr.Region())
}

// Bad input from a C program gets the named refusals and errors: a client
// that sends the one-way socket protocol a message is disconnected (the
// daemon's log says why), a region mapped short is refused by the
// geometry check, and garbage descriptors complete with their named
// errors while the device goes on.
func TestCDriverBadInput(t *testing.T) {
	d := startDaemon(t, 2, "--check")
	out, err := runCDriver(t, "--bad", "protocol", d.dir)
	if err != nil || !strings.Contains(out, "closed the socket") {
		t.Fatalf("protocol: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(d.stderr.String(), "client sent data (the protocol has none)"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not name the refusal:\n%s", d.stderr)
		}
	}

	out, err = runCDriver(t, "--bad", "short-map", d.dir)
	size := observe(t, d.sock(0)).Load64(uapi.RegRegionSize)
	if want := fmt.Sprintf("REGION_SIZE %d but mapped %d bytes", size, size/2); err != nil || !strings.Contains(out, want) {
		t.Fatalf("short map: %v, want %q", err, want)
	}

	out, err = runCDriver(t, "--bad", "garbage", d.dir)
	if err != nil {
		t.Fatalf("garbage: %v", err)
	}
	for _, e := range []uapi.Errno{uapi.EBadOpcode, uapi.EBadFlags, uapi.EBadLength, uapi.EBadAddr} {
		if !strings.Contains(out, "ERROR "+e.String()+"\n") {
			t.Errorf("garbage: no ERROR %s", e)
		}
	}
	r := observe(t, d.sock(0))
	if e := r.Counter(uapi.CtrCmdErrors); e != 4 {
		t.Errorf("CMD_ERRORS %d after 4 garbage descriptors", e)
	}
	if v := r.Counter(uapi.CtrViolations); v != 0 {
		t.Errorf("garbage descriptors counted as %d violations: %v", v, r.ReadViolations())
	}
}
