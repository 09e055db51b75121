package vdev

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// A new sending session numbers its packets from 1 again, so a late ACK
// or NACK of the session it replaced names numbers that are valid again:
// without the session's epoch in the frame, node 2's late ACK of node 1's
// first session retired packet 1 of the second, and the PUSH it carried
// completed DONE though node 2 never received it.

// playEndedSession ends node 1's first session to node 2 with a frame of
// node 2 about it held back (delay picks which of node 2's frames; the
// others of that pass are lost), then starts a second session whose first frame is lost,
// lets the held frame arrive, and lets the pair settle: every command of
// the second session must end as the receiver saw it.
func playEndedSession(t *testing.T, first pfScript, delay func(h *wire.Header) bool) *pfRig {
	t.Helper()
	r := newPfRig(t, pfDecodeConfig(0x41, 0x26)) // window 4, UNREACHABLE after 2 timeouts
	held := 0
	hold := func() {
		for _, f := range r.wire[1] {
			if h, _, err := r.parser.Parse(f); err == nil && held == 0 && delay(h) {
				r.tracef("link 2->: hold back %s seq %d ack %d code %#x flags %v", h.Type, h.Seq, h.Ack, h.Code, h.Flags)
				r.limbo[1] = append(r.limbo[1], f)
				held++
			} else {
				r.tracef("link 2->: drop")
			}
		}
		r.wire[1] = nil
	}
	r.run(first.step(0, 1).step(1, 1)) // node 2 answers the first session
	hold()
	if held != 1 {
		t.Fatalf("node 2 sent no frame to hold back")
	}
	// Node 2's answers to the resends are lost: node 1 gives up.
	var ended pfScript
	for _, adv := range []byte{4, 5, 6, 7} {
		ended = ended.advance(adv).step(0, 6).step(1, 1).fault(1, pfDrop, 0).fault(1, pfDrop, 0)
	}
	r.run(ended)
	r.wire[1] = nil
	p := r.dev[0].peers[2]
	if p.tx.Acked() != 0 || p.tx.Next() != 1 {
		t.Fatalf("node 1's session did not end: acked %d next %d", p.tx.Acked(), p.tx.Next())
	}
	before := len(r.cmds[0])
	// The second session: its first frame is lost; the held frame arrives.
	r.run(pfScript{}.push(0, 0, 2, 2).step(0, 1).fault(0, pfDrop, 0).fault(1, pfRelease, 0).step(0, 1))
	r.quiesce()
	r.final()
	for _, c := range r.cmds[0][before:] {
		if c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
			t.Fatalf("second session's PUSH #%d ended %v after %d statuses, node 2 reported it %d times", c.idx, c.err, c.stats, c.rxMsgs)
		}
	}
	return r
}

// A late ACK of the ended session retires nothing of the new one: the
// fuzzer's seed, and the same with every other frame node 2 sent lost.
func TestSessionEpochLateAck(t *testing.T) {
	r := pairScript(t, pfLateAckScript())
	if c := r.cmds[0][1]; c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
		t.Fatalf("the new session's PUSH ended %v after %d statuses, node 2 reported it %d times", c.err, c.stats, c.rxMsgs)
	}
	if n := r.dev[0].r.Counter(uapi.CtrDuplicates); n != 1 {
		t.Fatalf("node 1 counted %d duplicates, want 1 (the late ACK)", n)
	}
	playEndedSession(t, pfScript{}.push(0, 0, 0, 0), func(h *wire.Header) bool {
		return h.Type == wire.TypeAck && h.Flags&wire.FlagAckValid != 0 && h.Ack == 1
	})
}

// A late ACK piggybacked on a data frame (node 2's PULL response) of
// the ended session retires nothing of the new one.
func TestSessionEpochLatePiggybackedAck(t *testing.T) {
	playEndedSession(t, pfScript{}.pull(0, 0, 0, 0), func(h *wire.Header) bool {
		return h.Type == wire.TypePullResp && h.Flags&wire.FlagAckValid != 0 && h.Ack == 1
	})
}

// A late refusal of the ended session's packet 1 neither fails the new
// session's packet 1 nor, by its ACK field, completes it.
func TestSessionEpochLateRefusal(t *testing.T) {
	playEndedSession(t, pfScript{}.pushOutside(0, 0), isRefusal)
}

// A NACK still owed (the link had no room) when the peer starts a new
// session names the old session's numbers: it is dropped, not sent under
// the new session's epoch, where it refused the new packet 1 that node 2
// had placed.
func TestSessionEpochOwedNackDropped(t *testing.T) {
	r := newPfRig(t, pfDecodeConfig(0x41, 0x26)) // window 4, UNREACHABLE after 2 timeouts
	full := func(s pfScript) {                   // node 2 steps with no room on its link
		r.depth = 0
		r.run(s)
		r.depth = 64
	}
	r.run(pfScript{}.pushOutside(0, 0).step(0, 1))
	full(pfScript{}.step(1, 1)) // refused; the NACK is owed
	if p := r.dev[1].peers[1]; len(p.owedCtl) != 1 {
		t.Fatalf("node 2 owes %d control frames, want the refusal", len(p.owedCtl))
	}
	for _, adv := range []byte{4, 5, 6, 7} { // no answer: UNREACHABLE
		r.run(pfScript{}.advance(adv).step(0, 6).fault(0, pfDrop, 0))
	}
	if c := r.cmds[0][0]; c.err != uapi.EUnreachable {
		t.Fatalf("the first session's PUSH ended %v, want UNREACHABLE", c.err)
	}
	r.run(pfScript{}.push(0, 0, 1, 1).step(0, 1)) // the new session's packet 1
	full(pfScript{}.step(1, 1))                   // placed; the old refusal still owed
	r.quiesce()
	r.final()
	if c := r.cmds[0][1]; c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
		t.Fatalf("the new session's PUSH ended %v after %d statuses, node 2 reported it %d times", c.err, c.stats, c.rxMsgs)
	}
}
