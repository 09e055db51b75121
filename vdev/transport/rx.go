package transport

// Verdict is what a data packet's sequence number allows.
type Verdict uint8

// Verdicts of Rx.Check.
const (
	InOrder   Verdict = iota // the next expected: place it
	Duplicate                // accepted before (in order or ahead): never place twice
	Ahead                    // beyond the next expected: a gap before it
)

// Rx is the receiving half of one peer's session.
type Rx struct {
	book *Book

	epoch  uint16
	known  bool   // epoch was seen
	expect uint32 // next sequence number to accept
	gotAny bool   // something was accepted: Ack = expect-1 means something
	placed uint64 // bit i: expect+1+i was placed ahead of order
	gap    bool   // a packet beyond expect arrived and expect has not
	hi     uint32 // while gap: the highest number received

	ackDue  bool   // an ACK (a gap NACK while gap) is owed
	ackPass uint64 // the engine pass that made it due
	dueAt   int64  // when a pass first saw it due (AckWanted with a hold); 0 not yet
	awaited bool   // a packet it covers is one its sender waits on (Await): no hold
	since   int    // packets that made it due since the last one left

	left  [4]uint16 // epochs of the last sessions left, most recent first
	nLeft int
}

// NewRx makes the receiving half; the first data packet's epoch opens the
// session.
func NewRx(book *Book) *Rx { return &Rx{book: book, expect: 1} }

// Session follows the sender's epoch; it reports true when epoch starts a
// new session (the sender restarted or gave up on us): numbering starts at
// 1 again and anything placed ahead is forgotten. The caller discards what
// it kept of the old session's messages.
func (r *Rx) Session(epoch uint16) bool {
	if r.known && epoch == r.epoch {
		return false
	}
	if r.known {
		copy(r.left[1:], r.left[:])
		r.left[0], r.nLeft = r.epoch, min(r.nLeft+1, len(r.left))
	}
	r.epoch, r.known = epoch, true
	r.expect, r.gotAny, r.placed, r.gap = 1, false, 0, false
	return true
}

// Stale reports whether epoch is that of a session the sender has since
// replaced (one of the last few): a frame of it arrived late, delayed or
// duplicated on the way, and must be dropped before it reaches Session,
// which would take it for a new session, end the current one and accept
// the late packets, placing again what the current session placed. A
// sender never returns to an epoch it left (Tx.Reset counts up; a
// restarted device takes one from the clock, and in the rare case that
// is a recent one its packets are dropped until its timeouts move it on).
func (r *Rx) Stale(epoch uint16) bool {
	if !r.known || epoch == r.epoch {
		return false
	}
	for _, e := range r.left[:r.nLeft] {
		if e == epoch {
			return true
		}
	}
	return false
}

// StartAt opens session epoch expecting seq next (the counterpart of
// Tx.StartAt).
func (r *Rx) StartAt(epoch uint16, seq uint32) {
	r.Session(epoch)
	r.expect = seq
}

// Known reports whether a session was seen (a first one is no change).
func (r *Rx) Known() bool { return r.known }

// Epoch is the sender's session being received (meaningful once Known).
func (r *Rx) Epoch() uint16 { return r.epoch }

// Expect is the next sequence number to accept.
func (r *Rx) Expect() uint32 { return r.expect }

// Check classifies a data packet's sequence number.
func (r *Rx) Check(seq uint32) Verdict {
	switch d := int32(seq - r.expect); {
	case d == 0:
		return InOrder
	case d < 0:
		return Duplicate
	case d <= SackBits && r.placed&(1<<(d-1)) != 0:
		return Duplicate
	}
	return Ahead
}

// CanPlaceAhead reports whether seq (Ahead) lies within the span a
// receiver places out of order.
func (r *Rx) CanPlaceAhead(seq uint32) bool {
	d := int32(seq - r.expect)
	return d > 0 && d <= SackBits
}

// PlacedAhead records that seq (CanPlaceAhead) was placed out of order.
func (r *Rx) PlacedAhead(seq uint32) { r.placed |= 1 << (seq - r.expect - 1) }

// SawAhead records that seq arrived beyond the next expected number (placed
// or not). It reports true when this opens a gap: the sender is told at
// once (a SEQ_ERR NACK). While the gap lasts, later arrivals make one more
// NACK due, sent with the ACKs of the pass.
func (r *Rx) SawAhead(seq uint32, pass uint64) bool {
	if !r.gap || int32(seq-r.hi) > 0 {
		r.hi = seq
	}
	if !r.gap {
		r.gap = true
		return true
	}
	r.Owe(pass)
	return false
}

