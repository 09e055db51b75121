package tests

import (
	"bytes"
	"runtime"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// overflow is the traffic of the ring-full tests: six signaled 1 KiB IPUSH
// messages into a 4 KiB ring the receiver does not drain, then a signaled
// PUSH from the same sender.
type overflow struct {
	a, b     *driver.Driver
	ring     *driver.Ring
	msgs     [][]byte
	idx      []uint64
	push     []byte
	pushIdx  uint64
	pushAddr uint64
}

const (
	ofRingBase = 1 << 20
	ofRingSize = 4096
	ofMsgs     = 6
)

func startOverflow(t *testing.T, mode uint64) *overflow {
	t.Helper()
	return startOverflowCfg(t, mode, vdev.Config{})
}

func startOverflowCfg(t *testing.T, mode uint64, cfg vdev.Config) *overflow {
	t.Helper()
	_, ds := cluster(t, cfg, 1024, 2)
	o := &overflow{a: ds[0], b: ds[1], pushAddr: 4 << 20}
	o.b.SetRingFullMode(mode)
	var err error
	if o.ring, err = o.b.SetRing(0, ofRingBase, ofRingSize, false); err != nil {
		t.Fatal(err)
	}
	if err := o.b.MapSender(o.a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < ofMsgs; i++ {
		data := pattern(1024, byte(40+i))
		local := uint64(i) << 12
		o.a.CopyIn(local, data)
		o.msgs = append(o.msgs, data)
		o.idx = append(o.idx, post(t, o.a, &uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagSignal, DstNode: 2,
			DstProc: uapi.GPID(2, 0), SrcProc: o.a.GPID(), Length: 1024, LocalAddr: local, Cookie: uint64(100 + i), Imm: uint64(i)}))
	}
	o.push = pattern(2048, 99)
	o.a.CopyIn(1<<20, o.push)
	o.pushIdx = post(t, o.a, &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: o.a.GPID(),
		Length: 2048, LocalAddr: 1 << 20, RemoteAddr: o.pushAddr, Cookie: 200, Imm: 200})
	return o
}

// receiveFirst4 takes the statuses of the four messages the ring holds,
// without releasing them, and checks their data.
func (o *overflow) receiveFirst4(t *testing.T) uint64 {
	t.Helper()
	var end uint64
	for i := 0; i < 4; i++ {
		s := waitType(t, o.b, uapi.StIPUSHMsg)
		if s.Imm != uint64(i) || !bytes.Equal(o.ring.Data(&s), o.msgs[i]) {
			t.Fatalf("message %d: status %v, data intact %v", i, s, bytes.Equal(o.ring.Data(&s), o.msgs[i]))
		}
		end = s.End
	}
	return end
}

// finish releases the ring and checks that the rest arrives intact and in
// order, and that every command completes at the sender, in order.
func (o *overflow) finish(t *testing.T, end uint64) {
	t.Helper()
	if err := o.ring.ReleaseTo(end); err != nil {
		t.Fatal(err)
	}
	for i := 4; i < ofMsgs; i++ {
		s := waitType(t, o.b, uapi.StIPUSHMsg)
		if s.Imm != uint64(i) {
			t.Fatalf("message imm %d arrived, want %d (order)", s.Imm, i)
		}
		if got := o.ring.Data(&s); !bytes.Equal(got, o.msgs[i]) {
			t.Fatalf("message %d differs at %s", i, firstDiff(got, o.msgs[i]))
		}
		if err := o.ring.ReleaseTo(s.End); err != nil {
			t.Fatal(err)
		}
	}
	s := waitType(t, o.b, uapi.StPUSH)
	if s.Imm != 200 || s.Addr != o.pushAddr || s.Length != 2048 {
		t.Fatalf("PUSH status %v", s)
	}
	if got := o.b.LinkMem()[o.pushAddr : o.pushAddr+2048]; !bytes.Equal(got, o.push) {
		t.Fatalf("PUSH data differs at %s", firstDiff(got, o.push))
	}
	noStatus(t, o.b)
	for i := 0; i < ofMsgs; i++ {
		expectDone(t, o.a, uapi.OpIPUSH, o.idx[i], uint64(100+i))
	}
	expectDone(t, o.a, uapi.OpPUSH, o.pushIdx, 200)
	noStatus(t, o.a)
	if n := o.b.Counter(uapi.CtrRxIPush); n != ofMsgs {
		t.Errorf("RX_IPUSH = %d, want %d (no packet placed twice)", n, ofMsgs)
	}
}

