package vdev

import (
	"sync/atomic"

	"github.com/dimmnet/dimmnet/uapi"
)

// A checked device (Config.Check) validates the driver's side of the
// datasheet and reports what it sees broken into the VIOLATIONS counter
// and the violation log (uapi.ViolationDocs lists the rules). Real
// hardware hides these mistakes until they corrupt something; this device
// sees every word it polls, so it can name them. It never changes what
// the device does: every check reads, compares and reports, nothing else.
// Unchecked, d.chk is nil and no check costs more than that test.

// doorbellGrace is how long after the engine found a command on its
// sleep's timeout a doorbell still counts as rung for it: a driver that
// read DEV_SLEEP = 1 an instant before the timer fired rings within
// microseconds (an eventfd wake-up is 10-20 µs here), so 2 ms never
// reports a legitimate race.
const doorbellGrace = 2_000_000

// amtEvery is how often (in passes) the checker looks at every AMT entry
// rather than only the valid ones: most of a driver's 64 entries are
// unused, and looking at each every pass doubled the round trip.
const amtEvery = 64

// checker is a checked device's memory of what the driver's words should
// hold.
type checker struct {
	d      *Device
	ro     []uint32 // read-only words compared on every pass
	shadow []uint64 // what they held when the device's last pass ended

	statHead uint64     // the last STATQ_HEAD seen
	amt      []amtWatch // per AMT entry
	live     []uint64   // entries valid at the last full look: looked at every pass
	passes   uint64

	// missing doorbells: what the engine left when it fell asleep, and a
	// command published while it slept that only its timer found (a
	// suspect until doorbellGrace has passed)
	bells     uint64        // DOORBELLS when the engine fell asleep
	sleptAt   uint64        // the command index at the head then
	sleptBusy bool          // that slot was already published (a blocked head)
	polled    atomic.Bool   // a driver in this process ran the device (or tried) since the engine fell asleep
	polls     atomic.Uint64 // every such run or try: one after the suspicion clears it too
	suspect   bool
	suspIdx   uint64
	suspAt    int64
	suspPolls uint64 // polls when the suspicion began
	suspStat  uint64 // STATQ_HEAD when the suspicion began (see movedOn)
	suspBells uint64 // DOORBELLS then: a later sleep's count must not hide a late ring

	overrunAt uint64 // the command index last reported overrun, plus 1

	// a skipped index: since when the head's slot has been unpublished
	// with a later one published (0: not so), at which head, and the
	// head last reported, plus 1
	skipAt       int64
	skipHead     uint64
	skipReported uint64

	// the log's rate limit
	seq      uint64 // violations logged
	window   int64  // start of the current second
	inWindow int
}

// amtWatch is what the checker saw of one AMT entry.
type amtWatch struct {
	base, cfg, head, tail uint64
}

// excludedRO are read-only words the device also stores outside its
// passes (the engine's heartbeat and sleep, doorbell goroutines, a
// shutdown): the pass-to-pass comparison cannot tell those stores from a
// driver's.
var excludedRO = map[uint32]bool{
	uapi.RegAlive: true, uapi.RegDevSleep: true, uapi.RegState: true,
	uapi.CtrDoorbells.Off(): true, uapi.CtrSleeps.Off(): true,
	// mirrored from the port by the heartbeat
	uapi.CtrLinkRxDropped.Off(): true, uapi.CtrLinkTxErrors.Off(): true,
	uapi.CtrRxUnknownPeer.Off(): true, uapi.CtrRxSpoofed.Off(): true,
	uapi.CtrAuthFail.Off(): true, uapi.CtrAuthReplay.Off(): true, uapi.CtrAuthSessions.Off(): true,
	// moved by the checks themselves
	uapi.CtrViolations.Off(): true,
}

func newChecker(d *Device) *checker {
	c := &checker{d: d, amt: make([]amtWatch, d.g.AMTEntries)}
	for _, r := range uapi.Registers {
		if r.Access == uapi.RO && !excludedRO[r.Off] {
			c.ro = append(c.ro, r.Off)
		}
	}
	for k := uapi.Counter(0); k < uapi.NumCounters; k++ {
		if !excludedRO[k.Off()] {
			c.ro = append(c.ro, k.Off())
		}
	}
	for i := range uapi.NumTrace {
		c.ro = append(c.ro, uapi.RegTrace+8*uint32(i))
	}
	c.shadow = make([]uint64, len(c.ro))
	return c
}

