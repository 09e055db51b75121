package vdev

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
)

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
		for i := 0; ; i++ {
			if d.r.Load64(uapi.RegStatqTail) > 0 {
				return d.r.ReadStatus(d.g.StatqOff)
			}
			if i > 50_000_000 {
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
