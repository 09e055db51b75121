// Package transport is the per-peer reliability of a dimmnet device: the
// sending window and its session epoch, cumulative and selective
// acknowledgements, the retransmission timer, go-backs, and on the
// receiving side the expected sequence number, packets placed ahead of it
// and the ACKs and NACKs owed.
//
// It speaks to the device in sequence numbers only: the device asks for a
// number before it sends a packet, is told "acknowledged through N", "send
// N again" or "the peer is unreachable", and keeps for itself what each
// number carries (which command, which bytes). Nothing here sends a frame,
// reads a clock or touches the register page, so every rule can be tested
// one step at a time (see docs/links.md for the protocol).
package transport

import (
	"math"
	"sync/atomic"
)

// Retransmission timing: ACP's UDP transport figures, and the floor for
// media that never lose a frame.
const (
	// MinBackoff is the first retransmission interval, ns.
	MinBackoff = 100_000
	// MaxBackoff caps the doubling interval, ns.
	MaxBackoff = 100_000_000
	// AckHold is how long a receiver on a medium that is not lossless
	// keeps an ACK for a reply to carry (Rx.AckWanted): a few passes of a
	// library's progress loop, far below the sender's probe time.
	AckHold = 10_000
	// AckHoldPasses is how many of its driver's passes a receiver on a
	// lossless medium keeps an ACK for a reply to carry (Rx.AckWanted;
	// the engine's passes send it at the next): a library that reads its
	// completions until the queue is empty makes a few before it posts
	// the reply.
	AckHoldPasses = 4
	// LosslessRTO is the least timeout on a medium that never loses a
	// frame (the in-memory hub: backpressure, not loss): there a timeout
	// only means an engine was off its core, and 100 µs fired for that
	// under load, resending what was on its way.
	LosslessRTO = 5_000_000
	// GracePasses is how many more engine passes a passed deadline waits
	// before it counts as a timeout: the clock runs while the engine is off
	// its core, and the answer may be waiting unread (or, from a peer on
	// the same engine, one pass from being sent).
	GracePasses = 4
	// SackBits is how far past the next expected packet a receiver places
	// packets out of order (and reports them in a SACK bitmap).
	SackBits = 64
)

// Config is what every peer of a device shares.
type Config struct {
	Window      int   // unacknowledged packets per peer
	MaxTimeouts int   // consecutive timeouts without progress before the peer is unreachable
	RTOFloor    int64 // least retransmission timeout, ns (0: MinBackoff)
	// Lossless says the medium never loses a frame (the in-memory hub,
	// the shared-memory link): no tail-loss probes, whose only finds
	// there would be a peer off its core.
	Lossless bool
	// HoldLimit bounds how long a receiver may hold our packet without
	// progress (ns; 0: for ever): a slow receiver is not an unreachable
	// one, but one whose hold never ends (or a stranger repeating hold
	// ACKs) must not keep a command queue frozen for good.
	HoldLimit int64
	// PeerWatched says the medium itself reports a peer that is gone (the
	// shared-memory link sees its process exit): silence from a peer is
	// then a slow peer, never a dead one, and timeouts alone do not end
	// the session. On a busy host a rank starved of CPU for the 2.6 s that
	// MaxTimeouts spans was declared UNREACHABLE while alive.
	PeerWatched bool
}

// Book counts, across every peer of a device, the work the engine must
// look at on each pass, so an idle device looks at no peer at all.
type Book struct {
	Timers   int // senders with a retransmission timer armed
	Resends  int // senders with packets marked for resending
	AcksOwed int // receivers whose ACK (or gap NACK) no frame has carried yet

	// soonest is no later than any armed timer's or probe's deadline (0:
	// none armed): what a thread blocked on the port bounds its wait by,
	// read on other goroutines than the pass that arms the timers, so
	// only through sync/atomic (a plain word: the Book stays copyable
	// for a test's printout).
	soonest int64
	// lostAt and lostBefore are when a timer last made a sender resend
	// (a tail-loss probe or a timeout; 0: never) and the time before
	// that, read like soonest.
	lostAt, lostBefore int64
}