// snap records the read-only words as the device left them: called when
// a pass (or the heartbeat) ends.
func (c *checker) snap() {
	for i, off := range c.ro {
		c.shadow[i] = c.d.r.Load64(off)
	}
}

// pass runs the checks that look at the driver's words, at the start of
// a pass: what changed since the device's last store is the driver's.
func (c *checker) pass() {
	d := c.d
	for i, off := range c.ro {
		if v := d.r.Load64(off); v != c.shadow[i] {
			c.report(uapi.Violation{Kind: uapi.VioReadOnly, Where: uint64(off), Expected: c.shadow[i], Got: v})
			c.shadow[i] = v // once: the device goes on from what is there
		}
	}
	if h := d.r.Load64(uapi.RegStatqHead); h != c.statHead {
		switch {
		case int64(h-c.statHead) < 0:
			c.report(uapi.Violation{Kind: uapi.VioStatusHead, Index: h, Where: uapi.RegStatqHead, Expected: c.statHead, Got: h})
		case int64(h-d.statTail) > 0:
			c.report(uapi.Violation{Kind: uapi.VioStatusHead, Index: h, Where: uapi.RegStatqHead, Expected: d.statTail, Got: h})
		}
		c.statHead = h
	}
	// Every AMT entry once in amtEvery passes (a driver setting one up
	// is seen within them), the valid ones every pass.
	if c.passes++; c.passes%amtEvery == 1 {
		c.live = c.live[:0]
		for i := range c.amt {
			c.amtEntry(uint64(i))
			if c.amt[i].cfg>>32&uapi.AMTFlagValid != 0 {
				c.live = append(c.live, uint64(i))
			}
		}
	} else {
		for _, i := range c.live {
			c.amtEntry(i)
		}
	}
	c.settle()
}

// settle decides a NO_DOORBELL suspicion once it can: cleared if the
// driver rang or ran the device since, reported once the driver moved on
// past the grace.
func (c *checker) settle() {
	if !c.suspect {
		return
	}
	d := c.d
	switch {
	case d.r.Load64(uapi.CtrDoorbells.Off()) != c.suspBells || c.polls.Load() != c.suspPolls:
		c.suspect = false // it rang, or ran the device: late, not missing
	case d.now()-c.suspAt > doorbellGrace && c.movedOn():
		c.suspect = false
		c.report(uapi.Violation{Kind: uapi.VioNoDoorbell, Index: c.suspIdx,
			Where: d.cmdSlot(c.suspIdx) + uapi.DescSeqOff, Expected: c.suspBells + 1, Got: c.suspBells})
	}
}

// amtEntry checks AMT entry i: its set-up words do not change while its
// ring holds data, and its HEAD only moves forwards, up to TAIL.
func (c *checker) amtEntry(i uint64) {
	d := c.d
	e := d.g.AMTOff + i*uapi.AMTSize
	w := &c.amt[i]
	base, cfg := d.r.Load64At(e+uapi.AMTBase), d.r.Load64At(e+uapi.AMTCfg)
	head, tail := d.r.Load64At(e+uapi.AMTHead), d.r.Load64At(e+uapi.AMTTail)
	valid := cfg>>32&uapi.AMTFlagValid != 0
	wasValid := w.cfg>>32&uapi.AMTFlagValid != 0
	if base != w.base || cfg != w.cfg || int64(tail-w.tail) < 0 {
		// Set up anew (TAIL only moves forwards unless the driver starts
		// the ring over, which may happen between two looks).
		if wasValid && w.head != w.tail { // it held data: the driver set it up anew under the device
			where, old, now := e+uapi.AMTCfg, w.cfg, cfg
			switch {
			case base != w.base:
				where, old, now = e+uapi.AMTBase, w.base, base
			case cfg == w.cfg:
				where, old, now = e+uapi.AMTTail, w.tail, tail
			}
			c.report(uapi.Violation{Kind: uapi.VioAMTChanged, Index: i, Where: where, Expected: old, Got: now})
		}
		*w = amtWatch{base: base, cfg: cfg, head: head, tail: tail}
		return
	}
	w.tail = tail
	if !valid || head == w.head {
		return
	}
	switch {
	case int64(head-w.head) < 0:
		c.report(uapi.Violation{Kind: uapi.VioAMTHead, Index: i, Where: e + uapi.AMTHead, Expected: w.head, Got: head})
	case int64(head-tail) > 0:
		c.report(uapi.Violation{Kind: uapi.VioAMTHead, Index: i, Where: e + uapi.AMTHead, Expected: tail, Got: head})
	}
	w.head = head
}

