package vdev

// Piggybacked ACKs of unsignalled PUSHes on a lossless medium apply at
// the next pass (deferAck), off the path of the frame that carried them.

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
)

// pushPlain posts an unsignalled PUSH of n bytes from d to the other device.
func (r *ackRig) pushPlain(d *Device, n uint32) {
	dst := uint16(3) - d.node
	idx := r.cmds[d]
	r.cmds[d]++
	desc := uapi.Desc{Opcode: uapi.OpPUSH, DstNode: dst, Length: n, RemoteAddr: 64 << 10}
	d.r.WriteDesc(d.g.CmdqOff+(idx&(d.g.CmdqEntries-1))*uapi.DescSize, &desc, idx)
}

// driverPassHeld runs a pass as a waiting driver's (Poll between
// timer looks), which ends at the status it writes (cutShort).
func driverPassHeld(d *Device) {
	if !d.running.acquire() {
		panic("driverPassHeld: another pass holds the device")
	}
	defer d.running.release()
	now := int64(skipTimers)
	d.driverStep = true
	d.step(&now)
	d.driverStep = false
}

func TestUnsignalledAckAppliesNextPass(t *testing.T) {
	r := newAckRig(t, 64)
	for i := range 3 {
		r.pushPlain(r.a, 8) // ping i
		r.step(r.a)
		r.step(r.b) // placed; the ACK waits for the reply
		r.pushPlain(r.b, 8)
		r.step(r.b)         // the pong carries the ACK of ping i
		driverPassHeld(r.a) // placed; the ACK of ping i is kept for a's next pass
		if got := r.a.inflight; got != 1 {
			t.Fatalf("round %d: a has %d commands in flight after the pass that placed the pong, want 1 (its ping, acknowledged next pass)", i, got)
		}
		if p := r.a.peers[2]; !p.lazy || p.tx.Unacked() != 1 {
			t.Fatalf("round %d: a's peer lazy %v with %d packets unacknowledged, want a kept ACK over 1", i, p.lazy, p.tx.Unacked())
		}
		if tail := r.a.r.Load64(uapi.RegStatqTail); tail != uint64(i+1) {
			t.Fatalf("round %d: a's status tail %d, want %d (the pong's arrival)", i, tail, i+1)
		}
		r.step(r.a) // applies it
		if got, p := r.a.inflight, r.a.peers[2]; got != 0 || p.lazy || p.tx.Unacked() != 0 {
			t.Fatalf("round %d: after a's next pass: %d in flight, lazy %v, %d unacknowledged; want all retired", i, got, p.lazy, p.tx.Unacked())
		}
	}
	if a := r.a.r.Counter(uapi.CtrRetransmits) + r.b.r.Counter(uapi.CtrRetransmits); a != 0 {
		t.Fatalf("%d retransmissions on a lossless hub", a)
	}
}

// A send-only pass (a driver's post) applies a kept ACK after the
// commands it took left, and a failed peer's kept ACK completes its
// command as delivered rather than failed.
func TestKeptAckSettlesOnPostAndFailure(t *testing.T) {
	r := newAckRig(t, 64)
	r.pushPlain(r.a, 8)
	r.step(r.a)
	r.step(r.b)
	r.pushPlain(r.b, 8)
	r.step(r.b)
	driverPassHeld(r.a)
	if !r.a.peers[2].lazy {
		t.Fatal("a kept no ACK from the pong")
	}
	r.pushPlain(r.a, 8) // the next ping, by a send-only pass
	if !r.a.running.acquire() {
		t.Fatal("a pass holds a")
	}
	r.a.sendStep()
	if p := r.a.peers[2]; p.lazy || p.tx.Unacked() != 1 || r.a.inflight != 1 {
		t.Fatalf("after the send-only pass: lazy %v, %d unacknowledged, %d in flight; want the first ping retired and the second in flight", p.lazy, p.tx.Unacked(), r.a.inflight)
	}
	r.a.running.release()

	// b answers the second ping; its ACK is kept by a; then b is gone.
	driverPassHeld(r.a) // a waits: nothing came yet
	r.step(r.b)
	r.pushPlain(r.b, 8)
	r.step(r.b)
	driverPassHeld(r.a)
	p := r.a.peers[2]
	if !p.lazy {
		t.Fatal("a kept no ACK from the second pong")
	}
	errs := r.a.r.Counter(uapi.CtrCmdErrors)
	if !r.a.running.acquire() {
		t.Fatal("a pass holds a")
	}
	r.a.failPeer(p, uapi.EUnreachable)
	r.a.running.release()
	if got := r.a.r.Counter(uapi.CtrCmdErrors); got != errs {
		t.Fatalf("failing the peer failed %d commands it had acknowledged", got-errs)
	}
	if r.a.inflight != 0 {
		t.Fatalf("%d commands in flight after the peer failed", r.a.inflight)
	}
}
