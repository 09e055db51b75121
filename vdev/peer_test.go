package vdev

// Peers: who may have one (strangers, wrappers that vouch), their
// sessions (epochs that tell a late frame of an ended session) and their
// sequence numbers (wrapping).

import (
	"runtime"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/transport"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// segment is a port that cannot vouch for its senders (a shared Ethernet
// segment without a key): the hub's KnowsPeer is hidden.
type segment struct{ link.Port }

// On a medium that cannot vouch for its senders, the device keeps at most
// maxStrangers of them; the rest are dropped and counted with nothing
// kept, and a stranger idle past strangerIdle gives its place to a new
// one.
func TestStrangersAreBoundedAndForgotten(t *testing.T) {
	d, err := New(Config{Node: 1, RegionSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	holdForTest(t, d)
	now := int64(1 << 40)
	d.clock = func() int64 { return now }
	hub := link.NewHub(2048, 1024)
	p, err := hub.Attach(d.MAC())
	if err != nil {
		t.Fatal(err)
	}
	d.AttachPort(segment{p})
	x, err := hub.Attach(wire.NodeMAC(9999))
	if err != nil {
		t.Fatal(err)
	}
	push := func(src uint16) {
		h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagFirst | wire.FlagLast,
			SrcNode: src, DstNode: 1, Seq: 1, MsgLen: 8, Code: 7}
		if err := x.Send(wire.AppendFrame(x.Buffer(), wire.NodeMAC(1), wire.NodeMAC(src), &h, []byte("stranger"))); err != nil {
			t.Fatal(err)
		}
	}
	const extra = 44
	for n := range maxStrangers + extra {
		push(uint16(100 + n))
		if n%200 == 199 {
			d.pollRx()
		}
	}
	for d.pollRx() {
	}
	ctr := func(c uapi.Counter) uint64 { d.mirrorScreen(); return d.r.Load64(c.Off()) }
	if got := ctr(uapi.CtrRxPush); got != maxStrangers {
		t.Fatalf("RX_PUSH %d, want %d: one per admitted stranger", got, maxStrangers)
	}
	if got := ctr(uapi.CtrRxUnknownPeer); got != extra {
		t.Fatalf("RX_UNKNOWN_PEER %d, want %d", got, extra)
	}
	if len(d.peers) != maxStrangers || d.strangers != maxStrangers {
		t.Fatalf("%d peers kept (%d strangers), want %d", len(d.peers), d.strangers, maxStrangers)
	}
	// Their ACKs have nowhere to go (the hub has no such stations): dropped,
	// once the hold for a reply to carry them (transport.AckHold) is over.
	for range 4 {
		var t0 int64
		d.step(&t0)
		now += transport.AckHold
	}
	if ctr(uapi.CtrOwedDropped) == 0 {
		t.Fatal("ACKs owed to unroutable strangers were not dropped")
	}
	// A spoofed frame: Ethernet source and header disagree.
	h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagFirst | wire.FlagLast, SrcNode: 5, DstNode: 1, Seq: 1, MsgLen: 8}
	if err := x.Send(wire.AppendFrame(x.Buffer(), wire.NodeMAC(1), wire.NodeMAC(6), &h, []byte("spoofed!"))); err != nil {
		t.Fatal(err)
	}
	for d.pollRx() {
	}
	if got := ctr(uapi.CtrRxSpoofed); got != 1 {
		t.Fatalf("RX_SPOOFED %d, want 1", got)
	}
	// Past the idle time, a new stranger takes an old one's place: the
	// idle one made first, not the first made, which was just heard from
	// again (a frame that is not stamped, only noted).
	now += strangerIdle + 1
	push(100)
	for d.pollRx() {
	}
	push(5000)
	for d.pollRx() {
	}
	if d.peers[100] == nil || d.peers[101] != nil {
		t.Fatalf("stranger 100 kept %v, 101 kept %v: want the one heard from kept, the idle one evicted", d.peers[100] != nil, d.peers[101] != nil)
	}
	if got := ctr(uapi.CtrRxPush); got != maxStrangers+1 {
		t.Fatalf("RX_PUSH %d after the idle time, want %d", got, maxStrangers+1)
	}
	if len(d.peers) != maxStrangers || d.peers[5000] == nil {
		t.Fatalf("%d peers after eviction, the new stranger kept: %v", len(d.peers), d.peers[5000] != nil)
	}
}

// A wrapper (faults, a capture) vouches for its senders exactly when the
// port under it does, so a daemon of many nodes with --fault or --pcap
// does not take its own devices for strangers.
func TestWrappersVouchAsTheirPort(t *testing.T) {
	hub := link.NewHub(2048, 16)
	for _, tc := range []struct {
		name  string
		port  func(p link.Port) link.Port
		wants bool
	}{
		{"hub", func(p link.Port) link.Port { return p }, true},
		{"faults on the hub", func(p link.Port) link.Port { return impair.Wrap(p, impair.Config{Loss: 0.1}) }, true},
		{"faults on a segment", func(p link.Port) link.Port { return impair.Wrap(segment{p}, impair.Config{Loss: 0.1}) }, false},
	} {
		p, err := hub.Attach(wire.NodeMAC(uint16(len(tc.name))))
		if err != nil {
			t.Fatal(err)
		}
		if got := link.VouchesFor(tc.port(p)) != nil; got != tc.wants {
			t.Errorf("%s: vouches %v, want %v", tc.name, got, tc.wants)
		}
	}
}

// A new sending session numbers its packets from 1 again, so a late ACK
// or NACK of the session it replaced names numbers that are valid again:
// without the session's epoch in the frame, node 2's late ACK of node 1's
// first session retired packet 1 of the second, and the PUSH it carried
// completed DONE though node 2 never received it.

// playEndedSession ends node 1's first session to node 2 with a frame of
// node 2 about it held back (delay picks which of node 2's frames; the
// others of that pass are lost), then starts a second session whose first frame is lost,
// lets the held frame arrive, and lets the pair settle: every command of
// the second session must end as the receiver saw it.
func playEndedSession(t *testing.T, first pfScript, delay func(h *wire.Header) bool) *pfRig {
	t.Helper()
	r := newPfRig(t, pfDecodeConfig(0x41, 0x26)) // window 4, UNREACHABLE after 2 timeouts
	held := 0
	hold := func() {
		for _, f := range r.wire[1] {
			if h, _, err := r.parser.Parse(f); err == nil && held == 0 && delay(h) {
				r.tracef("link 2->: hold back %s seq %d ack %d code %#x flags %v", h.Type, h.Seq, h.Ack, h.Code, h.Flags)
				r.limbo[1] = append(r.limbo[1], f)
				held++
			} else {
				r.tracef("link 2->: drop")
			}
		}
		r.wire[1] = nil
	}
	r.run(first.step(0, 1).step(1, 1)) // node 2 answers the first session
	hold()
	if held != 1 {
		t.Fatalf("node 2 sent no frame to hold back")
	}
	// Node 2's answers to the resends are lost: node 1 gives up.
	var ended pfScript
	for _, adv := range []byte{4, 5, 6, 7} {
		ended = ended.advance(adv).step(0, 6).step(1, 1).fault(1, pfDrop, 0).fault(1, pfDrop, 0)
	}
	r.run(ended)
	r.wire[1] = nil
	p := r.dev[0].peers[2]
	if p.tx.Acked() != 0 || p.tx.Next() != 1 {
		t.Fatalf("node 1's session did not end: acked %d next %d", p.tx.Acked(), p.tx.Next())
	}
	before := len(r.cmds[0])
	// The second session: its first frame is lost; the held frame arrives.
	r.run(pfScript{}.push(0, 0, 2, 2).step(0, 1).fault(0, pfDrop, 0).fault(1, pfRelease, 0).step(0, 1))
	r.quiesce()
	r.final()
	for _, c := range r.cmds[0][before:] {
		if c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
			t.Fatalf("second session's PUSH #%d ended %v after %d statuses, node 2 reported it %d times", c.idx, c.err, c.stats, c.rxMsgs)
		}
	}
	return r
}