// LostTwiceSince reports the time of the second-to-last resend a
// sender's timer made (0: fewer than two): a port wait keeps to the
// timers' deadlines only while losses recur (vdev's boundedWaiter), since
// a wake-up timer armed at every wait slowed each wake-up on this VM, and
// a clean link's rare timer resends are mostly an answer that came late.
func (b *Book) LostTwiceSince() int64 { return atomic.LoadInt64(&b.lostBefore) }

// lost records a resend by a sender's timer at now.
func (b *Book) lost(now int64) {
	atomic.StoreInt64(&b.lostBefore, atomic.LoadInt64(&b.lostAt))
	atomic.StoreInt64(&b.lostAt, now)
}

// Soonest is a time no later than every sender's next deadline (timer or
// tail-loss probe), 0 when none is armed; a timer armed unstamped on a
// lossless medium has no deadline until Stamp gives it one, and counts
// here only from then. A thread that blocks on the
// device's port waits at most until then: a lost packet's probe then
// leaves on time, where a wait bounded only by the driver's slice (a
// millisecond) made each loss cost one. Arming a deadline lowers it at
// once; a deadline that moves later or goes leaves it early (a wake-up too
// soon, never too late) until Settle. Safe from any goroutine.
func (b *Book) Soonest() int64 { return atomic.LoadInt64(&b.soonest) }

// Settle publishes next, the earliest deadline of every sender (0: none),
// found by the pass that just looked at them all.
func (b *Book) Settle(next int64) {
	if b.Timers == 0 {
		next = 0
	}
	if atomic.LoadInt64(&b.soonest) != next {
		atomic.StoreInt64(&b.soonest, next)
	}
}

// note lowers Soonest to at.
func (b *Book) note(at int64) {
	if s := atomic.LoadInt64(&b.soonest); s == 0 || at < s {
		atomic.StoreInt64(&b.soonest, at)
	}
}

// Cause says why a packet is being sent again.
type Cause uint8

// Causes of a resend, for counters.
const (
	CauseGap     Cause = iota + 1 // the receiver reported it missing (SEQ_ERR NACK or SACK)
	CauseTimeout                  // the retransmission timer ran out
	CauseGoBack                   // the receiver asked (ring full, or its hold ended)
	CauseProbe                    // a tail-loss probe: the last packet again after a quiet time
)

// pkt is one sent, unacknowledged packet. Its sequence number is implied:
// pkts[i] is acked+1+i.
type pkt struct {
	sentAt     int64  // last time it left
	firstAt    int64  // when it first left (0: untimed), for a late original's sample
	alone      bool   // nothing else was in flight when it first left
	resentNext uint32 // next new sequence number when it was last resent
	resent     bool   // sent more than once: its ACK says nothing of the round trip
	again      bool   // resent more than once: an early ACK may answer any earlier send
	untimed    bool   // left without a clock read (SentUntimed): no round-trip sample
	sacked     bool   // the receiver placed it (selective acknowledgement)
	lost       Cause  // marked for resending (0: not)
}

