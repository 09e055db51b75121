package vdev

// The completer: every command completes once, in order, whatever its
// peer does (fails, dies, stops answering its PULLs).

import (
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// hubNodes builds nodes on a hub of 1 KiB packets (queues of depth
// frames), each with an engine of its own that the test starts and stops:
// a node whose engine is stopped is a silent peer (as a SIGSTOPped daemon).
func hubNodes(t *testing.T, depth int, cfg Config, nodes ...uint16) []*Device {
	hub := link.NewHub(1024+wire.FrameOverhead, depth)
	var devs []*Device
	for _, n := range nodes {
		c := cfg
		c.Node = n
		if c.RegionSize == 0 {
			c.RegionSize = 4 << 20
		}
		d, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		p, _ := hub.Attach(d.MAC())
		d.AttachPort(p)
		devs = append(devs, d)
	}
	return devs
}

// run starts an engine for d; the returned stop is also a cleanup.
func run(t *testing.T, d *Device) (stop func()) {
	e, err := NewEngine(d)
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(e.Stop)
	return e.Stop
}

// poster posts descriptors to one device's command queue, as a driver.
type poster struct {
	d    *Device
	next uint64
	seen uint64 // statuses read
}

func (p *poster) post(desc uapi.Desc) uint64 {
	idx := p.next
	p.next++
	p.d.r.WriteDesc(p.d.g.CmdqOff+(idx&(p.d.g.CmdqEntries-1))*uapi.DescSize, &desc, idx)
	p.d.Doorbell()
	return idx
}

// statuses waits until the device posted at least n statuses beyond those
// already read, and returns them (and any more there are).
func (p *poster) statuses(t *testing.T, n int, within time.Duration) []uapi.Status {
	t.Helper()
	end := time.Now().Add(within)
	for p.d.r.Load64(uapi.RegStatqTail)-p.seen < uint64(n) {
		if time.Now().After(end) {
			t.Fatalf("node %d: %d statuses after %v, want %d", p.d.node, p.d.r.Load64(uapi.RegStatqTail)-p.seen, within, n)
		}
		time.Sleep(100 * time.Microsecond)
	}
	var out []uapi.Status
	for tail := p.d.r.Load64(uapi.RegStatqTail); p.seen < tail; p.seen++ {
		out = append(out, p.d.r.ReadStatus(p.d.g.StatqOff+(p.seen&(p.d.g.StatqEntries-1))*uapi.StatusSize))
	}
	p.d.r.Store64(uapi.RegStatqHead, p.seen)
	return out
}

func push(dst uint16, n uint32, cookie uint64) uapi.Desc {
	return uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: dst, Length: n, RemoteAddr: 1 << 20, Cookie: cookie}
}

// A command to a peer that went silent fails once: one UNREACHABLE, no
// packet of it afterwards, a FENCE behind it completes only after it, and
// when the peer comes back it reports no message complete that was cut,
// and new commands to it work.
func TestFailedCommandCompletesOnce(t *testing.T) {
	devs := hubNodes(t, 64, Config{MaxTimeouts: 3}, 1, 2)
	a, b := devs[0], devs[1]
	run(t, a) // b stays silent for now
	pa := &poster{d: a}
	pa.post(push(2, 256<<10, 1)) // 256 packets: more than the window and b's queue
	pa.post(uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal, Cookie: 2})
	pa.post(push(2, 8, 3))
	got := pa.statuses(t, 3, 30*time.Second)
	want := []struct {
		cookie uint64
		typ    uapi.StatusType
		err    uapi.Errno
	}{{1, uapi.StError, uapi.EUnreachable}, {2, uapi.StDone, 0}, {3, uapi.StError, uapi.EUnreachable}}
	if len(got) != 3 {
		t.Fatalf("%d statuses, want 3: %v", len(got), got)
	}
	for i, w := range want {
		if got[i].Cookie != w.cookie || got[i].Type != w.typ || got[i].Err != w.err {
			t.Fatalf("status %d is %v, want cookie %d type %d err %v", i, got[i], w.cookie, w.typ, w.err)
		}
	}
	txBefore := a.r.Counter(uapi.CtrTxPkts)

	run(t, b) // the peer comes back: it finds the old session's frames in its queue
	pb := &poster{d: b}
	time.Sleep(20 * time.Millisecond)
	pa.post(push(2, 8, 4)) // a new session
	if s := pa.statuses(t, 1, 30*time.Second); len(s) != 1 || s[0].Cookie != 4 || s[0].Type != uapi.StDone {
		t.Fatalf("after the peer came back: %v, want only cookie 4 DONE", s)
	}
	// the only PUSH status b reports is the 8-byte one
	for _, s := range pb.statuses(t, 1, 10*time.Second) {
		if s.Type == uapi.StPUSH && s.Length != 8 {
			t.Fatalf("b reports a %d-byte message complete; only the 8-byte one ever was", s.Length)
		}
	}
	// nothing of the failed commands went out again
	if sent := a.r.Counter(uapi.CtrTxPkts) - txBefore; sent > 8 {
		t.Fatalf("%d packets sent after the failure for one 8-byte PUSH", sent)
	}
	if cut := b.r.Counter(uapi.CtrMsgCut); cut != 1 {
		t.Fatalf("MSG_CUT %d on the receiver, want 1 (the 256 KiB message it held part of)", cut)
	}
	time.Sleep(20 * time.Millisecond)
	if s := a.r.Load64(uapi.RegStatqTail); s != 4 {
		t.Fatalf("a posted %d statuses in all, want 4: a command completed twice", s)
	}
}