// TestRingFullHold: in hold mode a full ring raises exactly one RING_FULL
// status, and everything behind it from that peer — even a PUSH — waits
// until the receiver frees the ring; then all of it arrives intact and in
// order.
func TestRingFullHold(t *testing.T) {
	o := startOverflow(t, uapi.RingFullHold)
	end := o.receiveFirst4(t)
	rf := waitType(t, o.b, uapi.StRingFull)
	if rf.AMT != 0 {
		t.Fatalf("RING_FULL names AMT %d, want 0", rf.AMT)
	}
	// Let the sender put everything on the link (6 IPUSH + 1 PUSH packet),
	// so the PUSH has had every chance to overtake.
	eventually(t, "sender transmitted all 7 packets", func() bool { return o.a.Counter(uapi.CtrTxPkts) >= 7 })
	for i := 0; i < 100; i++ { // give the stalled engine many passes
		runtime.Gosched()
		time.Sleep(100 * time.Microsecond)
	}
	noStatus(t, o.b)
	if n := o.b.Counter(uapi.CtrRxPush); n != 0 {
		t.Fatalf("the PUSH behind the stall was placed (RX_PUSH %d)", n)
	}
	if !allBytes(o.b.LinkMem()[o.pushAddr:o.pushAddr+2048], 0) {
		t.Fatal("the PUSH behind the stall wrote memory")
	}
	if n := o.b.Counter(uapi.CtrRingFullHolds); n != 1 {
		t.Fatalf("RINGFULL_HOLDS = %d, want 1", n)
	}
	if n := o.b.Counter(uapi.CtrRingFullNACKs); n != 0 {
		t.Fatalf("RINGFULL_NACKS = %d in hold mode", n)
	}
	o.finish(t, end)
	if n := o.b.Counter(uapi.CtrRingFullHolds); n != 1 {
		t.Errorf("RINGFULL_HOLDS = %d after the stall, want 1", n)
	}
	// The hold is per peer: the sender's retransmissions of the held packet
	// were answered with hold-flagged ACKs (so it never counted the receiver
	// unreachable), and finish checked none of them was placed twice.
	if n := o.b.Counter(uapi.CtrHolds); n != 1 {
		t.Errorf("HOLDS = %d, want 1 (one stall)", n)
	}
}

// TestRingFullNACK: in NACK mode the receiver drops and NACKs what does not
// fit, the sender retransmits, and once the receiver frees the ring every
// message arrives intact and in order; no RING_FULL status is raised.
func TestRingFullNACK(t *testing.T) {
	o := startOverflow(t, uapi.RingFullNACK)
	end := o.receiveFirst4(t)
	eventually(t, "a NACK received and a retransmission", func() bool {
		return o.b.Counter(uapi.CtrRingFullNACKs) > 0 && o.a.Counter(uapi.CtrNACKsRx) > 0 && o.a.Counter(uapi.CtrRetransmits) > 0
	})
	// Let it NACK and retransmit a while longer with the ring still full.
	eventually(t, "a second retransmission round", func() bool { return o.a.Counter(uapi.CtrRetransmits) >= 6 })
	noStatus(t, o.b)
	if n := o.b.Counter(uapi.CtrRxPush); n != 0 {
		t.Fatalf("the PUSH behind the full ring was placed out of order (RX_PUSH %d)", n)
	}
	o.finish(t, end)
	if n := o.b.Counter(uapi.CtrRingFullHolds); n != 0 {
		t.Errorf("RINGFULL_HOLDS = %d in NACK mode", n)
	}
	t.Logf("NACKs %d, retransmits %d, out of order dropped %d",
		o.b.Counter(uapi.CtrRingFullNACKs), o.a.Counter(uapi.CtrRetransmits), o.b.Counter(uapi.CtrOutOfOrder))
}