// Tx is the sending half of one peer's session.
type Tx struct {
	cfg  *Config
	book *Book

	epoch uint16
	next  uint32 // sequence number of the next new packet
	acked uint32 // every sequence number up to here is acknowledged
	pkts  []pkt
	lost  int // packets marked for resending

	deadline    int64  // >0: the timer is armed
	expiredPass uint64 // the engine pass that first saw the deadline passed
	goBack      bool   // the deadline is a requested go-back, not a timeout
	backoff     int64
	blockedAt   int64 // a new packet has found the link full since then (0: not)
	srtt        int64 // smoothed round trip, ns
	rttvar      int64 // smoothed mean deviation of the round trip, ns (RFC 6298)
	minRTT      int64 // the fastest round trip seen, ns (0: none yet)
	untimed     int   // packets sent untimed since the last timed one
	timeouts    int   // consecutive timeouts without progress
	heldSince   int64 // the first hold ACK since the last progress (0: none)
	// Tail-loss probe (TCP's TLP, RFC 8985): a message whose last
	// packet is lost leaves no later packet for the receiver to find
	// the gap by, so only the timer found it. probeAt is when the last
	// unacknowledged packet is sent again if no ACK came (0: no probe
	// pending); probed says the probe of this flight went, until an ACK
	// makes progress.
	probeAt int64
	probed  bool
	// Spurious-timeout detection (F-RTO, RFC 5682): a timeout resends
	// only the oldest packet the receiver lacks (frtoSeq), and the ACK
	// that answers it decides for the rest of the flight (up to
	// frtoEnd): one acknowledging more than that packet shows the flight
	// was on its way (an engine off its core past the RTO, the common
	// timeout here), one acknowledging exactly it shows the rest was
	// lost too, and they go again. A second timeout goes back at once.
	frto             bool
	frtoSeq, frtoEnd uint32
	spurious         uint64 // resends found spurious by their ACK's timing (Spurious)
}

// NewTx starts a sending session under epoch (a clock reading, so a
// restarted device is told apart from the one the peer remembers).
func NewTx(cfg *Config, book *Book, epoch uint16) *Tx {
	return &Tx{cfg: cfg, book: book, epoch: epoch, next: 1, backoff: MinBackoff}
}

// Epoch is the session the packets carry (the Code field of data frames).
func (t *Tx) Epoch() uint16 { return t.epoch }

// Next is the sequence number the next new packet takes.
func (t *Tx) Next() uint32 { return t.next }

// Acked is the cumulative acknowledgement: every number up to it arrived.
func (t *Tx) Acked() uint32 { return t.acked }

// Spurious counts resends whose ACK came too soon after them to answer
// them (see Ack): the first transmission had arrived.
func (t *Tx) Spurious() uint64 { return t.spurious }

// SRTT is the smoothed round trip, ns.
func (t *Tx) SRTT() int64 { return t.srtt }

// RTTVar is the round trip's smoothed mean deviation, ns.
func (t *Tx) RTTVar() int64 { return t.rttvar }

// Unacked is the number of packets sent and not yet acknowledged.
func (t *Tx) Unacked() int { return len(t.pkts) }

// Room reports whether a new packet may be sent: the window has room, no
// resend is waiting (resends go first) and no go-back is pending.
func (t *Tx) Room() bool { return len(t.pkts) < t.cfg.Window && t.lost == 0 && !t.goBack }

// Resending reports whether packets are marked for resending.
func (t *Tx) Resending() bool { return t.lost > 0 }

// Armed reports whether the retransmission timer runs.
func (t *Tx) Armed() bool { return t.deadline != 0 }

// RTO is how long to wait for an ACK before sending again: the backoff,
// but never below three smoothed round trips (a slow medium is not a lost
// packet), for a lone packet the tail-loss probe's time plus two mean
// deviations (the probe goes first), nor the medium's floor, and never
// above MaxBackoff.
func (t *Tx) RTO() int64 {
	return min(max(t.backoff, 3*t.srtt, t.loneBound()+2*t.rttvar, t.cfg.RTOFloor), MaxBackoff)
}

// loneBound is, while the flight is one packet, the smoothed round trip
// plus four mean deviations of lone packets' round trips (RFC 6298's
// RTO); 0 otherwise. In request-reply traffic the ACK rides the answer,
// so the round trip a sender times is the peer's turnaround too, and that
// has a heavy tail wherever the peer's thread shares a core (a replier
// preempted for 100 µs-3 ms). A timer that fires inside that tail resends
// a packet that was never lost: the variance term keeps it past the
// turnaround the peer has shown, while a quiet peer's timers stay near
// twice its round trip. A flight of many packets keeps the rules without
// it (as RFC 8985 adds the peer's ACK delay only to a flight of one):
// there the ACKs come from the receiver's passes, not from an answer, a
// lost tail is the probe's to find soon, and an RTO of SRTT + 4 RTTVAR
// did not cut the 256 KiB-1 MiB rows' timeouts (docs/design.md,
// "Tail-loss probes").
func (t *Tx) loneBound() int64 {
	if len(t.pkts) > 1 {
		return 0
	}
	return t.srtt + 4*t.rttvar
}

