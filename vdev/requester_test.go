package vdev

// The requester: commands taken past a blocked head, and retransmission
// timers that wait for a packet still queued or answered.

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/transport"
)

// Two nodes paging towards each other, each with its command queue
// blocked (node 1 by a FENCE behind data node 2 holds, node 2 by
// MAX_INFLIGHT with its paging requests node 1 holds): each PAGE_DONE is
// posted behind the blocked command and runs ahead of it (docs/lmmc.md).
// Run in turn, such PAGE_DONEs deadlocked the pair (fuzz corpus
// 7fc6332d7c99b76e).
func TestPageDoneRunsAheadOfBlockedCommands(t *testing.T) {
	s := pfBegin(0x0b, 0x26)                               // window 16, hold mode, MAX_INFLIGHT 2
	s = s.page(1, 0).page(1, 1).page(1, 2)                 // node 2: a third request waits for flight room
	s = s.page(0, 0).push(0, 0, 0, 0).fence(0)             // node 1: its data behind its request, then a FENCE
	s = s.push(0, 0, 1, 1)                                 // and a command behind the FENCE
	s = s.both(4).consume(0).consume(1).both(8)            // each driver answers the request it got
	s = s.consume(0).consume(1).both(8).consume(0).both(8) // and the next ones
	r := pairScript(t, s)
	for n := range 2 {
		d := r.dev[n]
		dones := 0
		for _, c := range r.cmds[n] {
			if c.stats != 1 || c.err != uapi.EOK {
				t.Fatalf("node %d #%d (%s) ended %v after %d statuses", n+1, c.idx, c.desc.Opcode, c.err, c.stats)
			}
			if c.desc.Opcode == uapi.OpPAGEDONE {
				dones++
			}
		}
		if n == 0 && dones != 3 || n == 1 && dones != 1 {
			t.Fatalf("node %d posted %d PAGE_DONEs", n+1, dones)
		}
		// Each command was taken once: a slot run ahead is skipped, not run
		// again, when the head gets there.
		if got, want := d.r.Counter(uapi.CtrCmds), uint64(len(r.cmds[n])); got != want {
			t.Fatalf("node %d counted %d commands taken, %d posted", n+1, got, want)
		}
		if got := d.r.Load64(uapi.RegCmdqHead); got != uint64(len(r.cmds[n])) || len(d.cmdAhead.taken) != 0 {
			t.Fatalf("node %d CMDQ_HEAD %d of %d, %d slots still marked run ahead", n+1, got, len(r.cmds[n]), len(d.cmdAhead.taken))
		}
	}
	// Node 1's PAGE_DONE for node 2's first request completed before the
	// FENCE it was posted behind.
	var fence, pageDone *pfCmd
	for _, c := range r.cmds[0] {
		switch {
		case c.desc.Opcode == uapi.OpFENCE:
			fence = c
		case c.desc.Opcode == uapi.OpPAGEDONE && pageDone == nil:
			pageDone = c
		}
	}
	if pageDone.idx < fence.idx || pageDone.statAt > fence.statAt {
		t.Fatalf("PAGE_DONE #%d (status %d) did not run ahead of FENCE #%d (status %d)", pageDone.idx, pageDone.statAt, fence.idx, fence.statAt)
	}
}

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
	counts := func() (uint64, uint64, uint64) {
		return a.r.Counter(uapi.CtrTimeouts), a.r.Counter(uapi.CtrRetransmits), a.r.Counter(uapi.CtrTLPs)
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
	if to, re, _ := counts(); to != 0 || re != 0 {
		t.Fatalf("while queued: %d timeouts, %d retransmits; want none", to, re)
	}
	qp.queued.Store(0)
	qp.lastSent.Store(monotime.Now()) // it left, and is never ACKed: lost
	time.Sleep(2 * time.Millisecond)
	passes()
	// The tail-loss probe, counted from when the packet left, goes first:
	// not a timeout.
	if to, re, tlp := counts(); to != 0 || re != 1 || tlp != 1 {
		t.Fatalf("after it left: %d timeouts, %d retransmits, %d probes; want 0, 1 and 1", to, re, tlp)
	}
	qp.lastSent.Store(monotime.Now()) // the probe left
	time.Sleep(2 * time.Millisecond)
	passes()
	if to, re, _ := counts(); to != 1 || re != 2 {
		t.Fatalf("after the probe: %d timeouts, %d retransmits; want 1 and 2", to, re)
	}
	// The resend left late (dated a second ahead, so no scheduling delay
	// here makes it look old): its timeout counts from then.
	qp.lastSent.Store(monotime.Now() + int64(time.Second))
	time.Sleep(5 * time.Millisecond) // beyond the doubled timeout
	passes()
	if to, re, _ := counts(); to != 1 || re != 2 {
		t.Fatalf("resend just left: %d timeouts, %d retransmits; want still 1 and 2", to, re)
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
	r.step(r.a) // its timer starts (a lossless medium's runs from the first look after it: transport.Tx.Stamp)
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
