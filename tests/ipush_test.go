package tests

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// checkInRing fails unless the data a status describes lies wholly inside
// the ring: a packet never straddles the ring's end.
func checkInRing(t *testing.T, r *driver.Ring, base, size uint64, s *uapi.Status) {
	t.Helper()
	if s.Addr < base || s.Addr+uint64(s.Length) > base+size || s.Addr%uapi.RingAlign != 0 {
		t.Fatalf("status %v: data [%#x,+%d) not inside ring [%#x,+%d) on an 8-byte boundary", *s, s.Addr, s.Length, base, size)
	}
	if r.Data(s) == nil {
		t.Fatalf("Ring.Data refused status %v", *s)
	}
}

// TestIPushPerMessage: one IPUSH through the AMT Address Table gives one
// IPUSH_MSG status whose data is the message.
func TestIPushPerMessage(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	const base, size = 1 << 20, 64 << 10
	ring, err := b.SetRing(5, base, size, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 5); err != nil {
		t.Fatal(err)
	}
	if amt, ok, err := b.Sender(a.GPID()); err != nil || !ok || amt != 5 {
		t.Fatalf("Sender(%d) = %d %v %v", a.GPID(), amt, ok, err)
	}
	data := pattern(10_000, 11)
	a.CopyIn(0, data)
	idx := post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagSignal, DstNode: 2, DstProc: uapi.GPID(2, 0),
		SrcProc: a.GPID(), Length: uint32(len(data)), Cookie: 0x1111, Imm: 0xfeedface})
	s := waitType(t, b, uapi.StIPUSHMsg)
	if s.AMT != 5 || s.Length != uint32(len(data)) || s.SrcNode != 1 || s.SrcProc != a.GPID() ||
		s.Imm != 0xfeedface || s.Flags&uapi.StFlagInterleaved != 0 || s.Flags&(uapi.StFlagFirst|uapi.StFlagLast) != uapi.StFlagFirst|uapi.StFlagLast {
		t.Fatalf("receiver status %v", s)
	}
	checkInRing(t, ring, base, size, &s)
	if got := ring.Data(&s); !bytes.Equal(got, data) {
		t.Fatalf("ring data differs at %s", firstDiff(got, data))
	}
	if s.End != ring.Tail() || s.End != uint64(len(data)) {
		t.Fatalf("status End %d, ring tail %d, want %d", s.End, ring.Tail(), len(data))
	}
	if err := ring.ReleaseTo(s.End); err != nil {
		t.Fatal(err)
	}
	if ring.Head() != s.End {
		t.Fatalf("head %d after release to %d", ring.Head(), s.End)
	}
	expectDone(t, a, uapi.OpIPUSH, idx, 0x1111)
	if n := b.Counter(uapi.CtrRxIPush); n != 3 {
		t.Errorf("RX_IPUSH = %d, want 3 packets", n)
	}
	noStatus(t, b)
}