// sample feeds one round-trip measurement to the estimators; the mean
// deviation learns only from packets that were alone in flight (the
// request-reply turnaround loneBound guards against).
func (t *Tx) sample(rtt int64, alone bool) {
	rtt = max(rtt, 1)
	if t.minRTT == 0 || rtt < t.minRTT {
		t.minRTT = rtt
	}
	if t.srtt == 0 {
		t.srtt = rtt
		if alone {
			t.rttvar = rtt / 2
		}
		return
	}
	if alone {
		d := rtt - t.srtt
		if d < 0 {
			d = -d
		}
		t.rttvar += (d - t.rttvar) / 4
	}
	t.srtt += (rtt - t.srtt) / 8
}

// Sent records that the packet numbered Next left at now; the number is
// used up.
func (t *Tx) Sent(now int64) {
	t.untimed = 0
	t.blockedAt = 0
	t.pkts = append(t.pkts, pkt{sentAt: now, firstAt: now, alone: len(t.pkts) == 0})
	t.next++
	if t.deadline == 0 || t.deadline == unstamped {
		t.arm(now+t.RTO(), false)
	}
	t.armProbe(now)
}

// untimedMax is how many packets in a row may leave untimed: every
// sixteenth is timed, so the round trip keeps its samples.
const untimedMax = 15

// NeedsClock reports whether the next packet must leave with the time
// (Sent) rather than without (SentUntimed): on a medium that can lose, the
// tail-loss probe and every round-trip sample need it; on a lossless one
// only every sixteenth packet (the round-trip sample). A clock read per
// packet was 7-10% of a streaming sender's samples on the shared-memory
// link, where the timer only waits for a stopped peer; and a ping-pong,
// whose every packet starts a flight, read it on every message.
func (t *Tx) NeedsClock() bool {
	return !t.cfg.Lossless || t.untimed >= untimedMax
}

// SentUntimed records that the packet numbered Next left, without a
// clock read: only when NeedsClock says it may. A timer not armed yet is
// armed unstamped (see Stamp); the packet's ACK gives no round-trip sample.
func (t *Tx) SentUntimed() {
	t.untimed++
	t.blockedAt = 0
	t.pkts = append(t.pkts, pkt{untimed: true})
	t.next++
	if t.deadline == 0 {
		t.armUnstamped()
	}
}

// unstamped is the deadline of a timer armed without the time, on a
// lossless medium: it runs from the first look at the timers after it
// (Stamp), a few driver passes later, or the engine's next pass. There
// the timer only waits for a peer that stopped (its floor is
// LosslessRTO, milliseconds), so starting it microseconds late changes
// nothing, and the flight's first packet and the ACK that retires it no
// longer read the clock: a clock read each way was on every message of a
// ping-pong.
const unstamped = math.MaxInt64

// armUnstamped arms the timer without the time (see unstamped).
func (t *Tx) armUnstamped() {
	if t.deadline == 0 {
		t.book.Timers++
	}
	t.deadline, t.goBack, t.expiredPass = unstamped, false, 0
}

// Stamp starts a timer armed unstamped from now; the engine calls it
// wherever it looks at the timers (before Due and Deadline).
func (t *Tx) Stamp(now int64) {
	if t.deadline == unstamped {
		t.arm(now+t.RTO(), false)
	}
}

// PTO is the tail-loss probe's quiet time: twice the smoothed round trip
// (the receiver's ACK may wait a pass) or, for a lone packet, the round
// trip's bound with its variance (loneBound: a peer whose answers come
// late now and then is not probed inside its own turnaround), at least
// half the first backoff.
// Never on a lossless medium.
func (t *Tx) PTO() int64 { return max(2*t.srtt, t.loneBound(), MinBackoff/2) }