// Accept moves past the in-order packet just placed (or refused), and past
// every packet after it that was already placed ahead of order; it reports
// how many of those it passed.
func (r *Rx) Accept(pass uint64) (passed int) {
	for {
		next := r.placed&1 != 0
		r.placed >>= 1
		r.expect++
		if !next {
			break
		}
		passed++
	}
	r.gotAny = true
	if r.gap && int32(r.hi-r.expect) < 0 {
		r.gap = false
	}
	r.Owe(pass)
	return passed
}

// Gap reports the receiver's view while packets are missing: the next
// expected number, the highest received, and the SACK bitmap (bit i:
// expect+1+i placed).
func (r *Rx) Gap() (ok bool, expect, hi uint32, sack uint64) {
	return r.gap, r.expect, r.hi, r.placed
}

// AckField is the cumulative acknowledgement every frame to the peer
// carries; ok is false before anything was accepted.
func (r *Rx) AckField() (ack uint32, ok bool) { return r.expect - 1, r.gotAny }

// Owe notes that an ACK is wanted (a packet accepted, or a duplicate to
// answer with the current state).
func (r *Rx) Owe(pass uint64) {
	if !r.ackDue {
		r.ackDue, r.ackPass = true, pass
		r.book.AcksOwed++
	}
	r.since++
}

// Await notes that the ACK owed covers a packet whose sender waits on
// it: a completion asked for (a signalled command), or a resend. That
// ACK is not held for a reply (AckWanted): the sender's command, or its
// timer, would wait for as long as the replier's library stayed away.
func (r *Rx) Await() { r.awaited = true }

// AckPolicy is when a receiver's owed ACK goes alone (AckWanted): every
// Every packets of a stream, and otherwise once it has waited HoldPasses
// passes of the device and HoldNs (a hold of 0 is none; HoldPasses below
// 1 counts as 1).
type AckPolicy struct {
	Every      int
	HoldPasses uint64
	HoldNs     int64
}

// AckWanted reports whether a standalone ACK should go now. An ACK made
// due in pass N waits for the command engine's look in pass
// N+HoldPasses at the earliest, so a reply the driver posts meanwhile
// carries it; at the end of a receive burst (burst), it goes once every
// Every packets were received, so a streaming sender's window keeps
// moving. While a gap lasts it goes at once: the sender waits for it to
// resend.
//
// A library that looks at its completions again before it answers (Open
// MPI's progress reads its queue until it is empty) makes passes between
// the request and the reply, and an ACK sent alone at the first of them
// cost each message of a ping-pong a frame each way. So an ACK waits more
// than one pass: HoldPasses on a medium where a frame costs a slot store
// (lossless ones, where the clock is not read per message), and HoldNs
// since a pass first saw it due (now is the pass's clock) on one where it
// costs a system call on each side. Not an awaited one (Await): the hold
// is for traffic whose senders wait on nothing but the reply (injects).
// Both are far below the requester's probe time (at least MinBackoff/2);
// a replier whose library stops calling right after the request leaves
// the ACK to its engine's watch, as the one-pass rule did when no pass
// came.
func (r *Rx) AckWanted(pass uint64, burst bool, now int64, pol *AckPolicy) bool {
	switch {
	case !r.ackDue:
		return false
	case r.gap:
		return true
	case burst || r.since >= pol.Every:
		return r.since >= pol.Every
	case r.awaited:
		return r.ackPass != pass
	case pol.HoldNs > 0:
		if r.dueAt == 0 {
			r.dueAt = now
		}
		return r.ackPass != pass && now-r.dueAt >= pol.HoldNs
	}
	return pass-r.ackPass >= max(pol.HoldPasses, 1)
}

// AckSent clears what a frame carrying the acknowledgement paid. A data
// frame's piggybacked ACK carries no SACK, so during a gap only a
// standalone one (full) settles the debt.
func (r *Rx) AckSent(full bool) {
	if r.gap && !full {
		return
	}
	if r.ackDue {
		r.ackDue = false
		r.book.AcksOwed--
	}
	r.since, r.dueAt, r.awaited = 0, 0, false
}

// Pending reports whether an ACK is owed.
func (r *Rx) Pending() bool { return r.ackDue }
