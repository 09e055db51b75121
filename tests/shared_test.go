package tests

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// sharedRing starts three nodes; nodes 2 and 3 both send to ring 0 on node
// 1 through its AMT Address Table. A small link payload and a small window
// make the two senders' packets take turns on the receiver's link.
func sharedRing(t *testing.T, base, size uint64) (rx *driver.Driver, senders []*driver.Driver, ring *driver.Ring) {
	t.Helper()
	_, ds := cluster(t, vdev.Config{Window: 4}, 256, 3)
	rx, senders = ds[0], ds[1:]
	ring, err := rx.SetRing(0, base, size, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range senders {
		if err := rx.MapSender(s.GPID(), 0); err != nil {
			t.Fatal(err)
		}
	}
	return rx, senders, ring
}

type sentMsg struct {
	node uint16
	imm  uint64
	data []byte
}

// postBoth posts perSender messages of a few KiB from each sender,
// alternating senders, and returns them keyed by (node, imm).
func postBoth(t *testing.T, senders []*driver.Driver, round, perSender int, flags uint8) map[[2]uint64]sentMsg {
	t.Helper()
	sent := map[[2]uint64]sentMsg{}
	for i := 0; i < perSender; i++ {
		for k, s := range senders {
			n := 3000 + 8*i + 1000*k + 5 // 12+ packets of 256 B, odd length
			imm := uint64(round*1000 + i)
			data := pattern(n, byte(imm)+byte(s.Node()*50))
			local := uint64(i) << 16
			s.CopyIn(local, data)
			post(t, s, &uapi.Desc{Opcode: uapi.OpIPUSH, Flags: flags, DstNode: 1, DstProc: uapi.GPID(1, 0),
				SrcProc: s.GPID(), Length: uint32(n), LocalAddr: local, Imm: imm})
			sent[[2]uint64{uint64(s.Node()), imm}] = sentMsg{s.Node(), imm, data}
		}
	}
	return sent
}

// TestSharedRingPerPacket: two senders share one ring with per-packet
// statuses; their packets interleave in the ring and the Reassembler gives
// back every message byte for byte.
func TestSharedRingPerPacket(t *testing.T) {
	const base, size = 1 << 20, 1 << 20
	rx, senders, ring := sharedRing(t, base, size)
	interleaved := false
	for round := 0; round < 5 && !interleaved; round++ {
		sent := postBoth(t, senders, round, 4, uapi.FlagPktStatus)
		ra := driver.NewReassembler()
		lastSrc, switches := uint16(0), 0
		open := map[uint16]bool{} // senders with a message partly received
		for len(sent) > 0 {
			s := waitType(t, rx, uapi.StIPUSHPkt)
			checkInRing(t, ring, base, size, &s)
			if s.SrcNode != lastSrc {
				if open[lastSrc] {
					interleaved = true // a packet of another message came while lastSrc's was open
				}
				switches++
				lastSrc = s.SrcNode
			}
			open[s.SrcNode] = s.Flags&uapi.StFlagLast == 0
			m, ok := ra.Add(&s, ring.Data(&s))
			if err := ring.ReleaseTo(s.End); err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			k := [2]uint64{uint64(m.SrcNode), m.Imm}
			want, found := sent[k]
			if !found {
				t.Fatalf("message from node %d imm %d not sent (or delivered twice)", m.SrcNode, m.Imm)
			}
			if m.SrcProc != uapi.GPID(m.SrcNode, 0) {
				t.Fatalf("message from node %d has SrcProc %d", m.SrcNode, m.SrcProc)
			}
			if !bytes.Equal(m.Data, want.data) {
				t.Fatalf("message from node %d imm %d differs at %s", m.SrcNode, m.Imm, firstDiff(m.Data, want.data))
			}
			delete(sent, k)
		}
		if ra.Pending() != 0 {
			t.Fatalf("%d messages left partial", ra.Pending())
		}
		t.Logf("round %d: source switched %d times, interleaved=%v", round, switches, interleaved)
	}
	if !interleaved {
		t.Fatal("the two senders' messages never interleaved in the ring")
	}
	noStatus(t, rx)
}

// TestSharedRingPerMessage: with per-message statuses, a message another
// sender's packets interleaved with is flagged INTERLEAVED and counted; every
// message that was not interleaved lies contiguous and intact in the ring.
func TestSharedRingPerMessage(t *testing.T) {
	const base, size = 1 << 20, 1 << 20
	rx, senders, ring := sharedRing(t, base, size)
	flagged := uint64(0)
	for round := 0; round < 5 && flagged == 0; round++ {
		ctr := rx.Counter(uapi.CtrInterleaved)
		sent := postBoth(t, senders, round, 4, 0)
		n := uint64(0)
		lastID := map[uint16]uint32{}
		for len(sent) > 0 {
			s := waitType(t, rx, uapi.StIPUSHMsg)
			k := [2]uint64{uint64(s.SrcNode), s.Imm}
			want, found := sent[k]
			if !found {
				t.Fatalf("status for node %d imm %d: not sent or reported twice (%v)", s.SrcNode, s.Imm, s)
			}
			delete(sent, k)
			if s.Length != uint32(len(want.data)) || s.AMT != 0 || s.SrcProc != uapi.GPID(s.SrcNode, 0) {
				t.Fatalf("status %v for a %d-byte message", s, len(want.data))
			}
			if id, ok := lastID[s.SrcNode]; ok && s.MsgID != id+1 {
				t.Fatalf("node %d: MsgID %d after %d", s.SrcNode, s.MsgID, id)
			}
			lastID[s.SrcNode] = s.MsgID
			if s.Addr < base || s.Addr >= base+size {
				t.Fatalf("status %v: start outside the ring", s)
			}
			if s.Flags&uapi.StFlagInterleaved != 0 {
				n++
			} else if got := ring.Data(&s); !bytes.Equal(got, want.data) {
				t.Fatalf("non-interleaved message node %d imm %d differs at %s", s.SrcNode, s.Imm, firstDiff(got, want.data))
			}
		}
		// Release everything only now: an interleaved message's packets
		// lie among the others'.
		if err := ring.ReleaseTo(ring.Tail()); err != nil {
			t.Fatal(err)
		}
		if got := rx.Counter(uapi.CtrInterleaved) - ctr; got != n {
			t.Fatalf("INTERLEAVED moved by %d, but %d statuses carry the flag", got, n)
		}
		t.Logf("round %d: %d of %d messages interleaved", round, n, 8)
		flagged += n
	}
	if flagged == 0 {
		t.Fatal("no message was ever interleaved: INTERLEAVED never moved")
	}
	noStatus(t, rx)
}