// armProbe (re)arms the probe for the flight's tail at now + PTO, or at
// the timer's deadline if that comes first (as Linux caps the PTO by
// the RTO left): the probe then goes instead of the timeout, and the
// timer starts again from it. Not again for a flight probed already.
func (t *Tx) armProbe(now int64) {
	if t.probed || len(t.pkts) == 0 || t.cfg.Lossless || t.goBack || t.deadline == 0 {
		t.probeAt = 0
		return
	}
	t.probeAt = min(now+t.PTO(), t.deadline)
	t.book.note(t.probeAt)
}

// Probing reports whether a tail-loss probe is pending.
func (t *Tx) Probing() bool { return t.probeAt != 0 }

func (t *Tx) arm(at int64, goBack bool) {
	if t.deadline == 0 {
		t.book.Timers++
	}
	t.deadline, t.goBack, t.expiredPass = at, goBack, 0
	if goBack {
		t.probeAt = 0 // everything not placed goes again: nothing to probe
	}
	t.book.note(at)
}

func (t *Tx) disarm() {
	if t.deadline != 0 {
		if t.book.Timers--; t.book.Timers == 0 {
			t.book.Settle(0)
		}
	}
	t.deadline, t.goBack, t.expiredPass, t.probeAt = 0, false, 0, 0
}

// Advances reports whether a cumulative ACK of ack would acknowledge
// packets (Ack would return true): a caller reads the clock only then.
func (t *Tx) Advances(ack uint32) bool {
	return int32(ack-t.acked) > 0 && int32(ack-(t.next-1)) <= 0
}

// AckNeedsClock reports whether a cumulative ACK of ack needs the time
// (Ack) rather than not (AckUntimed): it retires packets, and the medium
// can lose or the oldest of them gives a round-trip sample (it left timed,
// or was resent). On a lossless medium an ACK that retires untimed
// packets re-arms the timer unstamped.
func (t *Tx) AckNeedsClock(ack uint32) bool {
	if !t.Advances(ack) {
		return false
	}
	if !t.cfg.Lossless {
		return true
	}
	// ack samples the oldest timed packet the ACK retires: a burst
	// acknowledged in pieces has its timed packets (one in 16) behind
	// untimed ones.
	for i := range int(ack - t.acked) {
		if p := &t.pkts[i]; !p.untimed || p.resent {
			return true
		}
	}
	return false
}

// AckUntimed is Ack without the time, where AckNeedsClock says it may be.
func (t *Tx) AckUntimed(ack uint32) bool { return t.ack(ack, 0, false) }

// Ack applies a cumulative acknowledgement; it reports whether it
// retired anything (an old one, or one for numbers never sent, does not).
func (t *Tx) Ack(ack uint32, now int64) bool { return t.ack(ack, now, true) }

