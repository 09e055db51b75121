package tests

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
)

// The datasheet is enough to write a driver: docs/examples/pydriver.py,
// written from it alone, attaches to a daemon's nodes over the ivshmem
// socket, takes over a device a Go driver used before (its commands taken,
// its statuses left unread), PUSHes to the other node and waits for DONE,
// and gets the ERROR of a misaligned PUSH.
func TestPythonDriverFromDatasheet(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	d := startDaemon(t, 2)

	// A previous driver on node 0: three signalled NOPs, statuses unread.
	tr, err := driver.Dial(d.sock(0))
	if err != nil {
		t.Fatal(err)
	}
	prev, err := driver.Open(tr)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := prev.Post(&uapi.Desc{Opcode: uapi.OpNOP, Flags: uapi.FlagSignal, Cookie: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); prev.StatusTail() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the NOPs' statuses never came: tail %d", prev.StatusTail())
		}
	}
	prev.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "../docs/examples/pydriver.py", d.sock(0), d.sock(1)).CombinedOutput()
	t.Logf("pydriver:\n%s", out)
	if err != nil {
		t.Fatalf("pydriver: %v\ndaemon:\n%s", err, d.stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[len(lines)-1] != "ok" || !strings.Contains(string(out), "first command index 3") || !strings.Contains(string(out), " 0 other statuses") {
		t.Fatal("pydriver did not finish, did not continue after the previous driver's commands, or read its statuses")
	}

	// The devices agree: node 0 took 3 NOPs, the 2 PUSHes (one failed)
	// and the IPUSH; node 1 placed the one good PUSH and the IPUSH.
	a, b := attach(t, d.sock(0)), attach(t, d.sock(1))
	if got := a.Counter(uapi.CtrCmds); got != 6 {
		t.Errorf("node 0 CMDS %d, want 6", got)
	}
	if got := b.Counter(uapi.CtrRxIPush); got != 1 {
		t.Errorf("node 1 RX_IPUSH %d, want 1", got)
	}
	if got := a.Counter(uapi.CtrCmdErrors); got != 1 {
		t.Errorf("node 0 CMD_ERRORS %d, want 1", got)
	}
	if got := b.Counter(uapi.CtrRxPush); got != 1 {
		t.Errorf("node 1 RX_PUSH %d, want 1", got)
	}
}