// A late ACK of the ended session retires nothing of the new one: the
// fuzzer's seed, and the same with every other frame node 2 sent lost.
func TestSessionEpochLateAck(t *testing.T) {
	r := pairScript(t, pfLateAckScript())
	if c := r.cmds[0][1]; c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
		t.Fatalf("the new session's PUSH ended %v after %d statuses, node 2 reported it %d times", c.err, c.stats, c.rxMsgs)
	}
	if n := r.dev[0].r.Counter(uapi.CtrDuplicates); n != 1 {
		t.Fatalf("node 1 counted %d duplicates, want 1 (the late ACK)", n)
	}
	playEndedSession(t, pfScript{}.push(0, 0, 0, 0), func(h *wire.Header) bool {
		return h.Type == wire.TypeAck && h.Flags&wire.FlagAckValid != 0 && h.Ack == 1
	})
}

// A late ACK piggybacked on a data frame (node 2's PULL response) of
// the ended session retires nothing of the new one.
func TestSessionEpochLatePiggybackedAck(t *testing.T) {
	playEndedSession(t, pfScript{}.pull(0, 0, 0, 0), func(h *wire.Header) bool {
		return h.Type == wire.TypePullResp && h.Flags&wire.FlagAckValid != 0 && h.Ack == 1
	})
}