func (t *Tx) ack(ack uint32, now int64, timed bool) bool {
	if !t.Advances(ack) {
		return false
	}
	n := int(ack - t.acked)
	// Time the oldest packet the ACK retires: it waited longest (ACKs are
	// cumulative and may wait a pass), so under a stream the timer learns
	// what a burst really takes. Karn: first transmissions only.
	//
	// A packet resent once whose ACK comes sooner after the resend than
	// half the fastest round trip seen answers the first transmission
	// (Eifel's test, RFC 3522, by the clock instead of a timestamp): the
	// resend was spurious, and the time since the first transmission is
	// a true sample. After a second resend such an ACK may answer the
	// first resend, so Karn's rule holds. Karn's rule would drop it, and with it every round trip
	// long enough to have made a timer fire: the estimators would never
	// learn the tail that makes the spurious resends.
	//
	// A packet alone in flight from its departure to its ACK is a
	// request-reply round trip: only those teach the mean deviation.
	switch p := t.pkts[0]; {
	case !timed:
	case !p.resent && !p.untimed:
		t.sample(now-p.sentAt, p.alone && len(t.pkts) == 1)
	case p.resent && !p.again && p.firstAt != 0 && t.minRTT > 0 && now-p.sentAt < t.minRTT/2:
		t.sample(now-p.firstAt, p.alone && len(t.pkts) == 1)
		t.spurious++
	case p.untimed:
		// On a lossless medium one packet in 16 is timed: take the oldest
		// timed one this ACK retires, or a stream acknowledged in pieces
		// (window/8 at a time) would never teach the round trip.
		for i := 1; i < n; i++ {
			if q := &t.pkts[i]; !q.untimed && !q.resent {
				t.sample(now-q.sentAt, false)
				break
			}
		}
	}
	for i := range n {
		if t.pkts[i].lost != 0 {
			t.unlose(&t.pkts[i])
		}
	}
	t.pkts = t.pkts[:copy(t.pkts, t.pkts[n:])] // in place: no allocation per ACK
	t.acked = ack
	if t.frto && int32(ack-t.frtoSeq) >= 0 {
		t.frto = false
		if ack == t.frtoSeq {
			// Only the resent packet arrived: the flight behind it was lost.
			for i := range t.pkts {
				if seq := ack + 1 + uint32(i); int32(seq-t.frtoEnd) > 0 {
					break
				}
				if p := &t.pkts[i]; !p.sacked && p.lost == 0 {
					t.mark(p, CauseTimeout)
				}
			}
		}
	}
	t.backoff, t.timeouts, t.heldSince = MinBackoff, 0, 0
	t.probed = false
	switch {
	case len(t.pkts) == 0:
		t.disarm()
	case !timed:
		t.armUnstamped()
		return true
	default:
		t.arm(now+t.RTO(), false)
	}
	t.armProbe(now)
	return true
}

func (t *Tx) mark(p *pkt, c Cause) {
	if p.lost == 0 {
		if t.lost++; t.lost == 1 {
			t.book.Resends++
		}
	}
	p.lost = c
}

func (t *Tx) unlose(p *pkt) {
	p.lost = 0
	if t.lost--; t.lost == 0 {
		t.book.Resends--
	}
}

// at returns the unacknowledged packet numbered seq, or nil.
func (t *Tx) at(seq uint32) *pkt {
	i := int32(seq - t.acked - 1)
	if i < 0 || int(i) >= len(t.pkts) {
		return nil
	}
	return &t.pkts[i]
}

// Gap applies a receiver's report that it misses packets: it expects
// expect next, has received up to hi, and (sack true) placed the packets
// the bitmap names (bit i: expect+1+i). Each packet in [expect, hi] it
// did not place is marked for resending at once, unless it was already
// resent and nothing sent after that resend has arrived yet (the resend
// may still be on its way). No timer is involved.
//
// Gap acknowledges nothing: expect-1 is not always acknowledged (a
// receiver holds its ACK below a packet it refused until the sender has
// the refusal). The caller applies the frame's cumulative ACK first.
func (t *Tx) Gap(expect, hi uint32, sack uint64, now int64) {
	for i := range uint32(SackBits) {
		if sack&(1<<i) != 0 {
			if p := t.at(expect + 1 + i); p != nil {
				p.sacked = true
				if p.lost != 0 {
					t.unlose(p)
				}
			}
		}
	}
	if int32(hi-(t.next-1)) > 0 {
		hi = t.next - 1 // never more than was sent
	}
	if int32(expect-(t.acked+1)) < 0 {
		expect = t.acked + 1 // a stale report: only what is still outstanding
	}
	for s := expect; int32(s-hi) <= 0; s++ {
		p := t.at(s)
		if p == nil {
			continue
		}
		if !p.sacked && p.lost == 0 && (!p.resent || int32(hi-p.resentNext) >= 0) {
			t.mark(p, CauseGap)
		}
	}
}

// Retry applies a NACK asking for seq again later (a full ring in NACK
// mode): everything not acknowledged goes again after the backoff, which
// doubles. A NACK never counts as a timeout. Like Gap it acknowledges
// nothing: the caller applies the frame's cumulative ACK first.
func (t *Tx) Retry(seq uint32, now int64) {
	if int32(seq-t.acked) <= 0 || t.goBack {
		return
	}
	if len(t.pkts) > 0 {
		t.arm(now+t.backoff, true)
		t.backoff = min(t.backoff*2, MaxBackoff)
	}
}