// desc checks, as command idx completes, that its slot still holds what
// the device took, unless the slot was published again since, or the
// driver has reached the slot's next lap: once CMDQ_HEAD has passed a
// slot the driver may rewrite it for index idx + CMDQ_ENTRIES (the device
// keeps its own copy) before that command's SEQ is stored, and it has
// when it published idx + CMDQ_ENTRIES - 1, the index before it. A
// command in flight for long (an IPUSH held by a full ring) saw its slot
// rewritten so and was reported DESC_CHANGED.
func (c *checker) desc(taken *uapi.Desc, idx uint64) {
	d := c.d
	slot := d.cmdSlot(idx)
	if d.r.Load64At(slot+uapi.DescSeqOff) != idx+1 {
		return
	}
	n := d.g.CmdqEntries
	if prev := idx + n - 1; d.cmdHead > prev || c.publishedLap(prev) {
		return
	}
	now := d.r.ReadWords8(slot)
	was := taken.Words()
	for i := range uapi.DescSeqOff / 8 {
		if now[i] != was[i] {
			c.report(uapi.Violation{Kind: uapi.VioDescChanged, Index: idx, Where: slot + uint64(8*i), Expected: was[i], Got: now[i]})
			return
		}
	}
}

// overrun checks the SEQ word found at the head's slot when it is not the
// head's: a later lap's means the driver overwrote a command the device
// had not taken.
func (c *checker) overrun(idx, seq uint64) {
	n := c.d.g.CmdqEntries
	if seq > idx+1 && (seq-idx-1)%n == 0 && c.overrunAt != idx+1 {
		c.overrunAt = idx + 1 // once: the slot stays overrun until the driver mends it
		c.report(uapi.Violation{Kind: uapi.VioSlotOverrun, Index: idx, Where: c.d.cmdSlot(idx) + uapi.DescSeqOff, Expected: idx + 1, Got: seq})
	}
}

// published reports whether the command slot at idx is published.
func (c *checker) published(idx uint64) bool {
	return c.d.r.Load64At(c.d.cmdSlot(idx)+uapi.DescSeqOff) == idx+1
}

// publishedLap reports whether idx, or the same slot in a later lap, is
// published.
func (c *checker) publishedLap(idx uint64) bool {
	seq := c.d.r.Load64At(c.d.cmdSlot(idx) + uapi.DescSeqOff)
	return seq >= idx+1 && (seq-idx-1)%c.d.g.CmdqEntries == 0
}

// skipGrace is how long a command published ahead of an unpublished head
// must stay so before it is reported SKIPPED_INDEX: a driver whose
// threads reserve indexes may publish them out of order for a moment
// (one thread preempted between reserving and publishing), never for a
// second.
const skipGrace = 1_000_000_000

// skipped looks, when the engine falls asleep or its timer wakes it,
// for a command published ahead of the head while the head's own slot
// is not: the driver skipped an index (or started at the wrong one) and
// the queue is stalled for good. It scans the ring (CMDQ_ENTRIES loads,
// at most every idle period) and reports the stall once, after
// skipGrace: INDEX the index the device waits at, GOT the first index
// published ahead of it, plus 1.
func (c *checker) skipped() {
	d := c.d
	head := d.cmdHead
	if c.published(head) || c.skipReported == head+1 {
		c.skipAt = 0
		return
	}
	var ahead uint64
	for k := uint64(1); k < d.g.CmdqEntries; k++ {
		if c.published(head + k) {
			ahead = head + k
			break
		}
	}
	switch {
	case ahead == 0:
		c.skipAt = 0
	case c.skipAt == 0 || c.skipHead != head:
		c.skipAt, c.skipHead = d.now(), head
	case d.now()-c.skipAt >= skipGrace:
		c.skipReported, c.skipAt = head+1, 0
		c.report(uapi.Violation{Kind: uapi.VioSkippedIndex, Index: head, Where: d.cmdSlot(head) + uapi.DescSeqOff,
			Expected: head + 1, Got: ahead + 1})
	}
}

