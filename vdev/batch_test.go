package vdev

// PUSHB: small PUSHes queued for one peer on a lossless medium leave in
// one frame (requester.go coalesce) and are placed one by one
// (placement.go placeBatch).

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// batchStream posts n signalled 8-byte PUSHes from a to b, message i from
// a's link memory at 8i (bytes of its own) to b's at dst+8i, without
// running a pass, and returns the bytes sent.
func batchStream(pp *postPair, n int, dst func(i int) uint64) []byte {
	src := make([]byte, 8*n)
	for i := range src {
		src[i] = byte(i*7 + 1)
	}
	copy(pp.a.lm, src)
	for i := range n {
		post(pp.a, pp.next[0], uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: uapi.GPID(1, 0),
			Length: 8, LocalAddr: uint64(8 * i), RemoteAddr: dst(i), Cookie: uint64(100 + i), Imm: uint64(1000 + i)})
		pp.next[0]++
	}
	return src
}

// statuses reads d's status ring from entry from to its tail.
func statuses(d *Device, from uint64) []uapi.Status {
	var s []uapi.Status
	for i := from; i < d.r.Load64(uapi.RegStatqTail); i++ {
		s = append(s, d.r.ReadStatus(d.g.StatqOff+(i&(d.g.StatqEntries-1))*uapi.StatusSize))
	}
	return s
}

// settle runs full passes of both devices until a has want statuses.
func (pp *postPair) settle(t *testing.T, want int) {
	t.Helper()
	for i := 0; len(statuses(pp.a, 0)) < want; i++ {
		if i > 100 {
			t.Fatalf("a has %d of %d statuses after %d rounds of passes", len(statuses(pp.a, 0)), want, i)
		}
		pp.full(pp.b)
		pp.full(pp.a)
	}
}

func noViolations(t *testing.T, ds ...*Device) {
	t.Helper()
	for _, d := range ds {
		if v := violations(d); v != 0 {
			t.Fatalf("node %d: %d violations: %v", d.node, v, d.r.ReadViolations())
		}
	}
}

// A burst of PUSHes one pass finds queued leaves as one PUSHB frame: every
// message arrives intact where it was sent, with its own receive status
// (address, length, id, immediate) in order, and every command completes
// with its own DONE, in posting order. A checked device sees each one.
func TestBatchCoalescesQueuedPushes(t *testing.T) {
	const n = 20
	pp := newPostPair(t, 64)
	src := batchStream(pp, n, func(i int) uint64 { return uint64(4096 + 8*i) })
	pp.a.PollPost()
	if got := counter(pp.a, uapi.CtrTxPkts); got != 1 {
		t.Fatalf("a sent %d frames for %d PUSHes, want 1", got, n)
	}
	pp.settle(t, n)
	if !bytes.Equal(pp.b.lm[4096:4096+8*n], src) {
		t.Fatalf("b's memory %x, sent %x", pp.b.lm[4096:4096+8*n], src)
	}
	rx := statuses(pp.b, 0)
	if len(rx) != n {
		t.Fatalf("b wrote %d statuses for %d messages", len(rx), n)
	}
	var ids []uint32
	for i, s := range rx {
		if s.Type != uapi.StPUSH || s.Length != 8 || s.Addr != uint64(4096+8*i) || s.Imm != uint64(1000+i) ||
			s.SrcNode != 1 || s.SrcProc != uapi.GPID(1, 0) || s.Flags != uapi.StFlagFirst|uapi.StFlagLast {
			t.Fatalf("b's status %d: %+v", i, s)
		}
		ids = append(ids, s.MsgID)
	}
	for i := 1; i < n; i++ {
		if ids[i] != ids[i-1]+1 {
			t.Fatalf("message ids %v: not one per command in order", ids)
		}
	}
	for i, s := range statuses(pp.a, 0) {
		if s.Type != uapi.StDone || s.End != uint64(i) || s.Cookie != uint64(100+i) {
			t.Fatalf("a's status %d: %+v, want DONE of command %d", i, s, i)
		}
	}
	if got := counter(pp.a, uapi.CtrCmds); got != n {
		t.Fatalf("CMDS %d, want %d", got, n)
	}
	if got := counter(pp.b, uapi.CtrRxPkts); got != 1 {
		t.Fatalf("b received %d packets, want the one frame", got)
	}
	noViolations(t, pp.a, pp.b)
}