// Resume applies a NACK saying the receiver's hold ended: everything not
// acknowledged goes again now (the caller applies the frame's cumulative
// ACK first, as for Gap).
func (t *Tx) Resume(seq uint32, now int64) {
	t.goBackAll(CauseGoBack)
}

// Alive notes that the peer answered without progress (it holds our
// packet) at now: it is there, so its silence is not counted towards
// unreachable; the hold itself is timed against Config.HoldLimit.
func (t *Tx) Alive(now int64) {
	t.timeouts = 0
	if t.heldSince == 0 {
		t.heldSince = now
	}
}

// goBackAll marks every packet the receiver has not placed for resending.
func (t *Tx) goBackAll(c Cause) {
	for i := range t.pkts {
		if p := &t.pkts[i]; !p.sacked && p.lost == 0 {
			t.mark(p, c)
		}
	}
}

// Deadline is when the timer (or, before it, the tail-loss probe) runs
// out (0: not armed).
func (t *Tx) Deadline() int64 {
	if t.probeAt != 0 && t.probeAt <= t.deadline {
		return t.probeAt
	}
	return t.deadline
}

// Due reports whether the timer, or the tail-loss probe, has run out at
// now.
func (t *Tx) Due(now int64) bool {
	return t.deadline != 0 && now >= t.deadline || t.probeAt != 0 && now >= t.probeAt
}

// LeftAt applies the device port's word on a timer or probe that came
// due at now: the flight's packets left the port only at from (now while
// some are still queued there). What has not left cannot have been lost,
// and what left late is timed from when it left, so a due timer counts
// its RTO again from then, neither a timeout nor a go-back yet. The
// flight's tail-loss probe, not gone yet, counts its PTO from then too:
// dropping it (as this did before) left a lost tail to the timer, and
// on a port that queues large packets for a goroutine to send (UDP) the
// last packet nearly always left after its probe was armed. It reports
// whether the timer or the probe is still due at now.
func (t *Tx) LeftAt(from, now int64) (due bool) {
	if t.deadline != 0 && now >= t.deadline && from+t.RTO() > now {
		t.deadline, t.expiredPass = from+t.RTO(), 0
	}
	if t.probeAt != 0 && now >= t.probeAt && from+t.PTO() > now {
		t.probeAt = min(from+t.PTO(), t.deadline)
	}
	return t.Due(now)
}

// Expiry is what a run-out timer led to.
type Expiry uint8

// Outcomes of Expire.
const (
	Waiting     Expiry = iota // within the grace: maybe the answer is unread
	WentBack                  // a requested go-back: packets marked for resending
	TimedOut                  // a timeout: packets marked, interval doubled
	Unreachable               // MaxTimeouts in a row: the session is over
	HoldExpired               // the peer held our packets past Config.HoldLimit: the session is over
	Probed                    // a tail-loss probe: the last unacknowledged packet marked for resending
)

// Expire handles a run-out timer in engine pass pass (call when Due).
// A timeout marks every packet the receiver has not placed for resending
// and re-arms; a go-back kept from completing (the link is full) for a
// whole timeout is itself one, so a peer that stopped draining its link
// still becomes unreachable.
func (t *Tx) Expire(now int64, pass uint64) Expiry {
	if len(t.pkts) == 0 {
		t.disarm()
		return Waiting
	}
	if t.probeAt != 0 && now >= t.probeAt {
		// The tail again, once: if it was lost the receiver places it
		// and ACKs; if an earlier one was lost too, the probe arriving
		// out of order makes the receiver report the gap. The timer
		// starts again from the probe.
		t.probeAt, t.probed = 0, true
		t.arm(now+t.RTO(), false)
		t.book.lost(now)
		for i := len(t.pkts) - 1; i >= 0; i-- {
			if p := &t.pkts[i]; !p.sacked {
				if p.lost == 0 {
					t.mark(p, CauseProbe)
				}
				return Probed
			}
		}
		return Waiting
	}
	if t.goBack {
		t.goBack = false
		t.goBackAll(CauseGoBack)
		t.arm(now+t.RTO(), false)
		return WentBack
	}
	if t.expiredPass == 0 {
		t.expiredPass = pass
		return Waiting
	}
	if pass-t.expiredPass < GracePasses {
		return Waiting
	}
	if t.heldSince != 0 && t.cfg.HoldLimit > 0 && now-t.heldSince >= t.cfg.HoldLimit {
		return HoldExpired
	}
	if t.timeouts++; t.timeouts >= t.cfg.MaxTimeouts && !t.cfg.PeerWatched {
		return Unreachable
	}
	t.backoff = min(2*t.RTO(), MaxBackoff)
	t.timedOut()
	t.arm(now+t.RTO(), false)
	t.book.lost(now)
	t.probeAt = 0
	return TimedOut
}

