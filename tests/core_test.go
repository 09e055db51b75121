package tests

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

func TestPushMultiPacket(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	data := pattern(100_000, 3)
	a.CopyIn(0, data)
	if _, err := a.Push(2, 0, 1<<20, uint32(len(data)), uapi.FlagSignal, 77); err != nil {
		t.Fatal(err)
	}
	s := wait(t, b)
	if s.Type != uapi.StPUSH || s.Length != uint32(len(data)) || s.Addr != 1<<20 || s.SrcNode != 1 {
		t.Fatalf("receiver status %v", s)
	}
	if !bytes.Equal(b.LinkMem()[1<<20:1<<20+len(data)], data) {
		t.Fatal("data differs")
	}
	done := wait(t, a)
	if done.Type != uapi.StDone || done.Cookie != 77 || done.Opcode != uapi.OpPUSH {
		t.Fatalf("sender completion %v", done)
	}
	if got := b.Counter(uapi.CtrRxPush); got != 25 { // 100000 / 4096 rounded up
		t.Fatalf("RX_PUSH = %d, want 25", got)
	}
}
