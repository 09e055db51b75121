package tests

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// A command to a node nobody on the link has completes with BAD_NODE (it
// was lost without a status once), and a FENCE after it still completes.
func TestUnknownDestinationNode(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	for _, op := range []uapi.Opcode{uapi.OpPUSH, uapi.OpIPUSH, uapi.OpPULL} {
		idx := post(t, a, &uapi.Desc{Opcode: op, DstNode: 9, SrcProc: a.GPID(), Length: 64, Cookie: 0x99})
		expectError(t, a, op, idx, 0x99, uapi.EBadNode)
	}
	fence := post(t, a, &uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal, Cookie: 7})
	expectDone(t, a, uapi.OpFENCE, fence, 7)
	goodPush(t, a, b, 1<<20, 3)
}

// Hold mode on a device-head ring: the READ_DONE that frees the ring is
// queued behind a FENCE waiting for a PUSH that waits behind the held
// frame. READ_DONE runs ahead, the stall ends, everything completes.
func TestHoldReleasedByReadDoneBehindFence(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 1024, 2)
	a, b := ds[0], ds[1]
	ring, err := b.SetRing(0, 1<<20, 4096, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	msgs := [][]byte{pattern(3000, 1), pattern(3000, 2)}
	for i, m := range msgs {
		a.CopyIn(uint64(i)*4096, m)
		post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 2, DstProc: b.GPID(), SrcProc: a.GPID(), LocalAddr: uint64(i) * 4096, Length: uint32(len(m))})
	}
	first := waitType(t, b, uapi.StIPUSHMsg)
	if got := ring.Data(&first); !bytes.Equal(got, msgs[0]) {
		t.Fatal("first message differs")
	}
	waitType(t, b, uapi.StRingFull) // the second is held
	// b now posts a PUSH to a, whose ACK cannot reach b while b's link is
	// held, a FENCE that waits for that ACK, and the READ_DONE that frees the
	// ring, in that order.
	b.CopyIn(2<<20, pattern(64, 9))
	post(t, b, &uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 1, SrcProc: b.GPID(), LocalAddr: 2 << 20, RemoteAddr: 3 << 20, Length: 64})
	fence := post(t, b, &uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal, Cookie: 5})
	if err := ring.ReleaseTo(first.End); err != nil {
		t.Fatal(err)
	}
	// The hold is per peer, so the PUSH's ACK and the FENCE can complete
	// before the held message is placed: take the two in either order.
	var second *uapi.Status
	fenced := false
	for !fenced || second == nil {
		s := wait(t, b)
		switch {
		case s.Type == uapi.StIPUSHMsg && second == nil:
			second = &s
		case s.Type == uapi.StDone && s.Opcode == uapi.OpFENCE && s.CmdIndex() == fence && s.Cookie == 5:
			fenced = true
		default:
			t.Fatalf("unexpected status %v", s)
		}
	}
	got := make([]byte, len(msgs[1]))
	if n := ring.Copy(got, second); n != len(got) || !bytes.Equal(got, msgs[1]) {
		t.Fatal("second message differs")
	}
}
