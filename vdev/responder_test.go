package vdev

// The responder: when its ACKs leave (on the reply, at a burst's end).

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// ackRig is two devices on a hub with no engine: the test runs their
// passes one at a time, so when each frame leaves is deterministic.
type ackRig struct {
	a, b *Device
	pa   link.Port // a's port: frames queued for a wait here
	cmds map[*Device]uint64
}

// hubPair builds nodes 1 and 2 (1 MiB regions, cfg otherwise) on a hub of
// 1 KiB packets queueing depth frames per port, without an engine; port,
// if not nil, wraps the hub port a node is attached by.
func hubPair(t *testing.T, depth int, cfg Config, port func(n uint16, p link.Port) link.Port) (a, b *Device, pa link.Port) {
	hub := link.NewHub(1024+wire.FrameOverhead, depth)
	var devs [2]*Device
	for i, n := range []uint16{1, 2} {
		c := cfg
		c.Node, c.RegionSize = n, 1<<20
		d, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		p, _ := hub.Attach(d.MAC())
		if n == 1 {
			pa = p
		}
		if port != nil {
			p = port(n, p)
		}
		d.AttachPort(p)
		devs[i] = d
	}
	return devs[0], devs[1], pa
}

func newAckRig(t *testing.T, window int) *ackRig {
	r := &ackRig{cmds: map[*Device]uint64{}}
	r.a, r.b, r.pa = hubPair(t, 256, Config{Window: window}, nil)
	return r
}

// push posts a signalled PUSH of n bytes from d to the other device.
func (r *ackRig) push(d *Device, n uint32, cookie uint64) {
	dst := uint16(3) - d.node
	idx := r.cmds[d]
	r.cmds[d]++
	desc := uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: dst, Length: n, RemoteAddr: 64 << 10, Cookie: cookie}
	d.r.WriteDesc(d.g.CmdqOff+(idx&(d.g.CmdqEntries-1))*uapi.DescSize, &desc, idx)
}

func (r *ackRig) step(d *Device) {
	var now int64
	stepHeld(d, &now)
}

func (r *ackRig) queuedAtA() int { return r.pa.(interface{ Queued() int }).Queued() }

// An ACK waits for the command engine's look in the next pass: a reply the
// driver posts meanwhile carries it, so a ping-pong sends two frames per
// round trip; with no reply it goes by itself at the end of that pass.
func TestAckRidesOnTheReply(t *testing.T) {
	r := newAckRig(t, 64)
	r.push(r.a, 8, 1)
	r.step(r.a) // the ping leaves a
	r.step(r.b) // b places it and owes a its ACK
	if r.b.r.Load64(uapi.RegStatqTail) != 1 {
		t.Fatal("b posted no status for the ping")
	}
	if n := r.queuedAtA(); n != 0 {
		t.Fatalf("b sent %d frames in the pass that placed the ping: the ACK should wait for a reply", n)
	}
	r.push(r.b, 8, 2) // the reply, posted before b's next pass
	r.step(r.b)
	if n := r.queuedAtA(); n != 1 {
		t.Fatalf("b sent %d frames for the reply, want 1 (the pong carrying the ACK)", n)
	}
	if acks := r.b.r.Counter(uapi.CtrAcksTx); acks != 0 {
		t.Fatalf("b sent %d standalone ACKs, want 0", acks)
	}
	r.step(r.a) // the pong completes the ping
	if s := r.a.r.ReadStatus(r.a.g.StatqOff); s.Type != uapi.StDone || s.Cookie != 1 {
		t.Fatalf("a's first status is %v, want the ping's DONE", s)
	}

	// No reply: the ACK a owes b for the pong goes alone at the end of a's
	// next pass.
	r.step(r.a)
	if acks := r.a.r.Counter(uapi.CtrAcksTx); acks != 1 {
		t.Fatalf("a sent %d standalone ACKs after a pass with no reply, want 1", acks)
	}
	r.step(r.b)
	if s := r.b.r.ReadStatus(r.b.g.StatqOff + uapi.StatusSize); s.Type != uapi.StDone || s.Cookie != 2 {
		t.Fatalf("b's second status is %v, want the pong's DONE", s)
	}
	if r.a.book.AcksOwed != 0 || r.b.book.AcksOwed != 0 {
		t.Fatalf("ACKs still owed: a %d, b %d", r.a.book.AcksOwed, r.b.book.AcksOwed)
	}
}

// A stream is acknowledged at the end of the receive burst once ackEvery
// frames arrived, so the sender's window keeps moving without waiting a pass.
func TestAckStreamAtBurstEnd(t *testing.T) {
	r := newAckRig(t, 16) // ackEvery = 2
	max := uint32(r.a.maxPayload)
	r.push(r.a, 4*max, 1)
	r.step(r.a) // all 4 packets leave in one pass (txBurst)
	r.step(r.b)
	if acks := r.b.r.Counter(uapi.CtrAcksTx); acks != 1 {
		t.Fatalf("b sent %d ACKs after a burst of 4 frames, want 1 at the burst's end", acks)
	}
	r.step(r.a)
	if s := r.a.r.ReadStatus(r.a.g.StatqOff); s.Type != uapi.StDone || s.Cookie != 1 {
		t.Fatalf("a's status is %v, want the stream's DONE", s)
	}
}