// TestIPushPerPacket: a message of many packets with PKT_STATUS gives one
// IPUSH_PKT status per packet, which the Reassembler puts back together.
func TestIPushPerPacket(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 512, 2)
	a, b := ds[0], ds[1]
	if a.MTU() != 512 {
		t.Fatalf("MTU %d, want 512", a.MTU())
	}
	const base, size = 1 << 20, 64 << 10
	ring, err := b.SetRing(0, base, size, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	data := pattern(20_001, 13) // 40 packets, the last one short
	a.CopyIn(0, data)
	idx := post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagSignal | uapi.FlagPktStatus, DstNode: 2,
		DstProc: uapi.GPID(2, 0), SrcProc: a.GPID(), Length: uint32(len(data)), Cookie: 0x2222, Imm: 7})
	ra := driver.NewReassembler()
	var msg *driver.Message
	pkts := 0
	for msg == nil {
		s := waitType(t, b, uapi.StIPUSHPkt)
		checkInRing(t, ring, base, size, &s)
		if s.Offset != uint32(pkts*512) || s.AMT != 0 || s.Imm != 7 {
			t.Fatalf("packet %d: status %v", pkts, s)
		}
		if first := s.Flags&uapi.StFlagFirst != 0; first != (pkts == 0) {
			t.Fatalf("packet %d: FIRST=%v", pkts, first)
		}
		last := s.Flags&uapi.StFlagLast != 0
		pkts++
		m, done := ra.Add(&s, ring.Data(&s))
		if done != last {
			t.Fatalf("packet %d: LAST=%v but message complete=%v", pkts, last, done)
		}
		if err := ring.ReleaseTo(s.End); err != nil {
			t.Fatal(err)
		}
		msg = m
	}
	if pkts != 40 {
		t.Errorf("%d packet statuses, want 40", pkts)
	}
	if !bytes.Equal(msg.Data, data) || msg.SrcNode != 1 || msg.SrcProc != a.GPID() || msg.Imm != 7 {
		t.Fatalf("reassembled message from %d/%d imm %d differs: %s", msg.SrcNode, msg.SrcProc, msg.Imm, firstDiff(msg.Data, data))
	}
	if ra.Pending() != 0 {
		t.Errorf("%d messages left partial", ra.Pending())
	}
	expectDone(t, a, uapi.OpIPUSH, idx, 0x2222)
	noStatus(t, b)
}

// TestIPushDirectAMT: the variant without the AMT Address Table names the
// receiver's ring in the command; an invalid or absent ring is refused.
func TestIPushDirectAMT(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	const base, size = 2 << 20, 32 << 10
	ring, err := b.SetRing(9, base, size, false)
	if err != nil {
		t.Fatal(err)
	}
	// No MapSender: the Address Table has no entry for a.
	for i, pkt := range []bool{false, true} {
		data := pattern(6000+i*8, byte(20+i))
		a.CopyIn(0, data)
		flags := uint8(uapi.FlagDirectAMT | uapi.FlagSignal)
		if pkt {
			flags |= uapi.FlagPktStatus
		}
		idx, err := a.IPush(2, uapi.GPID(2, 0), 0, uint32(len(data)), flags, 9, uint64(0x3300+i))
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			s := wait(t, b)
			want := uapi.StIPUSHMsg
			if pkt {
				want = uapi.StIPUSHPkt
			}
			if s.Type != want || s.AMT != 9 || s.SrcProc != a.GPID() {
				t.Fatalf("status %v, want %v on AMT 9", s, want)
			}
			checkInRing(t, ring, base, size, &s)
			got = append(got, ring.Data(&s)...)
			if err := ring.ReleaseTo(s.End); err != nil {
				t.Fatal(err)
			}
			if s.Flags&uapi.StFlagLast != 0 {
				break
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("direct AMT (per packet %v): data differs at %s", pkt, firstDiff(got, data))
		}
		expectDone(t, a, uapi.OpIPUSH, idx, uint64(0x3300+i))
	}
	if n := b.Counter(uapi.CtrIPushNoEntry); n != 0 {
		t.Errorf("IPUSH_NOENTRY = %d: DIRECT_AMT must not consult the table", n)
	}
	// An AMT entry that is not set up, and one out of range.
	idx, err := a.IPush(2, 0, 0, 64, uapi.FlagDirectAMT, 10, 0x3400)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, a, uapi.OpIPUSH, idx, 0x3400, uapi.EBadAMT)
	idx, err = a.IPush(2, 0, 0, 64, uapi.FlagDirectAMT, 60000, 0x3401)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, a, uapi.OpIPUSH, idx, 0x3401, uapi.EBadAMT)
	noStatus(t, b)
	if n := b.Counter(uapi.CtrIPushBadAMT); n != 2 {
		t.Errorf("IPUSH_BAD_AMT = %d, want 2: every refusal is counted where it happens", n)
	}
}

