package tests

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// The device support for LMMC: a tagged write lands only in frames of its
// port (a mismatch is refused and counted MISPLACED), and a paging request
// holds the requester's later data until the receiver's driver says done.
func TestTaggedPushAndPagingHold(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	ps := b.PageSize()
	if err := b.SetFrameTag(10, 7); err != nil {
		t.Fatal(err)
	}
	if b.FrameTag(10) != 7 {
		t.Fatal("tag not stored")
	}
	a.CopyIn(0, pattern(512, 1))
	if _, err := a.PushTagged(2, 0, 10*ps, 512, 7, uapi.FlagSignal, 1); err != nil {
		t.Fatal(err)
	}
	if s := wait(t, a); s.Type != uapi.StDone {
		t.Fatalf("tagged push into its frame: %v", s)
	}
	if !bytes.Equal(b.LinkMem()[10*ps:10*ps+512], pattern(512, 1)) {
		t.Fatal("tagged data not placed")
	}
	idx, _ := a.PushTagged(2, 0, 11*ps, 64, 7, 0, 2) // frame 11 belongs to nobody
	expectError(t, a, uapi.OpPUSH, idx, 2, uapi.EBadTag)
	if b.Counter(uapi.CtrMisplaced) != 1 || !allBytes(b.LinkMem()[11*ps:11*ps+64], 0) {
		t.Fatalf("MISPLACED %d", b.Counter(uapi.CtrMisplaced))
	}
	// paging request, then data behind it: held until PAGE_DONE
	if _, err := a.PageRequest(2, 9, 10, 3); err != nil {
		t.Fatal(err)
	}
	a.CopyIn(4096, pattern(256, 5))
	post(t, a, &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagPktStatus, DstNode: 2, SrcProc: a.GPID(), LocalAddr: 4096, RemoteAddr: 20 * ps, Length: 256})
	s := wait(t, b)
	if s.Type != uapi.StPageReq || s.Imm != 9 || s.Addr != 10 || s.SrcNode != 1 {
		t.Fatalf("paging request status %v", s)
	}
	eventually(t, "the PUSH behind the request to be held", func() bool { return b.Counter(uapi.CtrPagingHolds) == 1 && a.Counter(uapi.CtrTxPkts) >= 4 })
	noStatus(t, b)
	if !allBytes(b.LinkMem()[20*ps:20*ps+256], 0) {
		t.Fatal("data behind a paging request was placed before PAGE_DONE")
	}
	b.SetFrameTag(10, 9) // the receiver re-tags the frame for the paged-in port
	if _, err := b.PageDone(1); err != nil {
		t.Fatal(err)
	}
	if s := waitType(t, b, uapi.StPUSH); s.Addr != 20*ps {
		t.Fatalf("after PAGE_DONE: %v", s)
	}
	if !bytes.Equal(b.LinkMem()[20*ps:20*ps+256], pattern(256, 5)) {
		t.Fatal("held data differs")
	}
	// the old port's writes into the re-tagged frame are now refused
	idx, _ = a.PushTagged(2, 0, 10*ps, 64, 7, 0, 4)
	expectError(t, a, uapi.OpPUSH, idx, 4, uapi.EBadTag)
}
