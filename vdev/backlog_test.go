package vdev

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/transport"
)

// queuingPort is a hub port that claims a transmit queue (link.Backlogger)
// whose state the test sets: the device must not time out a packet its
// port still holds, and must time one out from when it left.
type queuingPort struct {
	link.Port
	queued   atomic.Int64
	lastSent atomic.Int64
}

func (p *queuingPort) Backlog([6]byte) (int, int64) {
	return int(p.queued.Load()), p.lastSent.Load()
}

func TestQueuedPacketIsNotTimedOut(t *testing.T) {
	var qp *queuingPort
	// Node 2 never runs: nothing is ever ACKed.
	a, _, _ := hubPair(t, 256, Config{}, func(n uint16, p link.Port) link.Port {
		if n == 1 {
			qp = &queuingPort{Port: p} // not Lossless: the 100 us timeout applies
			return qp
		}
		return p
	})
	r := &ackRig{a: a, cmds: map[*Device]uint64{}}
	counts := func() (uint64, uint64) {
		return a.r.Counter(uapi.CtrTimeouts), a.r.Counter(uapi.CtrRetransmits)
	}
	passes := func() { // enough for a passed deadline to count (transport.GracePasses)
		for range transport.GracePasses + 1 {
			r.step(a)
		}
	}
	qp.queued.Store(1)
	r.push(a, 8, 1)
	r.step(a)
	for range 5 { // many timeouts' worth while the port holds the packet
		time.Sleep(2 * time.Millisecond)
		passes()
	}
	if to, re := counts(); to != 0 || re != 0 {
		t.Fatalf("while queued: %d timeouts, %d retransmits; want none", to, re)
	}
	qp.queued.Store(0)
	qp.lastSent.Store(monotime.Now()) // it left, and is never ACKed: lost
	time.Sleep(2 * time.Millisecond)
	passes()
	if to, re := counts(); to != 1 || re != 1 {
		t.Fatalf("after it left: %d timeouts, %d retransmits; want 1 and 1", to, re)
	}
	// The resend left late (dated a second ahead, so no scheduling delay
	// here makes it look old): its timeout counts from then.
	qp.lastSent.Store(monotime.Now() + int64(time.Second))
	time.Sleep(5 * time.Millisecond) // beyond the doubled timeout
	passes()
	if to, re := counts(); to != 1 || re != 1 {
		t.Fatalf("resend just left: %d timeouts, %d retransmits; want still 1 and 1", to, re)
	}
}

// A deadline that passed while the engine was off its core is not a
// timeout yet: the answer may be one pass away (here the peer, on the same
// engine, has not even run). Only a deadline still passed transport.GracePasses passes
// later counts.
func TestTimeoutWaitsForTheAnswer(t *testing.T) {
	r := newAckRig(t, 64)
	r.push(r.a, 8, 1)
	pastRTO := func() { // the engine is "off its core" beyond the timeout
		time.Sleep(time.Duration(r.a.peerOf(2).tx.RTO()) + time.Millisecond)
	}
	r.step(r.a) // the ping leaves
	pastRTO()
	for range 3 {
		r.step(r.a) // the first pass after the gap: the deadline has passed
		r.step(r.b) // the peer receives, then ACKs a pass later
	}
	if to := r.a.r.Counter(uapi.CtrTimeouts); to != 0 {
		t.Fatalf("%d timeouts for a packet ACKed within %d passes of the gap", to, transport.GracePasses)
	}
	if got := r.a.r.Counter(uapi.CtrTxPkts); got != 1 {
		t.Fatalf("%d packets sent, want the one ping", got)
	}

	// A peer that does not answer: the timeout counts after the grace.
	r.push(r.a, 8, 2)
	r.step(r.a)
	pastRTO()
	for range transport.GracePasses + 1 {
		r.step(r.a)
	}
	if to := r.a.r.Counter(uapi.CtrTimeouts); to != 1 {
		t.Fatalf("%d timeouts for a packet never ACKed, want 1", to)
	}
}

// A peer that stopped draining a full link: every go-back is cut short by
// the link (ErrFull) at its first packet. That is backpressure, not a
// NACK, but a go-back held up for a whole timeout counts as one, so the
// command still completes with UNREACHABLE instead of retrying forever.
func TestFullLinkToDeadPeerIsUnreachable(t *testing.T) {
	// 8 frames fill node 2's queue, and node 2 has no engine: it never
	// drains it.
	a, _, _ := hubPair(t, 8, Config{MaxTimeouts: 3}, nil)
	e, err := NewEngine(a)
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	defer e.Stop()
	desc := uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, Length: 32 << 10, RemoteAddr: 64 << 10, Cookie: 7}
	a.r.WriteDesc(a.g.CmdqOff, &desc, 0)
	a.r.Store64(uapi.RegCmdqTail, 1)
	end := time.Now().Add(30 * time.Second)
	for a.r.Load64(uapi.RegStatqTail) == 0 {
		if time.Now().After(end) {
			t.Fatalf("no status after 30 s: %d timeouts, %d retransmits", a.r.Counter(uapi.CtrTimeouts), a.r.Counter(uapi.CtrRetransmits))
		}
		time.Sleep(time.Millisecond)
	}
	s := a.r.ReadStatus(a.g.StatqOff)
	if s.Type != uapi.StError || s.Err != uapi.EUnreachable || s.Cookie != 7 {
		t.Fatalf("status %v, want UNREACHABLE for cookie 7", s)
	}
	if to := a.r.Counter(uapi.CtrTimeouts); to < 3 {
		t.Fatalf("%d timeouts counted, want at least MaxTimeouts (3)", to)
	}
}
