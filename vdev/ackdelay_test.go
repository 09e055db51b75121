package vdev

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/transport"
)

// In request-reply traffic the reply carries the ACK of the request. A
// replier whose device keeps running while its driver is slow to answer
// sends the ACK alone on its next pass, so the requester's timer, armed
// for a lossy medium (probes, the 100 µs floor), is disarmed before it
// runs out: no resend after a timeout, no probe, however long the reply
// takes. The quick rounds before it send no standalone ACK at all.
func TestSlowReplierAcksAlone(t *testing.T) {
	pp := newPostPair(t, 64)
	for _, d := range []*Device{pp.a, pp.b} {
		d.tcfg.RTOFloor, d.tcfg.Lossless = 0, false // a frame medium's timers
		d.ackPolicy.HoldPasses, d.ackPolicy.HoldNs = 1, transport.AckHold
	}
	round := func(replyAfter int64, replierPasses int) {
		pp.push(pp.a, 8)
		pp.a.PollPost() // the request leaves
		pp.now += 10_000
		pp.full(pp.b) // placed; its ACK is owed
		for range replierPasses {
			pp.now += replyAfter / int64(replierPasses+1)
			pp.full(pp.b)
			pp.full(pp.a)
		}
		pp.now += replyAfter / int64(replierPasses+1)
		pp.push(pp.b, 8)
		pp.b.PollPost() // the reply, with the ACK if none went alone
		pp.now += 10_000
		pp.full(pp.a)
	}
	for range 16 {
		round(10_000, 0)
	}
	if n := counter(pp.b, uapi.CtrAcksTx); n != 0 {
		t.Fatalf("quick replies: %d standalone ACKs, want none (the replies carry them)", n)
	}
	round(5_000_000, 50) // a reply 5 ms late, the replier's device running meanwhile
	if n := counter(pp.b, uapi.CtrAcksTx); n != 1 {
		t.Fatalf("a slow reply: %d standalone ACKs, want 1", n)
	}
	for _, c := range []uapi.Counter{uapi.CtrRetransmits, uapi.CtrRetxTimeout, uapi.CtrTLPs, uapi.CtrTimeouts} {
		if n := counter(pp.a, c); n != 0 {
			t.Fatalf("requester %v = %d after a slow reply whose ACK came alone, want 0", c, n)
		}
	}
	if n := counter(pp.b, uapi.CtrDuplicates); n != 0 {
		t.Fatalf("replier saw %d duplicates, want 0", n)
	}
	if got := counter(pp.a, uapi.CtrRxPush); got != 17 {
		t.Fatalf("requester received %d replies, want 17", got)
	}
}

// TestReplyAfterProgressPassesCarriesAck: a replier's library that looks
// at its completions a few more times before it answers (Open MPI's
// progress reads its queue until it is empty) runs device passes between
// the request and the reply. On a medium where a frame costs a system
// call each way, the reply still carries the ACK (transport.AckHold):
// none goes alone. On a lossless medium a driver's passes hold it for
// passes instead (transport.AckHoldPasses), with the same outcome; the
// engine's passes, which no driver's reply follows, send it at the next
// one, as a library that makes more passes than that before it answers
// does.
func TestReplyAfterProgressPassesCarriesAck(t *testing.T) {
	for _, c := range []struct {
		lossless, engine bool
		passes           int
		want             uint64
	}{
		{false, false, 3, 0},
		{true, false, 3, 0},
		{true, false, transport.AckHoldPasses, 16},
		{true, true, 1, 16},
	} {
		pp := newPostPair(t, 64)
		for _, d := range []*Device{pp.a, pp.b} {
			d.tcfg.Lossless = c.lossless
			d.ackPolicy.HoldPasses, d.ackPolicy.HoldNs = 1, transport.AckHold
			if c.lossless {
				d.ackPolicy.HoldPasses, d.ackPolicy.HoldNs = transport.AckHoldPasses, 0
			}
		}
		pass := func() {
			if c.engine {
				pp.full(pp.b)
			} else {
				pp.b.Poll()
			}
		}
		for range 16 {
			pp.push(pp.a, 8)
			pp.a.PollPost()
			pp.now += 5_000
			pass()               // placed; its ACK is owed
			for range c.passes { // the library's passes before it answers, 1 µs apart
				pp.now += 1_000
				pass()
			}
			pp.push(pp.b, 8)
			pp.b.PollPost() // the reply
			pp.now += 5_000
			pp.full(pp.a)
		}
		if got := counter(pp.b, uapi.CtrAcksTx); got != c.want {
			t.Errorf("lossless %v, engine passes %v: %d standalone ACKs for 16 requests answered after %d passes, want %d", c.lossless, c.engine, got, c.passes, c.want)
		}
		if n := counter(pp.a, uapi.CtrRxPush); n != 16 {
			t.Fatalf("requester received %d replies, want 16", n)
		}
	}
}

// TestAwaitedAckIsNotHeld: the hold is only for ACKs no sender waits on.
// A request that asks for a completion (a signalled command, as a
// library's blocking send is) gets its ACK at the replier's next pass
// even on a frame medium, so a replier whose library then stops calling
// for milliseconds (computing) leaves the sender neither waiting for its
// DONE nor probing; an unsignalled one (an inject) is held for a reply.
func TestAwaitedAckIsNotHeld(t *testing.T) {
	for _, signalled := range []bool{true, false} {
		pp := newPostPair(t, 64)
		for _, d := range []*Device{pp.a, pp.b} {
			d.tcfg.RTOFloor, d.tcfg.Lossless = 0, false // a frame medium's timers
			d.ackPolicy.HoldPasses, d.ackPolicy.HoldNs = 1, transport.AckHold
		}
		var flags uint8
		if signalled {
			flags = uapi.FlagSignal
		}
		post(pp.a, 0, uapi.Desc{Opcode: uapi.OpPUSH, Flags: flags, DstNode: 2, SrcProc: uapi.GPID(1, 0), Length: 8, Cookie: 7})
		pp.a.PollPost()
		pp.now += 5_000
		pp.full(pp.b) // placed; its ACK is owed
		for range 2 { // the library's last looks, 1 µs apart, then it computes
			pp.now += 1_000
			pp.full(pp.b)
		}
		acks := counter(pp.b, uapi.CtrAcksTx)
		if signalled && acks != 1 {
			t.Fatalf("signalled: the replier sent %d standalone ACKs in its passes after the request, want 1", acks)
		}
		if !signalled && acks != 0 {
			t.Fatalf("unsignalled: the replier sent %d standalone ACKs within the hold, want 0 (held for a reply)", acks)
		}
		if !signalled {
			continue
		}
		for range 30 { // 3 ms of the sender's passes; the replier makes none
			pp.now += 100_000
			pp.full(pp.a)
		}
		for _, c := range []uapi.Counter{uapi.CtrTLPs, uapi.CtrRetransmits, uapi.CtrRetxTimeout} {
			if n := counter(pp.a, c); n != 0 {
				t.Fatalf("signalled: sender %v = %d while the replier computed, want 0", c, n)
			}
		}
		if s := pp.a.r.ReadStatus(pp.a.g.StatqOff); s.Type != uapi.StDone || s.Cookie != 7 {
			t.Fatalf("signalled: the sender's first status is %v, want the PUSH's DONE", s)
		}
	}
}