// TestIPushRingWrap streams many messages through a ring much smaller than
// their total, releasing as it goes: every byte arrives and no packet
// straddles the ring's end, per message and per packet.
func TestIPushRingWrap(t *testing.T) {
	for _, pkt := range []bool{false, true} {
		name := "per-message"
		if pkt {
			name = "per-packet"
		}
		t.Run(name, func(t *testing.T) {
			_, ds := cluster(t, vdev.Config{}, 512, 2)
			a, b := ds[0], ds[1]
			const base, size = 1 << 20, 3000 // not a multiple of the packet size
			ring, err := b.SetRing(0, base, size, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.MapSender(a.GPID(), 0); err != nil {
				t.Fatal(err)
			}
			flags := uint8(0)
			if pkt {
				flags = uapi.FlagPktStatus
			}
			ra := driver.NewReassembler()
			total, wraps := 0, 0
			var prevID uint32
			prevAddr := uint64(0)
			for i := 0; i < 120; i++ {
				// Per packet, padding is under one packet, so up to 2000 bytes
				// always fit the drained ring; a per-message message is kept
				// contiguous, and its padding always fits only up to half the
				// ring (see TestIPushPerMessageOverHalfRing).
				n := 1 + (i*397)%2000
				if !pkt {
					n = 1 + (i*397)%(size/2)
				}
				data := pattern(n, byte(i))
				local := uint64(i%4) << 16
				a.CopyIn(local, data)
				post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, Flags: flags, DstNode: 2, DstProc: uapi.GPID(2, 0),
					SrcProc: a.GPID(), Length: uint32(n), LocalAddr: local, Imm: uint64(i)})
				var got []byte
				for {
					s := wait(t, b)
					if s.Type != uapi.StIPUSHMsg && s.Type != uapi.StIPUSHPkt {
						t.Fatalf("message %d: status %v", i, s)
					}
					if s.Imm != uint64(i) {
						t.Fatalf("message %d: status for message imm %d", i, s.Imm)
					}
					checkInRing(t, ring, base, size, &s)
					if s.Addr < prevAddr {
						wraps++
					}
					prevAddr = s.Addr
					if pkt {
						if m, ok := ra.Add(&s, ring.Data(&s)); ok {
							got = m.Data
						}
					} else {
						if s.Flags&uapi.StFlagInterleaved != 0 {
							t.Fatalf("message %d: interleaved with a single sender", i)
						}
						got = append([]byte(nil), ring.Data(&s)...)
					}
					if err := ring.ReleaseTo(s.End); err != nil {
						t.Fatal(err)
					}
					if s.Flags&uapi.StFlagLast != 0 {
						if i > 0 && s.MsgID != prevID+1 {
							t.Fatalf("message %d: MsgID %d after %d", i, s.MsgID, prevID)
						}
						prevID = s.MsgID
						break
					}
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("message %d (%d B): data differs at %s", i, n, firstDiff(got, data))
				}
				total += n
			}
			if tail := ring.Tail(); tail < 10*size || ring.Head() != tail {
				t.Fatalf("ring tail %d head %d: the stream did not wrap the ring many times", tail, ring.Head())
			}
			if uint64(wraps) < ring.Tail()/size-1 {
				t.Errorf("placement went back to the ring's start %d times for tail %d", wraps, ring.Tail())
			}
			if n := b.Counter(uapi.CtrRingFullHolds); n != 0 {
				t.Errorf("RINGFULL_HOLDS = %d with a ring always drained", n)
			}
			if n := b.Counter(uapi.CtrRxBytes); n != uint64(total) {
				t.Errorf("RX_BYTES = %d, want %d", n, total)
			}
			noStatus(t, b)
		})
	}
}