// movedOn reports that the driver suspected of a missing doorbell has run
// on since it published the command: it published the next one or took a
// status. Only then is the doorbell missing rather than late: a driver
// descheduled between its publish and its doorbell (for far longer than
// doorbellGrace when the host is busy) rings when it runs again, and was
// reported NO_DOORBELL under load when the grace alone decided.
func (c *checker) movedOn() bool {
	return c.published(c.suspIdx+1) || c.d.r.Load64(uapi.RegStatqHead) != c.suspStat
}

// sleeping notes that the engine falls asleep on the device (DEV_SLEEP is
// 1 and it has looked at the queue once more).
func (c *checker) sleeping() {
	c.skipped()
	c.bells = c.d.r.Load64(uapi.CtrDoorbells.Off())
	c.polled.Store(false)
	c.sleptAt = c.d.cmdHead
	c.sleptBusy = c.published(c.d.cmdHead)
}

// timerWoke notes that the engine's sleep ended by its timer, before it
// stores DEV_SLEEP = 0: a command at the head now, not there when it fell
// asleep, was published while DEV_SLEEP was 1; with no doorbell and no
// driver running the device since, it is a suspect (a doorbell within
// doorbellGrace still clears it).
func (c *checker) timerWoke() {
	// The suspicion from the last sleep is decided first: its driver
	// moved on (published this command) while the engine slept, and a
	// new suspicion must not overwrite it unreported. A driver whose
	// commands each found the device asleep was reported for none of
	// them when the engine, starved, slept through every grace.
	c.settle()
	c.skipped()
	idx := c.d.cmdHead
	// A suspicion still undecided (its grace not passed) is kept: the
	// engine wakes every 50 µs while frames are unacknowledged, and a
	// driver's next command found by one of those wakes replaced it, so
	// each suspicion of a fast driver gave way to the next until only the
	// last was left, undecided when the program exited (conform passed a
	// driver that never rings, about one run in eight).
	if c.suspect || c.polled.Load() || idx != c.sleptAt || c.sleptBusy || !c.published(idx) ||
		c.d.r.Load64(uapi.CtrDoorbells.Off()) != c.bells {
		return
	}
	c.suspect, c.suspIdx, c.suspAt, c.suspPolls = true, idx, c.d.now(), c.polls.Load()
	c.suspStat, c.suspBells = c.d.r.Load64(uapi.RegStatqHead), c.bells
}

// driverPolled notes that a driver in this process ran the device, or
// found it held by another goroutine (the engine) and woke the engine if
// it slept: either way it owes no doorbell for what it published. The
// driver's try can fall between the engine's timer wake-up and its look
// at the head (timerWoke holds the device), so it also clears a suspicion
// made since: a driver that runs the device after each post was reported
// NO_DOORBELL under load otherwise.
func (c *checker) driverPolled() {
	c.polled.Store(true)
	c.polls.Add(1)
}

// report counts a violation and logs it within the rate limit.
func (c *checker) report(v uapi.Violation) {
	d := c.d
	d.countShared(uapi.CtrViolations, 1)
	now := d.now()
	if now-c.window >= 1_000_000_000 {
		c.window, c.inWindow = now, 0
	}
	if c.inWindow < uapi.ViolLogPerSecond {
		c.inWindow++
		c.seq++
		v.Seq, v.Time = c.seq, uint64(now)
		d.r.WriteViolation(v)
	}
	if t := d.tracer.Load(); t != nil {
		t.emit(d, Event{Kind: EvViolation, Viol: v}) // every one, logged (Seq set) or not
	}
}
