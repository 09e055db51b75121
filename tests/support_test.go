package tests

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// eventually polls cond until it holds; it fails the test only after a
// generous deadline (a wait, never a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyOr(t, what, cond, func() string { return "" })
}

// eventuallyOr is eventually, failing with what state says at the time.
func eventuallyOr(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(4 * time.Duration(waitNs))
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for: %s\n%s", what, state())
		}
		runtime.Gosched()
		time.Sleep(50 * time.Microsecond)
	}
}

// post publishes a descriptor and returns its command index.
func post(t *testing.T, d *driver.Driver, c *uapi.Desc) uint64 {
	t.Helper()
	idx, err := d.Post(c)
	if err != nil {
		t.Fatalf("node %d: post %v: %v", d.Node(), c.Opcode, err)
	}
	return idx
}

// waitType waits for the next status and requires its type.
func waitType(t *testing.T, d *driver.Driver, typ uapi.StatusType) uapi.Status {
	t.Helper()
	s := wait(t, d)
	if s.Type != typ {
		t.Fatalf("node %d: got status %v, want a %v", d.Node(), s, typ)
	}
	return s
}

// expectDone waits for the DONE status of command idx.
func expectDone(t *testing.T, d *driver.Driver, op uapi.Opcode, idx, cookie uint64) {
	t.Helper()
	s := wait(t, d)
	if s.Type != uapi.StDone || s.Opcode != op || s.CmdIndex() != idx || s.Cookie != cookie {
		t.Fatalf("node %d: got %v, want DONE cmd#%d %v cookie %#x", d.Node(), s, idx, op, cookie)
	}
}

// expectError waits for the ERROR status of command idx and checks that it
// names the command and the reason.
func expectError(t *testing.T, d *driver.Driver, op uapi.Opcode, idx, cookie uint64, e uapi.Errno) uapi.Status {
	t.Helper()
	s := wait(t, d)
	if s.Type != uapi.StError || s.Opcode != op || s.CmdIndex() != idx || s.Cookie != cookie || s.Err != e {
		t.Fatalf("node %d: got %v, want ERROR cmd#%d %v cookie %#x: %v", d.Node(), s, idx, op, cookie, e)
	}
	return s
}

// noStatus checks that nothing is waiting in d's status ring.
func noStatus(t *testing.T, d *driver.Driver) {
	t.Helper()
	if tail := d.StatusTail(); tail != d.StatusHead() {
		s, _ := d.Poll()
		t.Fatalf("node %d: unexpected status %v (%d pending)", d.Node(), s, tail-d.StatusHead())
	}
}

// goodPush proves a device still serves: a signaled PUSH from a to b lands
// byte for byte, b sees its status and a its completion.
func goodPush(t *testing.T, a, b *driver.Driver, remote uint64, seed byte) {
	t.Helper()
	data := pattern(3000, seed)
	local := uint64(8 << 20)
	a.CopyIn(local, data)
	cookie := uint64(0xC0DE0000) + uint64(seed)
	idx, err := a.Push(b.Node(), local, remote, uint32(len(data)), uapi.FlagSignal, cookie)
	if err != nil {
		t.Fatal(err)
	}
	s := waitType(t, b, uapi.StPUSH)
	if s.Addr != remote || s.Length != uint32(len(data)) || s.SrcNode != a.Node() {
		t.Fatalf("good push: receiver status %v", s)
	}
	if got := b.LinkMem()[remote : remote+uint64(len(data))]; !bytes.Equal(got, data) {
		t.Fatalf("good push: data differs at %s", firstDiff(got, data))
	}
	expectDone(t, a, uapi.OpPUSH, idx, cookie)
}

func firstDiff(got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("byte %d: %#x, want %#x", i, got[i], want[i])
		}
	}
	return "nowhere"
}

func allBytes(b []byte, v byte) bool {
	for _, x := range b {
		if x != v {
			return false
		}
	}
	return true
}

// wrappedCluster starts n devices (nodes 1..n) on an in-memory hub with each
// port passed through wrap (fault injection, a test's own control), and
// opens a driver on each.
func wrappedCluster(t *testing.T, cfg vdev.Config, payload, n int, wrap func(d *vdev.Device, p link.Port) link.Port) (*vdev.Local, []*driver.Driver) {
	t.Helper()
	hub := link.NewHub(payload+wire.FrameOverhead, 256)
	nodes := make([]uint16, n)
	for i := range nodes {
		nodes[i] = uint16(i + 1)
	}
	l, err := vdev.NewLocalPorts(cfg, nodes, func(d *vdev.Device) (link.Port, error) {
		p, err := hub.Attach(d.MAC())
		if err != nil {
			return nil, err
		}
		return wrap(d, p), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var ds []*driver.Driver
	for _, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	return l, ds
}
