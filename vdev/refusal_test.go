package vdev

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// A refusal reaches the sender however many of its NACKs are lost: the
// receiver holds every other ACK below the refused packet and repeats
// the refusal whenever the sender resends, until the sender confirms it
// (an ACK with flag Refused). The refused command ends exactly once, with
// the refusal's error; before, a lost refusal NACK let the next ACK
// complete a refused PUSH DONE, and left a refused PULL waiting for ever.

// dropFrames takes off wire[dir] every frame drop names and reports how
// many it took: a link that loses exactly the frames a test says.
func dropFrames(r *pfRig, dir int, drop func(h *wire.Header) bool) int {
	n := 0
	q := r.wire[dir][:0]
	for _, f := range r.wire[dir] {
		if h, _, err := r.parser.Parse(f); err == nil && drop(h) {
			r.tracef("link %d->: drop %s seq %d code %#x flags %v", dir+1, h.Type, h.Seq, h.Code, h.Flags)
			n++
			continue
		}
		q = append(q, f)
	}
	r.wire[dir] = q
	return n
}

func isRefusal(h *wire.Header) bool {
	return h.Type == wire.TypeNack && h.Code != wire.NackRetry && h.Code <= wire.NackRefusalMax
}

func isConfirmation(h *wire.Header) bool {
	return h.Type == wire.TypeAck && h.Flags&wire.FlagRefused != 0
}

// playDropping plays script on a fresh pair (window 8, hold mode, 128-byte
// packets, 64 frames a way) and, after each operation, takes the frames
// drop names off both directions; then the pair settles on a clean link
// and is checked (pairScript's checks). It reports how many it dropped.
func playDropping(t *testing.T, ops []pfScript, drop func(dir int, h *wire.Header) bool) (*pfRig, int) {
	t.Helper()
	r := newPfRig(t, pfDecodeConfig(0x46, 0x26))
	n := 0
	for _, op := range ops {
		r.run(op)
		for dir := range 2 {
			n += dropFrames(r, dir, func(h *wire.Header) bool { return drop(dir, h) })
		}
	}
	r.quiesce()
	r.final()
	return r, n
}

// steps is node 1 and node 2 taking turns, with the clock jumping past
// the retransmission timeout between rounds: enough for several resends.
func steps(rounds int) []pfScript {
	var ops []pfScript
	for range rounds {
		ops = append(ops, pfScript{}.step(0, 6), pfScript{}.step(1, 2), pfScript{}.step(0, 2), pfScript{}.advance(3))
	}
	return ops
}

// first returns a drop rule that takes the first k frames of direction
// dir that match.
func first(k int, dir int, match func(h *wire.Header) bool) func(int, *wire.Header) bool {
	return func(d int, h *wire.Header) bool {
		if d != dir || !match(h) || k == 0 {
			return false
		}
		k--
		return true
	}
}

func checkRefused(t *testing.T, r *pfRig, c *pfCmd, want uapi.Errno) {
	t.Helper()
	if c.stats != 1 || c.err != want {
		t.Fatalf("node %d #%d (%s) ended %v after %d statuses, want %v once", c.node+1, c.idx, c.desc.Opcode, c.err, c.stats, want)
	}
	if c.refused != want {
		t.Fatalf("node %d #%d: the receiver refused it with %v, want %v", c.node+1, c.idx, c.refused, want)
	}
}

func TestRefusalOfPushSurvivesLostNacks(t *testing.T) {
	// A 3-packet PUSH outside node 2's window, then one inside it.
	ops := append([]pfScript{pfScript{}.pushOutside(0, 5), pfScript{}.push(0, 0, 1, 1)}, steps(3)...)
	r, n := playDropping(t, ops, first(2, 1, isRefusal))
	if n != 2 {
		t.Fatalf("dropped %d refusal NACKs, want the first and a repeat", n)
	}
	checkRefused(t, r, r.cmds[0][0], uapi.ERemoteAddr)
	if c := r.cmds[0][1]; c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
		t.Fatalf("the PUSH behind it ended %v after %d statuses, reported %d times", c.err, c.stats, c.rxMsgs)
	}
	if got := r.dev[1].r.Counter(uapi.CtrRxDiscarded); got != 2 {
		t.Fatalf("node 2 discarded %d packets of the refused PUSH, want its 2 after the first", got)
	}
	if p := r.dev[1].peers[1]; len(p.refusals) != 0 {
		t.Fatalf("node 2 still holds refusals %v after node 1 confirmed", p.refusals)
	}
}

func TestRefusalOfPullSurvivesLostNacks(t *testing.T) {
	// A PULL from outside node 2's window (its PULL area), then a good one.
	ops := append([]pfScript{append(pfScript{}, 0, 8, 6, 0xc1), pfScript{}.pull(0, 6, 2, 1)}, steps(3)...)
	r, n := playDropping(t, ops, first(2, 1, isRefusal))
	if n != 2 {
		t.Fatalf("dropped %d refusal NACKs, want the first and a repeat", n)
	}
	checkRefused(t, r, r.cmds[0][0], uapi.ERemoteAddr)
	if c := r.cmds[0][1]; c.stats != 1 || c.err != uapi.EOK {
		t.Fatalf("the PULL behind it ended %v after %d statuses", c.err, c.stats)
	}
}

// The refusal arrives but its confirmation is lost: node 2 goes on
// holding its ACK below the refused packet, so node 1's next PUSH is
// acknowledged only through a repeated refusal, which node 1 takes for
// what it is (the command it refused has ended) and confirms again.
func TestRefusalConfirmationLost(t *testing.T) {
	ops := []pfScript{pfScript{}.pushOutside(0, 0), pfScript{}.step(0, 1), pfScript{}.step(1, 1), pfScript{}.step(0, 1)}
	ops = append(ops, pfScript{}.push(0, 4, 1, 1))
	ops = append(ops, steps(3)...)
	r, n := playDropping(t, ops, first(1, 0, isConfirmation))
	if n != 1 {
		t.Fatalf("dropped %d confirmations, want 1", n)
	}
	checkRefused(t, r, r.cmds[0][0], uapi.ERemoteAddr)
	if c := r.cmds[0][1]; c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
		t.Fatalf("the PUSH after the refusal ended %v after %d statuses, reported %d times", c.err, c.stats, c.rxMsgs)
	}
	if got := r.dev[0].r.Counter(uapi.CtrNACKsRx); got < 2 {
		t.Fatalf("node 1 received %d NACKs, want the refusal and its repeats", got)
	}
	if p := r.dev[1].peers[1]; len(p.refusals) != 0 {
		t.Fatalf("node 2 still holds refusals %v at rest", p.refusals)
	}
}

// Many refusals in one session, every first NACK lost: each command ends
// once with its own error, and good commands between them complete.
func TestRefusalsInterleavedWithData(t *testing.T) {
	var ops []pfScript
	for i := range 4 {
		ops = append(ops, pfScript{}.pushOutside(0, 1), pfScript{}.push(0, 3, byte(i), byte(i)))
	}
	ops = append(ops, steps(4)...)
	r, n := playDropping(t, ops, first(4, 1, isRefusal))
	if n != 4 {
		t.Fatalf("dropped %d refusal NACKs, want 4", n)
	}
	for i := range 4 {
		checkRefused(t, r, r.cmds[0][2*i], uapi.ERemoteAddr)
		if c := r.cmds[0][2*i+1]; c.stats != 1 || c.err != uapi.EOK || c.rxMsgs != 1 {
			t.Fatalf("PUSH #%d ended %v after %d statuses, reported %d times", c.idx, c.err, c.stats, c.rxMsgs)
		}
	}
}