// timedOut marks what a timeout resends: the oldest packet the receiver
// lacks, the rest waiting for the ACK that answers it (F-RTO, see Tx); a
// timeout during that wait, which no ACK answered, marks everything.
func (t *Tx) timedOut() {
	if t.frto {
		t.frto = false
		t.goBackAll(CauseTimeout)
		return
	}
	for i := range t.pkts {
		if p := &t.pkts[i]; !p.sacked {
			if p.lost == 0 {
				t.mark(p, CauseTimeout)
			}
			t.frto, t.frtoSeq, t.frtoEnd = true, t.acked+1+uint32(i), t.next-1
			return
		}
	}
}

// Blocked notes that a new packet could not leave at now because the link
// to the peer is full. With packets outstanding their timer covers it;
// otherwise a link that stays full for a whole timeout counts as one, so a
// peer that stopped draining its link still becomes unreachable.
func (t *Tx) Blocked(now int64) Expiry {
	switch {
	case len(t.pkts) > 0:
		return Waiting
	case t.blockedAt == 0:
		t.blockedAt = now
		return Waiting
	case now-t.blockedAt < t.RTO():
		return Waiting
	}
	t.blockedAt = now
	if t.timeouts++; t.timeouts >= t.cfg.MaxTimeouts && !t.cfg.PeerWatched {
		return Unreachable
	}
	t.backoff = min(2*t.RTO(), MaxBackoff)
	return TimedOut
}

// Resend calls send for each packet marked for resending, oldest first,
// until send fails (the link is full: the rest go on a later pass). It
// reports how many left, by cause.
func (t *Tx) Resend(now int64, send func(seq uint32) error) (n [CauseProbe + 1]int, err error) {
	for i := range t.pkts {
		p := &t.pkts[i]
		if p.lost == 0 {
			continue
		}
		if err = send(t.acked + 1 + uint32(i)); err != nil {
			return n, err
		}
		n[p.lost]++
		t.unlose(p)
		p.sentAt, p.again, p.resent, p.resentNext, p.untimed = now, p.resent, true, t.next, false
		if t.lost == 0 {
			break
		}
	}
	return n, nil
}

// StartAt numbers the session's packets from seq, as if every number
// before it were acknowledged. Nothing may be outstanding. Sequence
// numbers wrap, so a session may start anywhere; tests start near 2^32 to
// cross the wrap.
func (t *Tx) StartAt(seq uint32) {
	if len(t.pkts) == 0 {
		t.next, t.acked = seq, seq-1
	}
}

// Reset ends the session (the peer is unreachable): a new epoch, numbers
// from 1 again, nothing outstanding. Renumbering under the old epoch would
// make the peer take new packets for duplicates of old ones it placed.
func (t *Tx) Reset() {
	t.disarm()
	if t.lost > 0 {
		t.book.Resends--
	}
	*t = Tx{cfg: t.cfg, book: t.book, epoch: t.epoch + 1, next: 1, backoff: MinBackoff, pkts: t.pkts[:0],
		srtt: t.srtt, rttvar: t.rttvar, minRTT: t.minRTT, spurious: t.spurious}
}