// A PUSHB frame with one sub-message outside the receiver's window has
// that one refused (its command fails with REMOTE_ADDR) and the others
// placed and completed, in order, as one-packet PUSHes would be.
func TestBatchRefusesOnlyTheBadSubMessage(t *testing.T) {
	const n, bad = 5, 2
	pp := newPostPair(t, 64)
	pp.b.r.Store64(uapi.RegWinBase, 4096)
	pp.b.r.Store64(uapi.RegWinSize, 4096)
	src := batchStream(pp, n, func(i int) uint64 {
		if i == bad {
			return 64 // below the window
		}
		return uint64(4096 + 8*i)
	})
	pp.a.PollPost()
	if got := counter(pp.a, uapi.CtrTxPkts); got != 1 {
		t.Fatalf("a sent %d frames for %d PUSHes, want 1", got, n)
	}
	pp.settle(t, n)
	for i, s := range statuses(pp.a, 0) {
		want := uapi.StDone
		if i == bad {
			want = uapi.StError
			if s.Err != uapi.ERemoteAddr {
				t.Fatalf("the bad command failed with %v, want REMOTE_ADDR", s.Err)
			}
		}
		if s.Type != want || s.End != uint64(i) {
			t.Fatalf("a's status %d: %+v, want %v", i, s, want)
		}
	}
	rx := statuses(pp.b, 0)
	if len(rx) != n-1 {
		t.Fatalf("b wrote %d statuses, want %d", len(rx), n-1)
	}
	for i := range n {
		got := pp.b.lm[4096+8*i : 4096+8*i+8]
		if i == bad {
			if !bytes.Equal(pp.b.lm[64:72], make([]byte, 8)) {
				t.Fatalf("the refused message landed: %x", pp.b.lm[64:72])
			}
			continue
		}
		if !bytes.Equal(got, src[8*i:8*i+8]) {
			t.Fatalf("message %d: %x, sent %x", i, got, src[8*i:8*i+8])
		}
	}
	if got := counter(pp.b, uapi.CtrRxBadAddr); got != 1 {
		t.Fatalf("RX_BAD_ADDR %d, want 1", got)
	}
	pp.full(pp.b) // a's confirmation of the refusal
	if len(pp.b.peers[1].refusals) != 0 {
		t.Fatalf("b still repeats the refusal: %+v", pp.b.peers[1].refusals)
	}
	noViolations(t, pp.a, pp.b)
}

// A PUSHB frame that comes twice (a resend whose original was placed) is
// placed once: the second is a duplicate, its messages written and
// reported once. A resend carries the same sub-messages as the first.
func TestBatchResentIsPlacedOnce(t *testing.T) {
	const n = 6
	pp := newPostPair(t, 64)
	batchStream(pp, n, func(i int) uint64 { return uint64(4096 + 8*i) })
	pp.a.PollPost()
	f := pp.b.port.Recv()
	if f == nil {
		t.Fatal("no frame reached b")
	}
	first := append([]byte(nil), f...)
	pp.b.port.Release(f)

	// The resend, built as the retransmission timer would.
	p := pp.a.peers[2]
	if len(p.sent) != 1 || p.sent[0].batch == nil || len(p.sent[0].batch.jobs) != n {
		t.Fatalf("a keeps %d packets (%+v), want one PUSHB of %d", len(p.sent), p.sent, n)
	}
	holdForTest(t, pp.a)
	if err := pp.a.transmit(p, &p.sent[0], p.tx.Acked()+1, true); err != nil {
		t.Fatal(err)
	}
	again := append([]byte(nil), pp.b.port.Recv()...)
	if !bytes.Equal(again[wire.FrameOverhead:], first[wire.FrameOverhead:]) {
		t.Fatalf("the resend's payload differs:\n%x\n%x", again[wire.FrameOverhead:], first[wire.FrameOverhead:])
	}

	holdForTest(t, pp.b)
	pp.b.handle(append(pp.b.port.Buffer(), first...), false)
	pp.b.lm[4096] ^= 0xFF // a second placement would write it back
	pp.b.handle(append(pp.b.port.Buffer(), again...), false)
	if got := len(statuses(pp.b, 0)); got != n {
		t.Fatalf("b wrote %d statuses for %d messages sent twice", got, n)
	}
	if got := counter(pp.b, uapi.CtrDuplicates); got != 1 {
		t.Fatalf("DUPLICATES %d, want 1", got)
	}
	if pp.b.lm[4096] != pp.a.lm[0]^0xFF {
		t.Fatal("the duplicate was placed again")
	}
}

// A PUSHB frame whose sub-messages do not parse is counted malformed and
// dropped: nothing placed, no status, its number not taken.
func TestBatchMalformedDropped(t *testing.T) {
	pp := newPostPair(t, 64)
	holdForTest(t, pp.b)
	payload := wire.AppendSub(nil, &wire.Sub{Addr: 4096, MsgID: 1, Len: 8}, []byte("12345678"))
	for _, c := range []struct {
		why   string
		count uint32
		pl    []byte
	}{
		{"count beyond the sub-messages", 2, payload},
		{"a cut sub-message", 1, payload[:wire.SubLen+4]},
	} {
		h := wire.Header{Version: wire.Version1, Type: wire.TypePushBatch, Flags: wire.FlagSeq | wire.FlagFirst | wire.FlagLast,
			SrcNode: 1, DstNode: 2, Seq: 1, MsgLen: c.count}
		before := counter(pp.b, uapi.CtrRxMalformed)
		pp.b.handle(wire.AppendFrame(pp.b.port.Buffer(), wire.NodeMAC(2), wire.NodeMAC(1), &h, c.pl), false)
		if got := counter(pp.b, uapi.CtrRxMalformed) - before; got != 1 {
			t.Fatalf("%s: RX_MALFORMED moved by %d, want 1", c.why, got)
		}
	}
	if pp.b.statTail != 0 || !bytes.Equal(pp.b.lm[4096:4104], make([]byte, 8)) {
		t.Fatalf("a malformed batch placed something: %d statuses", pp.b.statTail)
	}
	if p := pp.b.peers[1]; p != nil && p.rx.Expect() != 1 {
		t.Fatalf("b expects %d next: a malformed frame took a number", p.rx.Expect())
	}
}