// TestStatusRingFull: a driver that stops consuming its status ring stalls
// the device instead of being overwritten; once it consumes, every status
// arrives once, in order.
func TestStatusRingFull(t *testing.T) {
	_, ds := cluster(t, vdev.Config{StatusEntries: 16}, 4096, 2)
	a, b := ds[0], ds[1]
	// Messages too large for a PUSHB frame (the device batches PUSHes of
	// at most 512 bytes): a batch the full status ring stops partway is
	// not acknowledged until its last message is placed, so the sender's
	// completions would stop short of its ring's 16 wherever a batch
	// straddled the stall.
	const n, size = 100, 1024
	for i := 0; i < n; i++ {
		data := pattern(size, byte(i))
		a.CopyIn(uint64(i)*size, data)
		post(t, a, &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: a.GPID(), Length: size,
			LocalAddr: uint64(i) * size, RemoteAddr: 1<<20 + uint64(i)*size, Cookie: uint64(5000 + i), Imm: uint64(i)})
	}
	eventually(t, "the receiver's status ring full and stalled", func() bool {
		return b.Counter(uapi.CtrStatusFullStalls) > 0
	})
	if got := b.StatusTail() - b.StatusHead(); got != 16 {
		t.Fatalf("receiver: %d statuses pending, want the ring's 16", got)
	}
	// The sender's ring fills with the completions of what was acknowledged.
	eventually(t, "the sender's status ring full", func() bool { return a.StatusTail()-a.StatusHead() == 16 })
	for i := 0; i < 100; i++ { // give the stalled engine many passes to overwrite something
		runtime.Gosched()
		time.Sleep(100 * time.Microsecond)
	}
	for _, d := range []*driver.Driver{a, b} {
		if got := d.StatusTail() - d.StatusHead(); got != 16 {
			t.Fatalf("node %d: %d statuses pending, want the ring's 16", d.Node(), got)
		}
	}
	if got := b.Counter(uapi.CtrRxPush); got >= n {
		t.Fatalf("receiver placed all %d PUSHes with a full status ring", got)
	}
	// Drain both, alternately: each side's stall holds the other back.
	nextImm, nextCookie := 0, 0
	deadline := time.Now().Add(4 * time.Duration(waitNs))
	for nextImm < n || nextCookie < n {
		progress := false
		if s, ok := b.Poll(); ok {
			progress = true
			if s.Type != uapi.StPUSH || s.Imm != uint64(nextImm) || s.Addr != 1<<20+uint64(nextImm)*size {
				t.Fatalf("receiver status %v, want PUSH imm %d", s, nextImm)
			}
			if got, want := b.LinkMem()[s.Addr:s.Addr+size], pattern(size, byte(nextImm)); !bytes.Equal(got, want) {
				t.Fatalf("PUSH %d differs at %s", nextImm, firstDiff(got, want))
			}
			nextImm++
		}
		if s, ok := a.Poll(); ok {
			progress = true
			if s.Type != uapi.StDone || s.Cookie != uint64(5000+nextCookie) || s.CmdIndex() != uint64(nextCookie) {
				t.Fatalf("sender status %v, want DONE cmd#%d cookie %d", s, nextCookie, 5000+nextCookie)
			}
			nextCookie++
		}
		if !progress {
			if time.Now().After(deadline) {
				t.Fatalf("stuck: %d receiver and %d sender statuses of %d", nextImm, nextCookie, n)
			}
			runtime.Gosched()
		}
	}
	noStatus(t, a)
	noStatus(t, b)
	if got := b.Counter(uapi.CtrStatusWritten); got != n {
		t.Errorf("receiver STATUS_WRITTEN = %d, want %d", got, n)
	}
	if got := a.Counter(uapi.CtrStatusWritten); got != n {
		t.Errorf("sender STATUS_WRITTEN = %d, want %d", got, n)
	}
	t.Logf("stalls: receiver %d, sender %d", b.Counter(uapi.CtrStatusFullStalls), a.Counter(uapi.CtrStatusFullStalls))
}