// A dead peer does not hold back commands to a healthy one: they are
// queued per destination, and the healthy destination's complete while
// the dead one's command still waits.
func TestDeadPeerDoesNotBlockOthers(t *testing.T) {
	devs := hubNodes(t, 64, Config{}, 1, 2, 3)
	a, c := devs[0], devs[2]
	run(t, a)
	run(t, c) // node 2 never runs
	pa := &poster{d: a}
	pa.post(push(2, 256<<10, 100)) // blocks on node 2's window for seconds
	for i := range 20 {
		pa.post(push(3, 4096, uint64(i)))
	}
	got := pa.statuses(t, 20, 30*time.Second)
	for _, s := range got[:20] {
		if s.Cookie == 100 || s.Type != uapi.StDone {
			t.Fatalf("status %v before the 20 commands to the healthy node completed", s)
		}
	}
	if n := a.r.Counter(uapi.CtrCmdErrors); n != 0 {
		t.Fatalf("%d command errors while node 2 is still within its timeouts", n)
	}
}

// FENCE waits for every command before it, to all destinations, and the
// device takes nothing behind it until then; completions then resume.
func TestFenceOrdersEveryDestination(t *testing.T) {
	devs := hubNodes(t, 256, Config{}, 1, 2, 3)
	for _, d := range devs {
		run(t, d)
	}
	pa := &poster{d: devs[0]}
	pa.post(push(2, 64<<10, 1))
	pa.post(push(3, 64<<10, 2))
	pa.post(uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal, Cookie: 3})
	pa.post(push(3, 8, 4))
	got := pa.statuses(t, 4, 30*time.Second)
	if got[2].Cookie != 3 || got[3].Cookie != 4 {
		t.Fatalf("statuses %v: want both PUSHes, then the FENCE, then the PUSH after it", got)
	}
}

// A responder that gives up its session to the requester drops the PULL
// responses it owed; with nothing more to send it never starts the new
// session that would tell the requester. The requester's own guard on a
// PULL whose request was acknowledged fails it UNREACHABLE after the
// transport's give-up rules, once (it waited for ever; fuzz corpus
// aa07fc9c2694167b).
func TestOrphanedPullFailsUnreachable(t *testing.T) {
	ops := []pfScript{pfScript{}.pull(0, 6, 0, 2), pfScript{}.step(0, 1), pfScript{}.step(1, 1), pfScript{}.step(0, 1)}
	for i := range 6 {
		ops = append(ops, pfScript{}.advance(byte(3+i)), pfScript{}.step(1, 6), pfScript{}.step(0, 2))
	}
	r, n := playDropping(t, ops, func(dir int, h *wire.Header) bool { return dir == 1 && h.Type == wire.TypePullResp })
	if n == 0 {
		t.Fatal("no PULL response was sent")
	}
	c := r.cmds[0][0]
	if c.stats != 1 || c.err != uapi.EUnreachable {
		t.Fatalf("the PULL ended %v after %d statuses, want UNREACHABLE once", c.err, c.stats)
	}
	if got := r.dev[1].r.Counter(uapi.CtrTimeouts); got < uint64(r.dev[1].cfg.MaxTimeouts) {
		t.Fatalf("node 2 counted %d timeouts: it never gave up its session", got)
	}
	if p := r.dev[0].peers[2]; p.pullDeadline != 0 || len(p.pulls) != 0 {
		t.Fatalf("node 1 still guards %d PULLs (deadline %d)", len(p.pulls), p.pullDeadline)
	}
}