// PUSHes that cannot share a frame leave alone: a lone one, a large one
// (more than maxSubLen), one asking for per-packet statuses.
func TestBatchOnlyBatchable(t *testing.T) {
	pp := newPostPair(t, 64)
	for _, c := range []uapi.Desc{
		{Length: 8},
		{Length: maxSubLen + 8},
		{Length: 8, Flags: uapi.FlagPktStatus},
		{Length: 8},
	} {
		c.Opcode, c.DstNode, c.SrcProc, c.RemoteAddr = uapi.OpPUSH, 2, uapi.GPID(1, 0), 4096
		post(pp.a, pp.next[0], c)
		pp.next[0]++
	}
	pp.a.PollPost()
	if got := counter(pp.a, uapi.CtrTxPkts); got != 4 {
		t.Fatalf("a sent %d frames for 4 PUSHes no two of which may share one, want 4", got)
	}
}

// A PUSHB frame of more messages than the receiver's status ring holds is
// placed as its driver frees room, in order, each message once (the
// frame held or NACKed and tried again goes on where it stopped), in
// either ring-full mode.
func TestBatchLargerThanTheStatusRing(t *testing.T) {
	for _, mode := range []uint64{uapi.RingFullHold, uapi.RingFullNACK} {
		const n, ring = 40, 16
		pp := newPostPairStatus(t, 64, ring)
		pp.b.r.Store64(uapi.RegRingFullMode, mode)
		src := batchStream(pp, n, func(i int) uint64 { return uint64(4096 + 8*i) })
		pp.a.PollPost()
		if got := counter(pp.a, uapi.CtrTxPkts); got != 1 {
			t.Fatalf("mode %d: a sent %d frames for %d PUSHes, want 1", mode, got, n)
		}
		var got, done int
		for round := 0; got < n || done < n; round++ {
			if round > 1000 {
				t.Fatalf("mode %d: %d of %d placed, %d completed after %d rounds", mode, got, n, done, round)
			}
			pp.now += 1_000_000 // a NACKed frame's backoff passes
			pp.full(pp.b)
			for _, s := range statuses(pp.b, uint64(got)) {
				if s.Type != uapi.StPUSH || s.Addr != uint64(4096+8*got) || s.Imm != uint64(1000+got) {
					t.Fatalf("mode %d: b's status %d: %+v", mode, got, s)
				}
				got++
			}
			pp.b.r.Store64(uapi.RegStatqHead, uint64(got)) // b's driver consumes them
			pp.full(pp.a)
			done = len(statuses(pp.a, uint64(done))) + done
			pp.a.r.Store64(uapi.RegStatqHead, uint64(done))
		}
		if !bytes.Equal(pp.b.lm[4096:4096+8*n], src) {
			t.Fatalf("mode %d: b's memory differs from what was sent", mode)
		}
		if got := counter(pp.b, uapi.CtrRxPush); got != n {
			t.Fatalf("mode %d: RX_PUSH %d, want %d: a message placed twice or not at all", mode, got, n)
		}
		if counter(pp.b, uapi.CtrStatusFullStalls) == 0 {
			t.Fatalf("mode %d: the status ring never stalled the batch", mode)
		}
		noViolations(t, pp.a, pp.b)
	}
}

// A traced PUSHB frame moves the trace's stamps as the packets it stands
// for would: Tx at the sender, Rx, Placed and Status at the receiver
// (--breakdown reads them; a batch left them at the last lone packet's).
func TestTracedBatchMovesStamps(t *testing.T) {
	pp := newPostPair(t, 64)
	for _, d := range []*Device{pp.a, pp.b} {
		d.r.Store64(uapi.RegTraceCtrl, 1)
	}
	batchStream(pp, 4, func(i int) uint64 { return uint64(4096 + 8*i) })
	pp.full(pp.a)
	if got := counter(pp.a, uapi.CtrTxPkts); got != 1 {
		t.Fatalf("4 queued PUSHes left in %d frames, want 1 PUSHB", got)
	}
	pp.full(pp.b)
	if got := counter(pp.b, uapi.CtrRxPush); got != 4 {
		t.Fatalf("RX_PUSH %d, want 4", got)
	}
	for _, c := range []struct {
		d     *Device
		stamp int
		name  string
	}{{pp.a, uapi.TraceTx, "Tx"}, {pp.b, uapi.TraceRx, "Rx"}, {pp.b, uapi.TracePlaced, "Placed"}, {pp.b, uapi.TraceStatus, "Status"}} {
		if v := c.d.r.Load64(uapi.RegTrace + 8*uint32(c.stamp)); v == 0 {
			t.Errorf("node %d's %s stamp not moved by a PUSHB frame", c.d.node, c.name)
		}
	}
}