// A late refusal of the ended session's packet 1 neither fails the new
// session's packet 1 nor, by its ACK field, completes it.
func TestSessionEpochLateRefusal(t *testing.T) {
	playEndedSession(t, pfScript{}.pushOutside(0, 0), isRefusal)
}

// A NACK still owed (the link had no room) when the peer starts a new
// session names the old session's numbers: it is dropped, not sent under
// the new session's epoch, where it refused the new packet 1 that node 2
// had placed.
func TestSessionEpochOwedNackDropped(t *testing.T) {
	r := newPfRig(t, pfDecodeConfig(0x41, 0x26)) // window 4, UNREACHABLE after 2 timeouts
	full := func(s pfScript) {                   // node 2 steps with no room on its link
		r.depth = 0
		r.run(s)
		r.depth = 64
	}
	r.run(pfScript{}.pushOutside(0, 0).step(0, 1))
	full(pfScript{}.step(1, 1)) // refused; the NACK is owed
	if p := r.dev[1].peers[1]; len(p.owedCtl) != 1 {
		t.Fatalf("node 2 owes %d control frames, want the refusal", len(p.owedCtl))
	}
	for _, adv := range []byte{4, 5, 6, 7} { // no answer: UNREACHABLE
		r.run(pfScript{}.advance(adv).step(0, 6).fault(0, pfDrop, 0))
	}
	if c := r.cmds[0][0]; c.err != uapi.EUnreachable {
		t.Fatalf("the first session's PUSH ended %v, want UNREACHABLE", c.err)
	}
	r.run(pfScript{}.push(0, 0, 1, 1).step(0, 1)) // the new session's packet 1
	full(pfScript{}.step(1, 1))                   // placed; the old refusal still owed
	r.quiesce()
	r.final()
	if c := r.cmds[0][1]; c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
		t.Fatalf("the new session's PUSH ended %v after %d statuses, node 2 reported it %d times", c.err, c.stats, c.rxMsgs)
	}
}

// Sequence numbers wrap through 0 after 2^32 packets per peer: traffic
// across the wrap is placed, acknowledged and completed like any other.
func TestSequenceWrap(t *testing.T) {
	a, b, _ := hubPair(t, 64, Config{}, nil)
	const start = 0xFFFFFFF0
	pa, pb := a.peerOf(2), b.peerOf(1)
	pa.tx.StartAt(start)
	pb.rx.StartAt(pa.tx.Epoch(), start) // the session is under way
	e, err := NewEngine(a, b)
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	defer e.Stop()
	// 20 KiB in 1 KiB packets: sequence numbers 0xFFFFFFF0 .. 3
	const n = 20 << 10
	for i := 0; i < n; i++ {
		a.lm[i] = byte(i * 13)
	}
	desc := uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, Length: n, RemoteAddr: 64 << 10, Cookie: 1}
	a.r.WriteDesc(a.g.CmdqOff, &desc, 0)
	a.r.Store64(uapi.RegCmdqTail, 1)
	waitStatus := func(d *Device) uapi.Status {
		// 50 million looks were 20 ms: under load the engine was not
		// always scheduled within them.
		for end := time.Now().Add(10 * time.Second); ; runtime.Gosched() {
			if d.r.Load64(uapi.RegStatqTail) > 0 {
				return d.r.ReadStatus(d.g.StatqOff)
			}
			if time.Now().After(end) {
				t.Fatalf("node %d: no status", d.node)
			}
		}
	}
	if s := waitStatus(a); s.Type != uapi.StDone || s.Cookie != 1 {
		t.Fatalf("sender: %v", s)
	}
	if s := waitStatus(b); s.Type != uapi.StPUSH || s.Length != n {
		t.Fatalf("receiver: %v", s)
	}
	for i := 0; i < n; i++ {
		if b.lm[64<<10+i] != byte(i*13) {
			t.Fatalf("byte %d differs", i)
		}
	}
	// A retransmission timer that runs out under a slow engine (-race)
	// resends, and its copies are dropped as duplicates or out of order;
	// a comparison broken by the wrap would drop packets nobody resent.
	dup, ooo, retx := b.r.Counter(uapi.CtrDuplicates), b.r.Counter(uapi.CtrOutOfOrder), a.r.Counter(uapi.CtrRetransmits)
	if dup+ooo > retx {
		t.Fatalf("duplicates %d + out-of-order %d across the wrap, but only %d retransmissions", dup, ooo, retx)
	}
}