// TestRingFullStatusWhileStatusRingFull: the one RING_FULL status of a stall
// must reach the driver even when the status ring is full at the moment the
// ring fills.
func TestRingFullStatusWhileStatusRingFull(t *testing.T) {
	_, ds := cluster(t, vdev.Config{StatusEntries: 16}, 512, 2)
	a, b := ds[0], ds[1]
	ring, err := b.SetRing(0, 1<<20, 4096, false) // 8 packets of 512 B
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	// 8 PUSH statuses, then 8 packet statuses fill both rings; packet 9 finds the ring full.
	for i := 0; i < 8; i++ {
		post(t, a, &uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, SrcProc: a.GPID(), Length: 8, RemoteAddr: 2 << 20, Imm: uint64(i)})
	}
	data := pattern(9*512, 77)
	a.CopyIn(1<<20, data)
	post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagPktStatus, DstNode: 2, DstProc: uapi.GPID(2, 0),
		SrcProc: a.GPID(), Length: uint32(len(data)), LocalAddr: 1 << 20})
	eventually(t, "the receiver stalled with its status ring full", func() bool {
		return b.Counter(uapi.CtrStatusFullStalls) > 0 && b.Counter(uapi.CtrRxIPush) == 8 && a.Counter(uapi.CtrTxPkts) >= 8+9 // retransmissions of a held packet count too
	})
	for i := 0; i < 100; i++ { // give the stalled engine many passes
		runtime.Gosched()
		time.Sleep(100 * time.Microsecond)
	}
	if got := b.StatusTail() - b.StatusHead(); got != 16 {
		t.Fatalf("receiver: %d statuses pending, want the ring's 16", got)
	}
	ra := driver.NewReassembler()
	var msg *driver.Message
	ringFull := 0
	for msg == nil {
		s := wait(t, b)
		switch s.Type {
		case uapi.StPUSH:
		case uapi.StRingFull:
			ringFull++
		case uapi.StIPUSHPkt:
			m, ok := ra.Add(&s, ring.Data(&s))
			if err := ring.ReleaseTo(s.End); err != nil {
				t.Fatal(err)
			}
			if ok {
				msg = m
			}
		default:
			t.Fatalf("status %v", s)
		}
	}
	if !bytes.Equal(msg.Data, data) {
		t.Fatalf("message differs at %s", firstDiff(msg.Data, data))
	}
	if ringFull != 1 {
		t.Fatalf("%d RING_FULL statuses for one stall, want 1", ringFull)
	}
	if holds := b.Counter(uapi.CtrRingFullHolds); uint64(ringFull) != holds {
		t.Fatalf("%d RING_FULL statuses for RINGFULL_HOLDS = %d: a stall's status was lost", ringFull, holds)
	}
}

// A hold keeps a slow receiver from being called unreachable, but not for
// ever: past the sender's hold limit the held commands fail with
// HOLD_LIMIT, counted, and nothing of them is placed.
func TestHoldLimit(t *testing.T) {
	o := startOverflowCfg(t, uapi.RingFullHold, vdev.Config{HoldLimit: 300 * time.Millisecond})
	for i := range 4 { // the four messages the ring holds complete
		expectDone(t, o.a, uapi.OpIPUSH, o.idx[i], uint64(100+i))
	}
	for i := 4; i < ofMsgs; i++ {
		expectError(t, o.a, uapi.OpIPUSH, o.idx[i], uint64(100+i), uapi.EHoldLimit)
	}
	expectError(t, o.a, uapi.OpPUSH, o.pushIdx, 200, uapi.EHoldLimit)
	eventually(t, "HOLD_EXPIRED counted", func() bool { return o.a.Counter(uapi.CtrHoldExpired) == 1 })
	if n := o.b.Counter(uapi.CtrRxPush); n != 0 {
		t.Fatalf("the PUSH behind the hold was placed (RX_PUSH %d)", n)
	}
}
