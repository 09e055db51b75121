package vdev

// Piggybacked ACKs of unsignalled PUSHes on a lossless medium apply at
// the next pass (deferAck), off the path of the frame that carried them.

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
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

// A refused unsignalled PUSH posts an ERROR when its last packets are
// acknowledged: that ACK is not kept, so the ERROR still comes before
// the status of the reply that carried it.
func TestRefusedPushErrorPrecedesReply(t *testing.T) {
	r := newAckRig(t, 64)
	desc := uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, Length: 3000, RemoteAddr: 1 << 40} // outside b's window
	r.a.r.WriteDesc(r.a.g.CmdqOff, &desc, 0)
	r.cmds[r.a]++
	r.step(r.a) // 3 packets leave
	if got := r.a.peers[2].tx.Unacked(); got != 3 {
		t.Fatalf("a has %d packets in flight, want 3", got)
	}
	r.step(r.b) // packet 1 refused (NACK), 2 and 3 discarded, ACK owed
	r.step(r.a) // refusal recorded, confirmation sent
	if p := r.a.peers[2]; p.q[0].err == uapi.EOK || p.tx.Unacked() != 2 {
		t.Fatalf("refusal not recorded: err %v, %d unacknowledged", p.q[0].err, p.tx.Unacked())
	}
	r.pushPlain(r.b, 8)
	r.step(r.b)         // takes the confirmation; the reply carries ACK 3
	driverPassHeld(r.a) // ends at the reply's status
	r.step(r.a)
	st := statuses(r.a, 0)
	if len(st) != 2 || st[0].Type != uapi.StError || st[1].Type != uapi.StPUSH {
		t.Fatalf("a's statuses %v: want the refused PUSH's ERROR, then the reply's PUSH", st)
	}
}

// latePort hides the frames waiting at its port from one Recv, so the
// next receive of the pass (peersDown's) takes them.
type latePort struct {
	link.Port
	hide bool
}

func (p *latePort) Recv() []byte {
	if p.hide {
		p.hide = false
		return nil
	}
	return p.Port.Recv()
}

func (p *latePort) Lossless() bool { return true }

// An ACK that the receive in peersDown takes is applied before the
// pass's retransmission timers look: the packet it acknowledges is not
// resent.
func TestAckTakenByPeersDownSettlesBeforeTimers(t *testing.T) {
	pp := newPostPair(t, 64)
	lp := &latePort{Port: pp.a.port}
	pp.a.AttachPort(lp)
	pp.push(pp.a, 8)
	pp.full(pp.a) // the ping leaves (untimed)
	pp.full(pp.b) // placed; the ACK held for the reply
	pp.full(pp.a) // stamps the timer
	pp.now += 5_000_000_000
	for range 4 {
		pp.full(pp.a) // due; its grace passes
	}
	if got := counter(pp.a, uapi.CtrTimeouts); got != 0 {
		t.Fatalf("%d timeouts before the grace passed", got)
	}
	pp.push(pp.b, 8)
	pp.full(pp.b)                           // the pong carries the ACK
	lp.hide = true                          // the pass's first receive misses it...
	pp.a.gone.add([6]byte(wire.NodeMAC(9))) // ...and peersDown's receive takes it
	pp.full(pp.a)
	if got := counter(pp.a, uapi.CtrRetransmits); got != 0 {
		t.Fatalf("a resent %d packets (%d timeouts) in the pass whose peersDown receive took their ACK", got, counter(pp.a, uapi.CtrTimeouts))
	}
}