// TestIPushRingWrapPipelined posts every message up front into a small ring
// the receiver drains as statuses come: the device holds when the ring is
// full (RING_FULL) and resumes as the head moves; nothing is lost.
func TestIPushRingWrapPipelined(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 512, 2)
	a, b := ds[0], ds[1]
	const base, size = 1 << 20, 4096
	ring, err := b.SetRing(0, base, size, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	const msgs = 200
	var want [][]byte
	for i := 0; i < msgs; i++ {
		n := 8 + (i*131)%1500
		data := pattern(n, byte(i*3))
		local := uint64(i) * 2048
		a.CopyIn(local, data)
		want = append(want, data)
		post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagPktStatus, DstNode: 2, DstProc: uapi.GPID(2, 0),
			SrcProc: a.GPID(), Length: uint32(n), LocalAddr: local, Imm: uint64(i)})
	}
	ra := driver.NewReassembler()
	next, ringFull := 0, 0
	for next < msgs {
		s := wait(t, b)
		if s.Type == uapi.StRingFull {
			ringFull++
			continue
		}
		if s.Type != uapi.StIPUSHPkt {
			t.Fatalf("status %v", s)
		}
		checkInRing(t, ring, base, size, &s)
		m, ok := ra.Add(&s, ring.Data(&s))
		if err := ring.ReleaseTo(s.End); err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		if m.Imm != uint64(next) {
			t.Fatalf("message imm %d arrived, want %d", m.Imm, next)
		}
		if !bytes.Equal(m.Data, want[next]) {
			t.Fatalf("message %d differs at %s", next, firstDiff(m.Data, want[next]))
		}
		next++
	}
	if n := b.Counter(uapi.CtrRingFullHolds); n != uint64(ringFull) {
		t.Errorf("RINGFULL_HOLDS = %d but %d RING_FULL statuses", n, ringFull)
	}
	noStatus(t, b)
}

// TestIPushPerMessageOverHalfRing: a per-message IPUSH message that fits the
// ring but not in the space before the ring's end, nor at its base (it is
// larger than the space before its start position), cannot stay
// contiguous: it wraps, its status says WRAPPED with the bytes before the
// wrap in OFFSET, and Ring.Copy returns it whole. It must never hold the
// link forever once the driver has released the ring.
func TestIPushPerMessageOverHalfRing(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 512, 2)
	a, b := ds[0], ds[1]
	const base, size = 1 << 20, 3000
	ring, err := b.SetRing(0, base, size, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{1592, 1986, 1000} { // the second starts at ring offset 1592: pad 1408 + 1992 > 3000
		data := pattern(n, byte(i))
		a.CopyIn(0, data)
		post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 2, DstProc: uapi.GPID(2, 0), SrcProc: a.GPID(), Length: uint32(n)})
		s := waitType(t, b, uapi.StIPUSHMsg)
		wrapped := s.Flags&uapi.StFlagWrapped != 0
		if wrapped != (i == 1) {
			t.Fatalf("message %d: WRAPPED=%v (status %v)", i, wrapped, s)
		}
		got := make([]byte, n)
		if c := ring.Copy(got, &s); c != n || !bytes.Equal(got, data) {
			t.Fatalf("message %d: copied %d, differs at %s", i, c, firstDiff(got, data))
		}
		if wrapped && (ring.Data(&s) != nil || s.Offset == 0 || s.Offset >= uint32(n)) {
			t.Fatalf("wrapped status %v: Data must be nil and OFFSET inside the message", s)
		}
		if err := ring.ReleaseTo(s.End); err != nil {
			t.Fatal(err)
		}
	}
}

// A per-message IPUSH larger than the whole ring can never be placed: it is
// refused with TOO_BIG at the sender instead of holding the link.
func TestIPushPerMessageLargerThanRing(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 512, 2)
	a, b := ds[0], ds[1]
	if _, err := b.SetRing(0, 1<<20, 3000, false); err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	idx := post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 2, DstProc: uapi.GPID(2, 0), SrcProc: a.GPID(), Length: 4000, Cookie: 5})
	s := wait(t, a)
	if s.Type != uapi.StError || s.Err != uapi.ETooBig || s.CmdIndex() != idx || s.Cookie != 5 {
		t.Fatalf("sender status %v, want ERROR TOO_BIG for command %d", s, idx)
	}
	// per-packet statuses have no such limit: the driver consumes as it goes
	goodPush(t, a, b, 2<<20, 9)
}
