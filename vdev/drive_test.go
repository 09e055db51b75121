package vdev

// Run to completion (drive.go): the send-only pass a post runs.

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// postPair is two checked devices with a small window on a hub, stepped
// by hand on a virtual clock, with a counter in place of each engine's
// wake-up.
type postPair struct {
	a, b *Device
	woke [2]int
	next [2]uint64 // next command index
	now  int64
}

func newPostPair(t *testing.T, window int) *postPair { return newPostPairStatus(t, window, 0) }

// newPostPairStatus is newPostPair with status rings of statusEntries
// (0: the default).
func newPostPairStatus(t *testing.T, window, statusEntries int) *postPair {
	t.Helper()
	pp := &postPair{now: 1 << 40}
	hub := link.NewHub(4096+256, 256)
	for i, n := range []uint16{1, 2} {
		d, err := New(Config{Node: n, RegionSize: 1 << 20, Window: window, StatusEntries: statusEntries, Check: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		d.clock = func() int64 { return pp.now }
		p, err := hub.Attach(d.MAC())
		if err != nil {
			t.Fatal(err)
		}
		d.AttachPort(p)
		wake := func() { pp.woke[i]++ }
		d.wake.Store(&wake)
		if i == 0 {
			pp.a = d
		} else {
			pp.b = d
		}
	}
	return pp
}

// push publishes a PUSH of n bytes from d to the other device, as a
// driver does, without running a pass.
func (pp *postPair) push(d *Device, n uint32) {
	i, dst := 0, uint16(2)
	if d == pp.b {
		i, dst = 1, 1
	}
	post(d, pp.next[i], uapi.Desc{Opcode: uapi.OpPUSH, DstNode: dst, SrcProc: uapi.GPID(d.node, 0), Length: n})
	pp.next[i]++
}

func (pp *postPair) full(d *Device) {
	var t int64
	stepHeld(d, &t)
}

func counter(d *Device, c uapi.Counter) uint64 { return d.r.Counter(c) }

// A post's pass sends the command's packet and leaves a frame waiting at
// the port for the next full pass: a burst of posts does not pay for the
// peer's crossing burst.
func TestPollPostSendsWithoutReceiving(t *testing.T) {
	pp := newPostPair(t, 64)
	pp.push(pp.b, 16)
	pp.full(pp.b) // b's frame waits at a's port
	pp.push(pp.a, 16)
	pp.a.PollPost()
	if got := counter(pp.a, uapi.CtrTxPkts); got != 1 {
		t.Fatalf("a sent %d packets after its post's pass, want 1", got)
	}
	if got := counter(pp.a, uapi.CtrRxPkts); got != 0 || pp.a.statTail != 0 {
		t.Fatalf("the post's pass received %d packets and wrote %d statuses, want none", got, pp.a.statTail)
	}
	if !pp.a.portReady() {
		t.Fatal("b's frame left a's port without being received")
	}
	pp.full(pp.a)
	if got := counter(pp.a, uapi.CtrRxPkts); got != 1 || pp.a.statTail != 1 {
		t.Fatalf("a full pass received %d packets and wrote %d statuses, want 1 and 1", got, pp.a.statTail)
	}
	if pp.woke[0] != 0 {
		t.Fatalf("the post's pass woke the engine %d times; a waiting frame is no reason (it signals a parked port)", pp.woke[0])
	}
	for _, d := range []*Device{pp.a, pp.b} {
		if v := violations(d); v != 0 {
			t.Fatalf("node %d: %d violations: %v", d.node, v, d.r.ReadViolations())
		}
	}
}

// Posts' passes fill the window and stop: the acknowledgements that open
// it are taken in by the next full pass, which sends on. The packets
// waiting for the window are no reason to wake the engine (an ACK's frame
// is), packets a window has room for are.
func TestPollPostWindowMovesOnFullPass(t *testing.T) {
	const window = 8
	pp := newPostPair(t, window)
	for range 3 * window {
		pp.push(pp.a, 16)
		pp.a.PollPost()
		pp.full(pp.b) // b receives and acknowledges
	}
	if got := counter(pp.a, uapi.CtrTxPkts); got != window {
		t.Fatalf("posts' passes sent %d packets, want the window's %d", got, window)
	}
	if pp.woke[0] != 0 {
		t.Fatalf("posts waiting for the window woke the engine %d times", pp.woke[0])
	}
	for i := 0; counter(pp.b, uapi.CtrRxPush) < 3*window; i++ {
		if i > 100 {
			t.Fatalf("b received %d of %d PUSHes after %d rounds of full passes", counter(pp.b, uapi.CtrRxPush), 3*window, i)
		}
		pp.full(pp.a)
		pp.full(pp.b)
	}

	// A command of more packets than a pass sends leaves packets the
	// window has room for: only a pass sends them, so the engine is woken.
	pp2 := newPostPair(t, 64)
	pp2.push(pp2.a, 16*4096)
	pp2.a.PollPost()
	if got := counter(pp2.a, uapi.CtrTxPkts); got != txBurst {
		t.Fatalf("a post's pass sent %d packets of a 16-packet PUSH, want %d", got, txBurst)
	}
	if pp2.woke[0] != 1 {
		t.Fatalf("packets left with room in the window woke the engine %d times, want 1", pp2.woke[0])
	}
}

// stepHeld runs one pass of d by hand, as the engine or a driver would:
// holding its running flag, which counting in a pass expects (race builds
// check it, count_race.go).
func stepHeld(d *Device, now *int64) bool {
	if !d.running.acquire() {
		panic("stepHeld: another pass holds the device")
	}
	defer d.running.release()
	return d.step(now)
}

// holdForTest holds d's running flag for the rest of the test, for a
// test that calls a pass's parts (pollRx, handle) itself with no engine
// running: counting in a pass expects the flag (count_race.go).
func holdForTest(t testing.TB, d *Device) {
	t.Helper()
	if !d.running.acquire() {
		t.Fatal("holdForTest: a pass holds the device")
	}
	t.Cleanup(d.running.release)
}

// A driver's pass that writes a status ends there (cutShort): the
// command its driver published meanwhile waits for the next pass. Never
// two in a row: under a status every pass, every other one is whole and
// takes it.
func TestDriverPassEndsAtItsStatus(t *testing.T) {
	pp := newPostPair(t, 64)
	for range 3 { // past the first pass, which looks at the timers
		pp.b.Poll()
	}
	pp.push(pp.a, 8)
	pp.a.PollPost()
	pp.push(pp.b, 8) // published, no pass of its own
	pp.b.Poll()
	if got := counter(pp.b, uapi.CtrRxPush); got != 1 {
		t.Fatalf("RX_PUSH %d after the pass, want 1", got)
	}
	if got := counter(pp.b, uapi.CtrCmds); got != 0 {
		t.Fatalf("the pass that wrote a status took %d commands, want 0 (it ends at the status)", got)
	}
	pp.push(pp.a, 8)
	pp.a.PollPost()
	pp.b.Poll() // a status again, but the pass before was cut short
	if got := counter(pp.b, uapi.CtrRxPush); got != 2 {
		t.Fatalf("RX_PUSH %d after the second pass, want 2", got)
	}
	if got := counter(pp.b, uapi.CtrCmds); got != 1 {
		t.Fatalf("two passes with a status each took %d commands, want 1 (the second is whole)", got)
	}
}

// A driver that hands the device back with an ACK still held for a
// reply wakes an engine that went to its long idle sleep before the
// driver drove (Drive(true) does not wake it): that engine would send the
// ACK only when its sleep ends, long after the sender's retransmission
// timer. So does a driver that leaves for good (Drive(false)), whose
// idle driving may already have lasted milliseconds. A pause with the
// engine on its watch does not wake it: the watch sends it.
func TestHeldAckWakesSleepingEngine(t *testing.T) {
	for _, c := range []struct{ away, leave, woken bool }{
		{true, false, true},
		{false, true, true},
		{false, false, false},
	} {
		pp := newPostPair(t, 64)
		pp.b.away.Store(c.away)
		pp.b.Drive(true)
		pp.push(pp.a, 8)
		pp.a.PollPost()
		pp.b.Poll() // placed; its ACK held for a reply
		pp.b.Poll()
		if pp.b.book.AcksOwed == 0 {
			t.Fatal("no ACK owed after the request and one more pass")
		}
		before := pp.woke[1]
		if c.leave {
			pp.b.Drive(false)
		} else {
			pp.b.Pause()
		}
		if woke := pp.woke[1] > before; woke != c.woken {
			t.Errorf("engine away %v, driver leaving %v: woken %v by the hand-back with an ACK owed, want %v", c.away, c.leave, woke, c.woken)
		}
	}
}
