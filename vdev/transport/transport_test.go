package transport

import (
	"testing"
)

func newTx(window int) (*Tx, *Book) {
	b := &Book{}
	return NewTx(&Config{Window: window, MaxTimeouts: 3}, b, 7), b
}

// sendN sends n packets at now and returns their numbers.
func sendN(t *Tx, n int, now int64) []uint32 {
	var s []uint32
	for range n {
		s = append(s, t.Next())
		t.Sent(now)
	}
	return s
}

// resent collects what Resend sends.
func resent(t *Tx, now int64) []uint32 {
	var got []uint32
	t.Resend(now, func(seq uint32) error { got = append(got, seq); return nil })
	return got
}

func eq(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A gap report resends exactly the packets the receiver misses, at once,
// without the timer: the ones it placed ahead of order (SACK) stay.
func TestGapResendsOnlyTheMissing(t *testing.T) {
	tx, book := newTx(64)
	sendN(tx, 10, 1000) // 1..10
	// The receiver has 1..3, misses 4 and 6, placed 5, 7, 8; saw up to 8.
	// SACK bit i is expect+1+i: 5 -> bit 0, 7 -> bit 2, 8 -> bit 3.
	tx.Ack(3, 2000) // the NACK's cumulative ACK, applied first
	tx.Gap(4, 8, 1<<0|1<<2|1<<3, 2000)
	if tx.Acked() != 3 {
		t.Fatalf("acked %d, want 3", tx.Acked())
	}
	if got := resent(tx, 2100); !eq(got, []uint32{4, 6}) {
		t.Fatalf("resent %v, want [4 6]", got)
	}
	if book.Resends != 0 || tx.Resending() {
		t.Fatalf("resends still marked: book %d", book.Resends)
	}
	// The same report again (a coalesced NACK after more arrivals) sends
	// nothing twice: the resends may still be on their way.
	tx.Gap(4, 8, 1<<0|1<<2|1<<3, 2200)
	if got := resent(tx, 2300); len(got) != 0 {
		t.Fatalf("second identical report resent %v", got)
	}
	// 9 and 10 arrived but could not be placed ahead: the report that says
	// so resends them (they were never resent).
	tx.Gap(4, 10, 1<<0|1<<2|1<<3, 2400)
	if got := resent(tx, 2500); !eq(got, []uint32{9, 10}) {
		t.Fatalf("resent %v, want [9 10]", got)
	}
	if tx.Armed() && tx.Deadline() <= 2000 {
		t.Fatal("a gap report must not be a timeout")
	}
}

// A resend that is itself lost is found without a timer once something
// sent after it has arrived.
func TestLostResendFoundByLaterArrival(t *testing.T) {
	tx, _ := newTx(64)
	sendN(tx, 3, 0)          // 1..3
	tx.Gap(1, 2, 1<<0, 10)   // 1 missing, 2 placed
	resent(tx, 20)           // 1 again, while next is 4
	sendN(tx, 2, 30)         // 4, 5 leave after the resend
	tx.Gap(1, 5, 0b1111, 40) // 2..5 placed: 1's resend was lost
	if got := resent(tx, 50); !eq(got, []uint32{1}) {
		t.Fatalf("resent %v, want [1]", got)
	}
}

// A stale or forged report never reaches outside what is outstanding.
func TestGapReportBounded(t *testing.T) {
	tx, _ := newTx(64)
	sendN(tx, 3, 0)
	tx.Ack(2, 5)
	tx.Gap(0, 0xFFFFFFFF, ^uint64(0), 10) // nonsense numbers
	if got := resent(tx, 20); len(got) > 1 {
		t.Fatalf("resent %v from a nonsense report", got)
	}
	tx.Gap(2_000_000_000, 2_000_000_100, 0, 30)
	if got := resent(tx, 40); len(got) != 0 || tx.Acked() != 2 {
		t.Fatalf("resent %v, acked %d after a report of numbers never sent", got, tx.Acked())
	}
}

// A timeout goes back over everything the receiver did not place, counts,
// doubles the interval, and MaxTimeouts in a row end the session; the
// first expiry waits GracePasses passes for an answer that may be unread.
func TestTimeoutGraceBackoffUnreachable(t *testing.T) {
	tx, _ := newTx(64)
	sendN(tx, 3, 0)
	tx.Gap(1, 3, 1<<0, 1) // 2 placed ahead
	resent(tx, 2)         // 1 and 3 went again
	if tx.Probing() {     // the tail-loss probe comes first: 3 once more
		if e := tx.Expire(tx.Deadline(), 1); e != Probed {
			t.Fatalf("probe: %v", e)
		}
		if got := resent(tx, tx.Deadline()); !eq(got, []uint32{3}) {
			t.Fatalf("probe resent %v, want [3]", got)
		}
	}
	rto := tx.RTO()
	now := tx.Deadline()
	pass := uint64(100)
	if !tx.Due(now) {
		t.Fatal("not due at its deadline")
	}
	for i := range GracePasses {
		if e := tx.Expire(now, pass+uint64(i)); e != Waiting {
			t.Fatalf("pass %d of the grace: %v", i, e)
		}
	}
	if e := tx.Expire(now, pass+GracePasses); e != TimedOut {
		t.Fatalf("after the grace: %v, want TimedOut", e)
	}
	if got := resent(tx, now); !eq(got, []uint32{1}) {
		t.Fatalf("timeout resent %v, want [1] (the oldest the receiver lacks)", got)
	}
	if tx.RTO() <= rto {
		t.Fatalf("interval %d did not grow from %d", tx.RTO(), rto)
	}
	var last Expiry
	for range 3 {
		now = tx.Deadline()
		for p := range GracePasses + 1 {
			last = tx.Expire(now, pass+uint64(1000*(p+1)))
		}
		pass += 10_000
		if last == Unreachable {
			break
		}
	}
	if last != Unreachable {
		t.Fatalf("after MaxTimeouts: %v, want Unreachable", last)
	}
	ep := tx.Epoch()
	tx.Reset()
	if tx.Epoch() == ep || tx.Next() != 1 || tx.Unacked() != 0 || tx.Armed() || tx.Resending() {
		t.Fatalf("reset: epoch %d->%d next %d unacked %d", ep, tx.Epoch(), tx.Next(), tx.Unacked())
	}
}

// A NACK asking for a retry goes back after the backoff, never counted as
// a timeout; one saying a hold ended goes back at once.
func TestRetryAndResume(t *testing.T) {
	tx, _ := newTx(64)
	sendN(tx, 4, 0)
	tx.Ack(1, 10)
	tx.Retry(2, 10)
	if tx.Acked() != 1 || tx.Room() {
		t.Fatalf("retry: acked %d, room %v (new packets must wait for the go-back)", tx.Acked(), tx.Room())
	}
	if e := tx.Expire(tx.Deadline(), 1); e != WentBack {
		t.Fatalf("retry deadline: %v, want WentBack", e)
	}
	if got := resent(tx, 20); !eq(got, []uint32{2, 3, 4}) {
		t.Fatalf("go-back resent %v", got)
	}
	tx.Ack(3, 30)
	tx.Resume(4, 30)
	if got := resent(tx, 40); !eq(got, []uint32{4}) || tx.Acked() != 3 {
		t.Fatalf("resume resent %v, acked %d", got, tx.Acked())
	}
}

// A full link cuts a resend short: the rest goes on the next call, from
// where it stopped.
func TestResendResumesAfterFullLink(t *testing.T) {
	tx, _ := newTx(64)
	sendN(tx, 5, 0)
	tx.Gap(1, 5, 0, 1)
	var got []uint32
	full := errFull{}
	tx.Resend(2, func(seq uint32) error {
		if seq == 3 {
			return full
		}
		got = append(got, seq)
		return nil
	})
	got = append(got, resent(tx, 3)...)
	if !eq(got, []uint32{1, 2, 3, 4, 5}) {
		t.Fatalf("resent %v", got)
	}
}

type errFull struct{}

func (errFull) Error() string { return "full" }

// The receiver: in order, duplicates (also of packets placed ahead),
// gaps opened once and closed by the packet that fills them, and the
// SACK it reports.
func TestReceiverGapAndSack(t *testing.T) {
	book := &Book{}
	rx := NewRx(book)
	if !rx.Session(3) || rx.Session(3) {
		t.Fatal("session: first is new, the same again is not")
	}
	if rx.Check(1) != InOrder {
		t.Fatal("1 not in order")
	}
	rx.Accept(1)
	if rx.Check(3) != Ahead || !rx.CanPlaceAhead(3) {
		t.Fatal("3 not ahead")
	}
	rx.PlacedAhead(3)
	if !rx.SawAhead(3, 1) {
		t.Fatal("the first arrival beyond a gap must open it")
	}
	if rx.SawAhead(5, 1) {
		t.Fatal("a second arrival must not open the gap again")
	}
	if rx.Check(3) != Duplicate || rx.Check(1) != Duplicate {
		t.Fatal("placed-ahead and old packets must be duplicates")
	}
	gap, expect, hi, sack := rx.Gap()
	if !gap || expect != 2 || hi != 5 || sack != 1 {
		t.Fatalf("gap %v expect %d hi %d sack %b", gap, expect, hi, sack)
	}
	if !rx.AckWanted(1, false, 0, &AckPolicy{Every: 8, HoldPasses: 1}) {
		t.Fatal("during a gap the NACK goes at once")
	}
	if passed := rx.Accept(2); passed != 1 || rx.Expect() != 4 {
		t.Fatalf("accept 2: passed %d, expect %d; want 1, 4", passed, rx.Expect())
	}
	if gap, _, _, _ := rx.Gap(); !gap {
		t.Fatal("5 is still beyond 4: the gap is not closed")
	}
	rx.Accept(3) // 4
	rx.Accept(3) // 5 (was dropped, came again)
	if gap, _, _, _ := rx.Gap(); gap || rx.Expect() != 6 {
		t.Fatalf("gap %v expect %d after filling", gap, rx.Expect())
	}
	if rx.CanPlaceAhead(7+SackBits) || !rx.CanPlaceAhead(6+SackBits) {
		t.Fatal("the span placed ahead is SackBits past the expected")
	}
	if !rx.Session(4) || rx.Expect() != 1 {
		t.Fatal("a new epoch restarts the numbering")
	}
}

// Sequence numbers wrap: a session that starts near 2^32 acknowledges
// and reports gaps across the wrap.
func TestWrap(t *testing.T) {
	tx, _ := newTx(64)
	tx.StartAt(0xFFFFFFFE)
	s := sendN(tx, 4, 0) // FFFFFFFE, FFFFFFFF, 0, 1
	tx.Ack(0xFFFFFFFE, 1)
	tx.Gap(0xFFFFFFFF, 1, 1<<0, 1)
	if tx.Acked() != 0xFFFFFFFE {
		t.Fatalf("acked %#x", tx.Acked())
	}
	if got := resent(tx, 2); !eq(got, []uint32{0xFFFFFFFF, 1}) {
		t.Fatalf("resent %#x, want FFFFFFFF and 1 (0 placed); sent %#x", got, s)
	}
	if !tx.Ack(1, 3) || tx.Unacked() != 0 {
		t.Fatalf("ack across the wrap: unacked %d", tx.Unacked())
	}
	rx := NewRx(&Book{})
	rx.StartAt(1, 0xFFFFFFFF)
	if rx.Check(0) != Ahead || rx.Check(0xFFFFFFFE) != Duplicate {
		t.Fatal("receiver comparisons broken by the wrap")
	}
}

// A late frame of a session the sender has replaced is stale: taking it
// for yet another new session would end the current one and accept its
// numbers again (a message placed and reported twice).
func TestReceiverStaleSession(t *testing.T) {
	rx := NewRx(&Book{})
	if rx.Stale(7) || !rx.Session(7) {
		t.Fatal("the first epoch opens a session")
	}
	rx.Accept(1)
	if rx.Stale(7) {
		t.Fatal("the current epoch is not stale")
	}
	if !rx.Session(8) || !rx.Stale(7) || rx.Stale(8) || rx.Stale(9) {
		t.Fatal("after 7 -> 8, 7 is stale and 8, 9 are not")
	}
	for e := uint16(9); e <= 12; e++ {
		rx.Session(e)
	}
	if !rx.Stale(8) || !rx.Stale(11) || rx.Stale(7) {
		t.Fatal("the last four epochs left are stale, older ones forgotten")
	}
}

// A gap report, a retry and a resume acknowledge nothing themselves: a
// receiver holding its ACK below a refused packet reports a gap after it,
// and the refused packet must stay outstanding until the refusal arrives.
func TestNacksAcknowledgeNothing(t *testing.T) {
	tx, _ := newTx(64)
	sendN(tx, 6, 0)    // 1..6
	tx.Ack(1, 1)       // the receiver holds its ACK below 2 (refused)
	tx.Gap(5, 6, 0, 2) // 3 and 4 arrived, 5 is missing
	if tx.Acked() != 1 {
		t.Fatalf("a gap report acknowledged through %d", tx.Acked())
	}
	if got := resent(tx, 3); !eq(got, []uint32{5, 6}) {
		t.Fatalf("resent %v, want [5 6]: the packets before expect arrived", got)
	}
	tx.Resume(5, 4)
	if tx.Acked() != 1 {
		t.Fatalf("a resume acknowledged through %d", tx.Acked())
	}
	if got := resent(tx, 5); !eq(got, []uint32{2, 3, 4, 5, 6}) {
		t.Fatalf("resume resent %v, want every unacknowledged packet", got)
	}
	tx.Retry(5, 6)
	if tx.Acked() != 1 {
		t.Fatalf("a retry acknowledged through %d", tx.Acked())
	}
}

// A message whose last packet is lost: the tail-loss probe sends that
// packet again after PTO, before the retransmission timer, once, and
// counts no timeout; the timer still runs if the probe finds nothing.
func TestTailLossProbe(t *testing.T) {
	tx, book := newTx(64)
	sendN(tx, 4, 1000) // 1..4
	tx.Ack(3, 1000+40_000)
	now := int64(1000 + 40_000)
	pto, rto := tx.PTO(), tx.RTO()
	if !tx.Probing() || pto >= rto {
		t.Fatalf("probing %v, PTO %d, RTO %d: want a probe before the timer", tx.Probing(), pto, rto)
	}
	if tx.Due(now + pto - 1) {
		t.Fatal("due before PTO")
	}
	if !tx.Due(now + pto) {
		t.Fatal("not due at PTO")
	}
	if e := tx.Expire(now+pto, 1); e != Probed {
		t.Fatalf("Expire at PTO: %v, want Probed", e)
	}
	var n [CauseProbe + 1]int
	var got []uint32
	n, _ = tx.Resend(now+pto, func(seq uint32) error { got = append(got, seq); return nil })
	if !eq(got, []uint32{4}) || n[CauseProbe] != 1 || n[CauseTimeout] != 0 {
		t.Fatalf("probe resent %v (causes %v), want [4] as a probe", got, n)
	}
	if book.Resends != 0 || tx.Probing() {
		t.Fatalf("after the probe: resends %d, probing %v", book.Resends, tx.Probing())
	}
	// No second probe for the same flight: only the timer is left.
	if tx.Due(now + rto - 1) {
		t.Fatal("due again before the timer")
	}
	e := tx.Expire(now+rto, 2)
	for p := uint64(3); e == Waiting; p++ {
		e = tx.Expire(now+rto, p)
	}
	if e != TimedOut {
		t.Fatalf("the timer after a probe: %v, want TimedOut", e)
	}
	// The probe's packet arrived: progress re-arms a probe for what is left.
	sendN(tx, 1, now+rto) // 5
	tx.Ack(4, now+rto+1000)
	if !tx.Probing() || tx.Unacked() != 1 {
		t.Fatalf("after progress: probing %v, unacked %d", tx.Probing(), tx.Unacked())
	}
	tx.Ack(5, now+rto+2000)
	if tx.Probing() || tx.Armed() || book.Timers != 0 {
		t.Fatalf("all acknowledged: probing %v, armed %v, timers %d", tx.Probing(), tx.Armed(), book.Timers)
	}
}

// On a medium that cannot lose (the 5 ms floor), no probe is armed: a
// slow peer there is an engine off its core, and the timer is enough.
func TestNoProbeOnLosslessFloor(t *testing.T) {
	b := &Book{}
	tx := NewTx(&Config{Window: 64, MaxTimeouts: 3, RTOFloor: LosslessRTO, Lossless: true}, b, 7)
	sendN(tx, 2, 1000)
	if tx.Probing() {
		t.Fatalf("a probe armed on the lossless floor (PTO %d, RTO %d)", tx.PTO(), tx.RTO())
	}
}

// A flight whose packets the receiver placed ahead of order (SACK) is
// probed with its last packet not placed.
func TestProbeSkipsSacked(t *testing.T) {
	tx, _ := newTx(64)
	sendN(tx, 5, 1000) // 1..5
	tx.Ack(1, 2000)
	tx.Gap(2, 4, 1<<1, 2000) // 2 missing, 4 placed ahead (bit 1: expect+2); 3 and 5 not heard of
	resent(tx, 2000)         // the gap's resends
	if !tx.Probing() {
		t.Fatal("no probe armed for the flight's tail")
	}
	now := int64(2000)
	if e := tx.Expire(now+tx.PTO(), 1); e != Probed {
		t.Fatalf("Expire: %v, want Probed", e)
	}
	if got := resent(tx, now+tx.PTO()); !eq(got, []uint32{5}) {
		t.Fatalf("probe resent %v, want [5] (the last packet not placed)", got)
	}
}

// On a medium that reports a gone peer itself, timeouts go on resending
// and backing off but never end the session: a peer starved of CPU is
// slow, and the medium says when it is dead.
func TestPeerWatchedTimeoutsNeverUnreachable(t *testing.T) {
	var b Book
	tx := NewTx(&Config{Window: 64, MaxTimeouts: 3, PeerWatched: true}, &b, 7)
	sendN(tx, 2, 0)
	if tx.Probing() { // the tail-loss probe comes first: 2 once more
		if e := tx.Expire(tx.Deadline(), 1); e != Probed {
			t.Fatalf("probe: %v", e)
		}
		if got := resent(tx, tx.Deadline()); !eq(got, []uint32{2}) {
			t.Fatalf("probe resent %v, want [2]", got)
		}
	}
	pass := uint64(100)
	timeouts := 0
	for range 10 {
		now := tx.Deadline()
		var last Expiry
		for p := range GracePasses + 1 {
			last = tx.Expire(now, pass+uint64(p))
		}
		pass += 10_000
		if last == Unreachable {
			t.Fatalf("timeout %d on a watched medium ended the session", timeouts+1)
		}
		if last == TimedOut {
			timeouts++
		}
		// F-RTO: the oldest alone, then (no ACK answered it) all.
		want := []uint32{1}
		if timeouts%2 == 0 {
			want = []uint32{1, 2}
		}
		if got := resent(tx, now); !eq(got, want) {
			t.Fatalf("timeout %d resent %v, want %v", timeouts, got, want)
		}
	}
	if timeouts != 10 {
		t.Fatalf("%d timeouts in 10 expiries", timeouts)
	}
	if tx.RTO() != MaxBackoff {
		t.Fatalf("interval %d after 10 timeouts, want the cap %d", tx.RTO(), MaxBackoff)
	}
}

// A port that queues packets (UDP's sender goroutine) puts the flight's
// tail on the medium after the probe was armed: the probe then counts
// from when the tail left, and still goes before the timer. Cancelling
// it (as the device did) left a lost tail to the timeout.
func TestProbeCountsFromDeparture(t *testing.T) {
	tx, book := newTx(64)
	sendN(tx, 1, 0)
	tx.Ack(1, 200_000)      // srtt 200 µs: PTO 400 µs, RTO 600 µs
	sendN(tx, 4, 1_000_000) // 2..5 queued at 1 ms
	pto := tx.PTO()
	now := tx.Deadline()
	if now != 1_000_000+pto {
		t.Fatalf("probe at %d, want %d", now, 1_000_000+pto)
	}
	// The port still holds packets: not due, and the probe waits (at
	// most until the timer).
	if tx.LeftAt(now, now) || !tx.Probing() || tx.Deadline() <= now {
		t.Fatalf("queued: due %v, probing %v, next %d", tx.Due(now), tx.Probing(), tx.Deadline())
	}
	// The tail left at 1.5 ms: the timer (armed at 1 ms) runs out first,
	// and both count from the departure, the probe still first.
	left := int64(1_500_000)
	now = tx.Deadline()
	if now >= left+pto {
		t.Fatalf("next look at %d, want it before %d", now, left+pto)
	}
	if tx.LeftAt(left, now) || tx.Deadline() != left+pto {
		t.Fatalf("left late: due %v, next %d, want %d", tx.Due(now), tx.Deadline(), left+pto)
	}
	now = tx.Deadline()
	if !tx.LeftAt(left, now) {
		t.Fatal("the probe is not due PTO after the tail left")
	}
	if e := tx.Expire(now, 1); e != Probed {
		t.Fatalf("Expire: %v, want Probed", e)
	}
	var got []uint32
	n, _ := tx.Resend(now, func(seq uint32) error { got = append(got, seq); return nil })
	if !eq(got, []uint32{5}) || n[CauseProbe] != 1 || n[CauseTimeout] != 0 {
		t.Fatalf("resent %v (causes %v), want [5] as a probe", got, n)
	}
	// Its ACK (the tail was the lost one; the rest arrived) retires all.
	tx.Ack(5, now+pto)
	if tx.Unacked() != 0 || tx.Armed() || book.Timers != 0 || book.Resends != 0 {
		t.Fatalf("after the probe's ACK: unacked %d armed %v book %+v", tx.Unacked(), tx.Armed(), *book)
	}
}

// A timer that ran out after the flight's last packet left long ago is a
// timeout: LeftAt moves nothing then.
func TestLeftAtLongAgoTimesOut(t *testing.T) {
	tx, _ := newTx(64)
	sendN(tx, 2, 0)
	if e := tx.Expire(tx.Deadline(), 1); e != Probed {
		t.Fatalf("probe: %v", e)
	}
	resent(tx, tx.Deadline())
	now := tx.Deadline()
	if !tx.LeftAt(0, now) {
		t.Fatal("a timer whose packets left at 0 is not due")
	}
	e := tx.Expire(now, 10)
	for p := uint64(11); e == Waiting; p++ {
		e = tx.Expire(now, p)
	}
	if e != TimedOut {
		t.Fatalf("Expire: %v, want TimedOut", e)
	}
}

// A timeout resends only the oldest packet the receiver lacks (F-RTO,
// RFC 5682); the ACK answering it decides for the rest of the flight.
func TestTimeoutResendsOldestThenDecides(t *testing.T) {
	timeout := func(tx *Tx) []uint32 {
		t.Helper()
		now := tx.Deadline()
		e := tx.Expire(now, 1)
		for p := uint64(2); e == Waiting || e == Probed; p++ {
			if e == Probed {
				resent(tx, now)
				now = tx.Deadline()
			}
			e = tx.Expire(now, p)
		}
		if e != TimedOut {
			t.Fatalf("Expire: %v, want TimedOut", e)
		}
		return resent(tx, now)
	}
	t.Run("spurious: the flight was on its way", func(t *testing.T) {
		tx, book := newTx(64)
		sendN(tx, 8, 0)
		if got := timeout(tx); !eq(got, []uint32{1}) {
			t.Fatalf("timeout resent %v, want [1]", got)
		}
		tx.Ack(8, tx.Deadline()-1) // the originals arrived: nothing more goes
		if tx.Resending() || book.Resends != 0 || tx.Unacked() != 0 {
			t.Fatalf("after the ACK of all: resending %v, book %+v, unacked %d", tx.Resending(), *book, tx.Unacked())
		}
	})
	t.Run("partly on its way", func(t *testing.T) {
		tx, _ := newTx(64)
		sendN(tx, 8, 0)
		timeout(tx)
		tx.Ack(3, tx.Deadline()-1) // more than the resent packet: alive
		if tx.Resending() {
			t.Fatalf("a flight shown alive was resent: %v", resent(tx, 0))
		}
	})
	t.Run("lost: only the resent packet arrived", func(t *testing.T) {
		tx, _ := newTx(64)
		sendN(tx, 5, 0)
		tx.Gap(1, 5, 1<<2, 0) // 4 placed ahead
		resent(tx, 0)         // the gap's resends: 1, 2, 3, 5
		if got := timeout(tx); !eq(got, []uint32{1}) {
			t.Fatalf("timeout resent %v, want [1]", got)
		}
		sendN(tx, 1, tx.Deadline()-2) // 6, sent after the timeout: not the lost flight's
		tx.Ack(1, tx.Deadline()-1)
		var n [CauseProbe + 1]int
		var got []uint32
		n, _ = tx.Resend(tx.Deadline()-1, func(seq uint32) error { got = append(got, seq); return nil })
		if !eq(got, []uint32{2, 3, 5}) || n[CauseTimeout] != 3 {
			t.Fatalf("after the ACK of 1 alone: resent %v (causes %v), want [2 3 5] for the timeout (4 placed, 6 new)", got, n)
		}
	})
	t.Run("no answer: the next timeout resends all", func(t *testing.T) {
		tx, _ := newTx(64)
		sendN(tx, 3, 0)
		timeout(tx)
		if got := timeout(tx); !eq(got, []uint32{1, 2, 3}) {
			t.Fatalf("second timeout resent %v, want [1 2 3]", got)
		}
	})
}

// On a lossless medium a packet may leave without a clock read: every
// sixteenth is timed, a flight's first arms the timer unstamped (it runs
// from the engine's next look at the timers), and an ACK whose oldest
// retired packet was untimed reads no clock either and gives no
// round-trip sample (it would count from a time the packet never left
// at). A medium that can lose times every packet and every ACK.
func TestUntimedPacketsOnLosslessMedia(t *testing.T) {
	b := &Book{}
	tx := NewTx(&Config{Window: 64, MaxTimeouts: 3, RTOFloor: LosslessRTO, Lossless: true}, b, 7)
	if tx.NeedsClock() {
		t.Fatal("an empty flight's first packet reads the clock on a lossless medium")
	}
	tx.Next()
	tx.SentUntimed()
	if !tx.Armed() || b.Timers != 1 {
		t.Fatalf("an untimed first packet left the timer unarmed (armed %v, %d timers)", tx.Armed(), b.Timers)
	}
	if tx.Due(1 << 62) {
		t.Fatal("an unstamped timer came due")
	}
	tx.Stamp(1000) // the engine's first look at the timers
	if tx.deadline != 1000+LosslessRTO {
		t.Fatalf("stamped at 1000: deadline %d, want %d", tx.deadline, 1000+LosslessRTO)
	}
	deadline := tx.deadline
	timed := 0
	for i := 1; i < 40; i++ {
		tx.Next()
		if tx.NeedsClock() {
			tx.Sent(1000 + int64(i))
			timed++
		} else {
			tx.SentUntimed()
		}
	}
	if timed != 2 { // packets 16 and 32
		t.Fatalf("%d of 40 packets timed, want 2 (every sixteenth)", timed)
	}
	if tx.deadline != deadline {
		t.Fatalf("later packets moved the timer: %d, was %d", tx.deadline, deadline)
	}
	if tx.AckNeedsClock(1) {
		t.Fatal("an ACK retiring an untimed packet reads the clock on a lossless medium")
	}
	tx.AckUntimed(1)
	if tx.deadline != unstamped || b.Timers != 1 {
		t.Fatalf("an untimed ACK with packets left: deadline %d, %d timers; want it re-armed unstamped", tx.deadline, b.Timers)
	}
	tx.Stamp(2000)
	if tx.srtt != 0 {
		t.Fatalf("srtt %d after untimed ACKs, want no sample", tx.srtt)
	}
	tx.AckUntimed(15)
	if !tx.AckNeedsClock(16) {
		t.Fatal("the ACK of a timed packet gives no sample")
	}
	tx.Ack(16, 5015) // retires the timed packet sent at 1015: a 4000 ns sample
	if tx.srtt != 4000 {
		t.Fatalf("srtt %d after the timed packet's ACK, want 4000", tx.srtt)
	}
	tx.AckUntimed(40)
	if tx.Armed() || b.Timers != 0 {
		t.Fatalf("everything acknowledged: armed %v, %d timers", tx.Armed(), b.Timers)
	}

	// A peer that stopped: the unstamped timer, once stamped, runs out.
	tx.Next()
	tx.SentUntimed()
	tx.Stamp(10_000)
	if tx.Due(10_000+LosslessRTO-1) || !tx.Due(10_000+LosslessRTO) {
		t.Fatal("a stamped timer does not run out after its RTO")
	}

	lossy, _ := newTx(64)
	for range 20 {
		lossy.Next()
		if !lossy.NeedsClock() {
			t.Fatal("a packet on a medium that can lose may leave untimed: its probe and sample need the time")
		}
		lossy.Sent(1000)
	}
	if !lossy.AckNeedsClock(1) {
		t.Fatal("an ACK on a medium that can lose may come untimed")
	}
}

// exchange is one request-reply round: a packet sent at now whose ACK
// (riding the reply) comes rtt later; it reports whether the sender's
// timer or probe came due first (a resend that would be spurious).
func exchange(tx *Tx, now, rtt int64) (due bool) {
	sendN(tx, 1, now)
	due = tx.Due(now + rtt - 1)
	tx.Ack(tx.Next()-1, now+rtt)
	return due
}

// In request-reply traffic the ACK rides the answer, so the round trip a
// sender times includes the peer's turnaround, which has a heavy tail on
// a shared core: a replier preempted answers late for a while. The first
// late answer finds the probe due (the timers cannot know yet, and a loss
// must still be found within two round trips), but once the peer has
// shown it, its timers keep past it (the variance term) and the answers
// that follow find nothing due, where a rule of twice the smoothed round
// trip probed every one of them.
func TestLateRepliesAreNotProbed(t *testing.T) {
	tx, _ := newTx(64)
	now := int64(1_000_000)
	for range 64 {
		if exchange(tx, now, 30_000) {
			t.Fatal("a 30 µs answer found a timer due")
		}
		now += 100_000
	}
	if pto := tx.PTO(); pto > 2*30_000 {
		t.Fatalf("steady peer: PTO %d, want at most two round trips", pto)
	}
	var due []bool
	for range 8 {
		due = append(due, exchange(tx, now, 240_000))
		now += 1_000_000
	}
	if !due[0] {
		t.Fatalf("the first 240 µs answer found no probe due (PTO %d): a loss would wait as long", tx.PTO())
	}
	for i, d := range due[1:] {
		if d {
			t.Fatalf("late answer %d found a timer or probe due after the first (PTO %d, RTO %d, srtt %d, rttvar %d)",
				i+2, tx.PTO(), tx.RTO(), tx.SRTT(), tx.RTTVar())
		}
	}
	if tx.PTO() >= tx.RTO() {
		t.Fatalf("PTO %d not before RTO %d: the probe must come first", tx.PTO(), tx.RTO())
	}
}

// learnedTx is a Tx that has timed 16 request-reply round trips of 20 µs,
// 100 µs apart, and the time after them.
func learnedTx() (*Tx, int64) {
	tx, _ := newTx(64)
	now := int64(1_000_000)
	for range 16 {
		exchange(tx, now, 20_000)
		now += 100_000
	}
	return tx, now
}

// A resend whose ACK comes sooner than half the fastest round trip seen
// answers the first transmission: it is counted spurious, and the first
// transmission's round trip is learned, so the same late answer next time
// finds no probe due. A resend answered after a full round trip (a real
// loss) is neither counted nor sampled (Karn).
func TestSpuriousProbeFoundByAckTiming(t *testing.T) {
	tx, now := learnedTx()
	sendN(tx, 1, now)
	pto := tx.PTO()
	if e := tx.Expire(now+pto, 1); e != Probed {
		t.Fatalf("Expire at PTO: %v, want Probed", e)
	}
	resent(tx, now+pto)
	// The answer to the first transmission comes 2 µs after the probe left.
	lateRTT := pto + 2_000
	tx.Ack(tx.Next()-1, now+lateRTT)
	if tx.Spurious() != 1 {
		t.Fatalf("spurious %d, want 1", tx.Spurious())
	}
	// The same late answer again finds nothing due: the round trip was
	// learned.
	if exchange(tx, now+1_000_000, lateRTT) {
		t.Fatalf("a second answer %d µs late found a probe due (PTO %d -> %d)", lateRTT/1000, pto, tx.PTO())
	}

	// A real loss: the probe's own answer, a full round trip later.
	lossy, now := learnedTx()
	srtt := lossy.SRTT()
	sendN(lossy, 1, now)
	pto = lossy.PTO()
	lossy.Expire(now+pto, 1)
	resent(lossy, now+pto)
	lossy.Ack(lossy.Next()-1, now+pto+20_000)
	if lossy.Spurious() != 0 || lossy.SRTT() != srtt {
		t.Fatalf("a real loss: spurious %d, srtt %d -> %d, want 0 and unchanged", lossy.Spurious(), srtt, lossy.SRTT())
	}
}

// A packet resent twice whose ACK comes just after the second resend may
// answer the first resend, not the original: Karn's rule holds (no
// sample, nothing counted spurious), or the round trip would be learned
// a whole PTO too long.
func TestTwiceResentPacketNotSampled(t *testing.T) {
	tx, now := learnedTx()
	srtt := tx.SRTT()
	sendN(tx, 1, now)
	pto := tx.PTO()
	if e := tx.Expire(now+pto, 1); e != Probed {
		t.Fatalf("Expire at PTO: %v, want Probed", e)
	}
	resent(tx, now+pto)
	again := now + pto + tx.RTO() // the probe's timer runs out too
	tx.Expire(again, 2)
	if e := tx.Expire(again, 2+GracePasses); e != TimedOut || len(resent(tx, again)) != 1 {
		t.Fatalf("Expire at the probe's RTO after the grace: %v, want TimedOut and one resend", e)
	}
	tx.Ack(tx.Next()-1, again+2_000)
	if tx.Spurious() != 0 || tx.SRTT() != srtt {
		t.Fatalf("spurious %d, srtt %d -> %d: want 0 and unchanged", tx.Spurious(), srtt, tx.SRTT())
	}
}

// Book.Soonest is never later than an armed deadline, follows Settle, and
// goes to 0 with the last timer; LostTwiceSince follows timer-driven
// resends.
func TestBookSoonestAndLostAt(t *testing.T) {
	b := &Book{}
	cfg := &Config{Window: 64, MaxTimeouts: 3}
	x, y := NewTx(cfg, b, 1), NewTx(cfg, b, 2)
	sendN(x, 1, 1_000_000)
	sendN(y, 1, 1_010_000)
	if s := b.Soonest(); s == 0 || s > x.Deadline() || s > y.Deadline() {
		t.Fatalf("soonest %d, deadlines %d and %d", s, x.Deadline(), y.Deadline())
	}
	x.Ack(x.Next()-1, 1_020_000) // x done: y's is the one left
	b.Settle(y.Deadline())
	if b.Soonest() != y.Deadline() {
		t.Fatalf("after Settle: soonest %d, want %d", b.Soonest(), y.Deadline())
	}
	at := y.Deadline()
	if e := y.Expire(at, 1); e != Probed {
		t.Fatalf("Expire: %v, want Probed", e)
	}
	if b.LostTwiceSince() != 0 {
		t.Fatalf("LostTwiceSince %d after one resend, want 0", b.LostTwiceSince())
	}
	resent(y, at)
	sendN(x, 1, at)
	at2 := x.Deadline()
	if e := x.Expire(at2, 2); e != Probed {
		t.Fatalf("Expire: %v, want Probed", e)
	}
	if b.LostTwiceSince() != at {
		t.Fatalf("LostTwiceSince %d after resends at %d and %d, want the first", b.LostTwiceSince(), at, at2)
	}
	resent(x, at2)
	x.Ack(x.Next()-1, at2+10_000)
	y.Ack(y.Next()-1, at+10_000)
	if b.Timers != 0 || b.Soonest() != 0 {
		t.Fatalf("nothing armed: timers %d, soonest %d", b.Timers, b.Soonest())
	}
}

// The variance guards a lone packet only: a flight of several keeps the
// probe at twice the smoothed round trip (its ACKs come from the
// receiver's passes, not from an answer), and a stream's packets teach
// the mean deviation nothing.
func TestVarianceGuardsLonePackets(t *testing.T) {
	tx, _ := newTx(64)
	now := int64(1_000_000)
	for i := range 16 {
		rtt := int64(30_000)
		if i%2 == 1 {
			rtt = 200_000
		}
		exchange(tx, now, rtt)
		now += 1_000_000
	}
	sendN(tx, 1, now)
	lone := tx.PTO()
	sendN(tx, 3, now)
	flight := tx.PTO()
	if want := max(2*tx.SRTT(), MinBackoff/2); flight != want || lone <= flight {
		t.Fatalf("PTO lone %d, of a flight of 4 %d: want the flight's %d and the lone one above it", lone, flight, want)
	}
	tx.Ack(tx.Next()-1, now+30_000)
	v := tx.RTTVar()
	for range 8 {
		sendN(tx, 4, now)
		tx.Ack(tx.Next()-1, now+400_000)
		now += 1_000_000
	}
	if tx.RTTVar() != v {
		t.Fatalf("streamed flights moved RTTVAR %d -> %d", v, tx.RTTVar())
	}
}

// TestLosslessStreamAckedInPiecesLearnsRTT: on a lossless medium one
// packet in 16 is timed; flights of 64 acknowledged 8 at a time (as a
// receiver ACKs a stream) must still teach the round trip, though the
// oldest packet each ACK retires is seldom the timed one.
func TestLosslessStreamAckedInPiecesLearnsRTT(t *testing.T) {
	b := &Book{}
	tx := NewTx(&Config{Window: 64, MaxTimeouts: 3, Lossless: true, RTOFloor: LosslessRTO}, b, 7)
	now := int64(1_000_000)
	learned := 0
	for f := range 100 {
		for range 64 {
			if tx.NeedsClock() {
				tx.Sent(now)
			} else {
				tx.SentUntimed()
			}
		}
		now += 1000 + int64(f)*1000 // the round trip grows each flight
		before := tx.SRTT()
		for range 8 {
			ack := tx.Acked() + 8
			if tx.AckNeedsClock(ack) {
				tx.Ack(ack, now)
			} else {
				tx.AckUntimed(ack)
			}
		}
		if tx.SRTT() != before {
			learned++
		}
	}
	if learned < 90 {
		t.Fatalf("%d of 100 flights taught the round trip (SRTT %d ns, true %d ns)", learned, tx.SRTT(), 100_000)
	}
	if srtt := tx.SRTT(); srtt < 50_000 {
		t.Fatalf("SRTT %d ns after flights whose round trip grew to 100 µs", srtt)
	}
}
