package vdev

// The completer (the role of rxe_comp.c): everything that ends a command
// and everything the driver reads back. It applies what a peer's frame
// says of our sending (control: its ACK, a NACK's gap, retry or refusal),
// retires acknowledged packets and completes their commands in posting
// order (retire, finish), fails a peer's commands when it is unreachable
// (failPeer) or its PULL responses stop (the PULL guard), and owns the
// status ring: statuses are posted in order, held (compQ) while the ring
// is full, and a sleeping driver is interrupted after them.

import (
	"cmp"
	"encoding/binary"
	"runtime"
	"slices"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/transport"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// control applies what a frame from p says about our sending to p: its
// piggybacked cumulative ACK, and for an ACK or NACK frame the rest.
//
// All of that is about one of our sending sessions, the one the frame's
// Tag names; a late frame about a session we have since ended (the peer
// was unreachable) names numbers our new session uses again, from 1, and
// says nothing of it: its ACK would complete commands p never received,
// its refusal fail one p never saw. Such a frame is counted in
// DUPLICATES; a data frame's stale ACK is only ignored.
func (d *Device) control(p *peer, h *wire.Header) {
	before := p.tx.Acked()
	nack := h.Type == wire.TypeNack
	if nack {
		d.count(uapi.CtrNACKsRx, 1)
		if c := h.Code; c != wire.NackRetry && c != wire.NackSeqErr && (c > wire.NackRefusalMax || uapi.Errno(c) >= uapi.NumErrnos) {
			// A code the datasheet does not name: a peer speaking another
			// protocol, or a forgery. A command never fails with it.
			d.count(uapi.CtrRxBadNack, 1)
			return
		}
	}
	if h.Flags&wire.FlagAckValid == 0 && !nack && (h.Type != wire.TypeAck || h.Flags&wire.FlagHold == 0) {
		return // nothing about our sending
	}
	if h.Flags&wire.FlagTagged != 0 || h.Tag != p.tx.Epoch() {
		if h.Type == wire.TypeAck || nack {
			d.count(uapi.CtrDuplicates, 1)
		}
		return
	}
	// The clock only when something below uses it: a stream's receiver
	// gets data frames repeating an ACK that moves nothing, and a clock
	// read per frame was on its path.
	// On a lossless medium an ACK that retires untimed packets needs none
	// either (transport.Tx.AckNeedsClock).
	var now int64
	timed := nack || h.Type == wire.TypeAck && h.Flags&wire.FlagHold != 0 || h.Flags&wire.FlagAckValid != 0 && p.tx.AckNeedsClock(h.Ack)
	if timed {
		now = d.now()
	}
	if c := h.Code; nack && c != wire.NackRetry && c <= wire.NackRefusalMax {
		// Only a refusal NACK's ACK field covers the refused packet (every
		// other ACK is held below it until we confirm): record the reason
		// first, or the ACK completes its command as if it had succeeded
		// (and a refused PULL never completes). Confirm every refusal
		// NACK, repeats too: a lost confirmation makes the peer repeat it.
		d.refused(p, h.Seq, uapi.Errno(c), h.Imm)
		d.sendCtl(p, wire.TypeAck, h.Seq, p.tx.Epoch(), wire.FlagRefused)
	}
	// The cumulative ACK goes before what a NACK asks: a gap report, a
	// retry or a resume acknowledges nothing by its Seq (see
	// transport.Tx.Gap).
	if h.Flags&wire.FlagAckValid != 0 {
		if timed {
			p.tx.Ack(h.Ack, now)
		} else {
			p.tx.AckUntimed(h.Ack)
		}
	}
	if nack {
		switch c := h.Code; {
		case c == wire.NackSeqErr:
			var sack uint64
			if h.Flags&wire.FlagSack != 0 {
				sack = h.Imm
			}
			p.tx.Gap(h.Seq, uint32(h.Addr), sack, now)
		case c == wire.NackRetry && h.Flags&wire.FlagHold != 0:
			p.tx.Resume(h.Seq, now)
		case c == wire.NackRetry:
			p.tx.Retry(h.Seq, now)
		}
	}
	if h.Type == wire.TypeAck && h.Flags&wire.FlagHold != 0 {
		p.tx.Alive(now) // the peer is there, only holding: not unreachable
	}
	if p.tx.Acked() != before {
		d.retire(p, before)
	}
}

// deferAck keeps the ACK field of a data frame from p for the device's
// next pass, on a lossless medium, when applying it needs no clock (it
// retires untimed packets, transport.Tx.AckNeedsClock) and the frame is
// of our current session; it reports whether it kept it. In a ping-pong
// every message carries the ACK of the one before it, and retiring that
// command before the message is placed put it on the path of every
// reply: the driver sees its status only when the pass ends. The next
// pass applies it (step, after its receive; a send-only pass, after the
// commands left), and anything that acts on our sending's state applies
// it first: a NACK's or ACK's control, failPeer. Nothing is lost by the
// wait on a medium that cannot lose: a retransmission timer runs out
// only in a pass that applied it first. Any other frame from p applies
// what p's earlier frames left, so ACKs apply in order.
func (d *Device) deferAck(p *peer, h *wire.Header) bool {
	if !d.tcfg.Lossless || h.Type == wire.TypeAck || h.Type == wire.TypeNack ||
		h.Flags&(wire.FlagAckValid|wire.FlagSeq|wire.FlagTagged) != wire.FlagAckValid|wire.FlagSeq ||
		h.Tag != p.tx.Epoch() || !p.tx.Advances(h.Ack) || p.tx.AckNeedsClock(h.Ack) || signalledUpTo(p, h.Ack) {
		d.settleAck(p)
		return false
	}
	if !p.lazy {
		p.lazy = true
		d.lazyPeers = append(d.lazyPeers, p)
	} else if int32(h.Ack-p.lazyAck) <= 0 {
		return true // no news
	}
	p.lazyAck, p.lazyEpoch = h.Ack, h.Tag
	return true
}

// signalledUpTo reports whether an ACK of ack to p retires more than
// unsignalled PUSHes and IPUSHes, whose completion posts nothing: a DONE
// (or a refused command's ERROR, a PAGE's, a PULL's or an atomic's
// progress, a PULL response's release) goes before the status of the
// frame that carried the ACK, as it always did (a reply's arrival is
// never seen before its request's DONE).
func signalledUpTo(p *peer, ack uint32) bool {
	n := min(int(ack-p.tx.Acked()), len(p.sent))
	for i := range n {
		e := &p.sent[i]
		if e.j != nil && (e.j.desc.Flags&uapi.FlagSignal != 0 || e.j.err != uapi.EOK || e.j.desc.Opcode != uapi.OpPUSH && e.j.desc.Opcode != uapi.OpIPUSH) {
			return true // a DONE, or a refused command's ERROR
		}
		if e.batch != nil {
			for _, j := range e.batch.jobs {
				if j.desc.Flags&uapi.FlagSignal != 0 || j.err != uapi.EOK {
					return true
				}
			}
		}
		if e.r != nil {
			return true // a PULL response: retire drops it (respJobs)
		}
	}
	return false
}

// settleAck applies the ACK deferAck kept for p, if any.
func (d *Device) settleAck(p *peer) {
	if !p.lazy {
		return
	}
	p.lazy = false
	if p.lazyEpoch != p.tx.Epoch() {
		return // that session ended meanwhile: it acknowledges nothing now
	}
	before := p.tx.Acked()
	if p.tx.AckNeedsClock(p.lazyAck) { // a packet resent since
		p.tx.Ack(p.lazyAck, d.now())
	} else {
		p.tx.AckUntimed(p.lazyAck)
	}
	if p.tx.Acked() != before {
		d.retire(p, before)
	}
}

// settleAcks applies every ACK deferAck kept.
func (d *Device) settleAcks() {
	for _, p := range d.lazyPeers {
		d.settleAck(p)
	}
	clear(d.lazyPeers)
	d.lazyPeers = d.lazyPeers[:0]
}

// refused records that p refused our packet seq for good, with e: its
// command fails (once its packets in flight are acknowledged, so it is
// posted after nothing of it can still arrive), and sends nothing more.
// A PUSHB frame's refusal names its refused sub-messages in mask (none
// named: all of them); the others were placed and complete with the ACK.
func (d *Device) refused(p *peer, seq uint32, e uapi.Errno, mask uint64) {
	i := int32(seq - p.tx.Acked() - 1)
	if i < 0 || int(i) >= len(p.sent) {
		return
	}
	if b := p.sent[i].batch; b != nil {
		for k, j := range b.jobs {
			if (mask == 0 || mask&(1<<k) != 0) && j.err == uapi.EOK && !j.finished {
				j.err = e
			}
		}
		return
	}
	if p.sent[i].j == nil {
		return
	}
	j := p.sent[i].j
	if j.err != uapi.EOK || j.finished {
		return
	}
	j.err = e
	if j.desc.Opcode.Reads() { // no data will come: complete now
		delete(p.pulls, j.msgID)
		d.finish(j, e, true)
		return
	}
	if !j.sentAll && p.pkz < len(p.q) && p.q[p.pkz] == j {
		d.packetized(p, p.tx.Next()-1) // stop it: its last packet is the last one sent
	}
}

// retire drops what p's acknowledgement (from before to tx.Acked())
// covered: the records of those packets, the commands whose every packet
// is acknowledged (completed now, in posting order), and finished PULL
// responses.
func (d *Device) retire(p *peer, before uint32) {
	acked := p.tx.Acked()
	k := int(acked - before)
	if k > len(p.sent) {
		k = len(p.sent)
	}
	for _, e := range p.sent[:k] {
		if e.batch != nil {
			d.freeBatch(e.batch)
		}
	}
	clear(p.sent[:k])
	p.sent = p.sent[:copy(p.sent, p.sent[k:])]
	// q[:pkz] was packetized in order, so its last sequence numbers rise
	// along it: the commands this ACK completes are a prefix of it, apart
	// from PULLs in it still waiting for their data, which stay. The scan
	// stops at the first command not covered: an ACK costs what it
	// retires, not what is queued behind it (up to MaxInflight commands,
	// which a burst of posts keeps there).
	w, done, i := 0, 0, 0
	for ; i < p.pkz; i++ {
		j := p.q[i]
		if !seqLE(j.lastSeq, acked) {
			break
		}
		if !j.desc.Opcode.Reads() {
			d.finish(j, j.err, false)
			done++
			continue
		}
		p.q[w] = j
		w++
	}
	if done > 0 {
		n := copy(p.q[w:], p.q[i:])
		clear(p.q[w+n:])
		p.q = p.q[:w+n]
		p.pkz -= done
	}
	for len(p.resp) > 0 && p.resp[0].off >= p.resp[0].n && seqLE(p.resp[0].lastSeq, acked) {
		p.resp[0] = nil
		p.resp = p.resp[1:]
		d.respJobs--
	}
	if len(p.pulls) > 0 {
		d.watchPulls(p) // a PULL request acknowledged: only p's responses complete it now
	}
}

// finish completes a taken command exactly once: it leaves the flight
// count, and its status (DONE when signalled, PULL_DONE, or ERROR) is
// posted. unqueue:
// also remove it from its destination's queue. A job whose packets may
// still be resent (a PULL whose request is unacknowledged) is left to the
// garbage collector instead of the free list.
func (d *Device) finish(j *job, e uapi.Errno, unqueue bool) {
	if j.finished {
		return
	}
	j.finished = true
	d.inflight--
	p := j.peer
	switch {
	case e != uapi.EOK:
		d.fail(&j.desc, j.idx, e)
	case j.desc.Opcode.Reads(): // its data landed
		if d.chk != nil {
			d.chk.desc(&j.desc, j.idx)
		}
		var old uint64
		if j.desc.Opcode.Atomic() {
			old = binary.LittleEndian.Uint64(d.lm[j.desc.LocalAddr:])
		}
		d.complete(&uapi.Status{Type: uapi.StPULLDone, Opcode: j.desc.Opcode, SrcNode: p.node, SrcProc: j.desc.SrcProc,
			MsgID: j.msgID, Length: j.desc.Length, Addr: j.desc.LocalAddr, End: j.idx, Cookie: j.desc.Cookie, Imm: old})
	default:
		d.done(&j.desc, j.idx)
	}
	if j.desc.Opcode.Reads() && len(p.pulls) == 0 {
		d.unwatchPulls(p)
	}
	if unqueue {
		if i := slices.Index(p.q, j); i >= 0 {
			waiting := p.pkz < len(p.q)
			p.q = slices.Delete(p.q, i, i+1)
			if i < p.pkz {
				p.pkz--
			}
			if waiting && p.pkz == len(p.q) {
				d.sending--
			}
		}
	}
	if j.sentAll && seqLE(j.lastSeq, p.tx.Acked()) {
		*j = job{}
		d.freeJobs = append(d.freeJobs, j)
	}
}

// fail completes a command with an error status naming it and the reason.
func (d *Device) fail(desc *uapi.Desc, idx uint64, e uapi.Errno) {
	if d.chk != nil {
		d.chk.desc(desc, idx)
	}
	d.setError(desc.Opcode, idx, e)
	d.complete(&uapi.Status{Type: uapi.StError, Opcode: desc.Opcode, Err: e, End: idx, Cookie: desc.Cookie,
		SrcNode: d.node, SrcProc: desc.SrcProc})
}

func (d *Device) done(desc *uapi.Desc, idx uint64) {
	if d.chk != nil {
		d.chk.desc(desc, idx)
	}
	if desc.Flags&uapi.FlagSignal != 0 {
		d.complete(&uapi.Status{Type: uapi.StDone, Opcode: desc.Opcode, End: idx, Cookie: desc.Cookie,
			SrcNode: d.node, SrcProc: desc.SrcProc, Length: desc.Length})
	}
}

func (d *Device) complete(s *uapi.Status) {
	if len(d.compQ) > 0 || !d.postStatus(s) {
		d.compQ = append(d.compQ, *s)
	}
}

// flushCompletions posts the completions held for status room (compQ), in
// order; held reports that some still wait, busy that any was posted.
func (d *Device) flushCompletions() (busy, held bool) {
	for len(d.compQ) > 0 { // completions wait for status room, in order
		if !d.postStatus(&d.compQ[0]) {
			return busy, true
		}
		d.compQ = d.compQ[1:]
		busy = true
	}
	return busy, false
}

// postStatus publishes a status entry; false when the ring is full.
func (d *Device) postStatus(s *uapi.Status) bool {
	if !d.statusRoom(1) {
		d.noteStatusFull()
		return false
	}
	d.statFull = false
	slot := d.g.StatqOff + (d.statTail&(d.g.StatqEntries-1))*uapi.StatusSize
	d.r.WriteStatus(slot, s)
	if t := d.tracer.Load(); t != nil {
		t.emit(d, Event{Kind: EvStatus, Status: *s})
	}
	d.statTail++
	d.r.Store64(uapi.RegStatqTail, d.statTail)
	d.count(uapi.CtrStatusWritten, 1)
	d.irqWanted = true
	return true
}

// writeStatus is postStatus for a status the caller made room for
// (statusRoom), unpublished: publishStatuses makes the driver see it. A
// PUSHB frame's messages publish theirs once. (postStatus keeps its own
// copy: it is on every message's path.)
func (d *Device) writeStatus(s *uapi.Status) {
	d.statFull = false
	slot := d.g.StatqOff + (d.statTail&(d.g.StatqEntries-1))*uapi.StatusSize
	d.r.WriteStatus(slot, s)
	if t := d.tracer.Load(); t != nil {
		t.emit(d, Event{Kind: EvStatus, Status: *s})
	}
	d.statTail++
}

// publishStatuses stores the status tail after the n entries written
// since it was last stored: one locked store for them all (the driver's
// interrupt protocol orders it before DRV_WAIT's load).
func (d *Device) publishStatuses(n uint64) {
	d.r.Store64(uapi.RegStatqTail, d.statTail)
	d.count(uapi.CtrStatusWritten, n)
	d.irqWanted = true
}

// noteStatusFull counts a stall on a full status ring, once per stall.
func (d *Device) noteStatusFull() {
	if !d.statFull {
		d.statFull = true
		d.count(uapi.CtrStatusFullStalls, 1)
	}
}

// statusRoom reports whether n more status entries fit now.
// The driver's head is re-read only when the cached copy says full: that
// load pulls a line the driver writes, a cache-line transfer per status.
func (d *Device) statusRoom(n uint64) bool {
	if d.statTail+n-d.statHead <= d.g.StatqEntries {
		return true
	}
	h := d.r.Load64(uapi.RegStatqHead)
	if h-d.statHead > d.statTail-d.statHead { // a driver published a head beyond the tail
		return false
	}
	d.statHead = h
	return d.statTail+n-d.statHead <= d.g.StatqEntries
}

// interrupt wakes a driver that said it sleeps.
func (d *Device) interrupt() {
	d.irqWanted = false
	if d.r.Load64(uapi.RegDrvWait) != 0 {
		d.r.Add64(uapi.RegInterrupts, 1)
		if t := d.tracer.Load(); t != nil {
			t.emit(d, Event{Kind: EvInterrupt})
		}
		d.irqMu.Lock() // the slow path: only a sleeping driver pays for it
		for _, fd := range d.irqs {
			eventfd.Signal(fd)
		}
		woke := false
		for _, ch := range d.irqChans {
			select {
			case ch <- struct{}{}:
				woke = true
			default: // already signalled: the driver has not looked yet
			}
		}
		d.irqMu.Unlock()
		if woke {
			// The woken driver waits on this core's run queue until the
			// engine yields; yield now (measured: RTT/2 p50 73 us -> 18 us
			// when drivers always sleep; eventfd wake-ups 31 us).
			runtime.Gosched()
		}
	}
}

// setError records a failed command in the ERROR register and counters.
func (d *Device) setError(op uapi.Opcode, idx uint64, e uapi.Errno) {
	d.r.Store64(uapi.RegError, uint64(e)|uint64(op)<<16|(idx&0xffffffff)<<32)
	d.r.Add64(uapi.RegErrorCount, 1)
	d.count(uapi.CtrCmdErrors, 1)
}

// failPeer ends the sending session with p: every command to it completes
// once, with e, in posting order; nothing of them is sent again; the next
// packet starts a new session (a new epoch, numbers from 1), which tells
// the peer to discard what it kept of the old one. What p sends us is
// another session and stays as it is.
func (d *Device) failPeer(p *peer, e uapi.Errno) {
	d.settleAck(p) // what p acknowledged completes as delivered
	q := p.q
	p.q = nil // finish must not look for these in the queue
	if p.pkz < len(q) {
		d.sending--
	}
	for _, j := range q {
		d.finish(j, e, false)
	}
	clear(q)
	p.q, p.pkz = q[:0], 0
	p.pulls = map[uint32]*job{}
	d.unwatchPulls(p)
	d.respJobs -= len(p.resp)
	p.resp = nil
	clear(p.sent)
	p.sent = p.sent[:0]
	p.tx.Reset()
}

// awaitingPull reports whether a PULL from p waits for data whose request
// p acknowledged: only p's responses can complete it now.
func awaitingPull(p *peer) bool {
	for _, j := range p.pulls {
		if j.sentAll && seqLE(j.lastSeq, p.tx.Acked()) {
			return true
		}
	}
	return false
}

// watchPulls arms the guard on p's PULLs once a request is acknowledged.
// A responder that gave up its session to us dropped the responses it
// owed, and with nothing more to send never starts the new session that
// would tell us (cutSession): without the guard such a PULL waited for
// ever.
func (d *Device) watchPulls(p *peer) {
	if p.pullDeadline == 0 && len(p.pulls) > 0 && awaitingPull(p) {
		p.pullDeadline, p.pullExpired, p.pullTimeouts = d.now()+p.tx.RTO(), 0, 0
		d.book.Timers++
	}
}

// pullProgress notes a data frame of p's current session: p is serving
// us, so the guard starts over.
func (d *Device) pullProgress(p *peer) {
	if p.pullDeadline != 0 {
		p.pullDeadline, p.pullExpired, p.pullTimeouts = d.now()+p.tx.RTO(), 0, 0
	}
}

// unwatchPulls disarms the guard.
func (d *Device) unwatchPulls(p *peer) {
	if p.pullDeadline != 0 {
		p.pullDeadline = 0
		if d.book.Timers--; d.book.Timers == 0 {
			d.book.Settle(0) // no deadline left for a blocked wait to keep
		}
	}
}

// expirePulls handles the guard's passed deadline, with the transport's
// rules: it counts only if still passed GracePasses engine passes later
// (the clock runs while the engine is off its core), the interval doubles
// up to MaxBackoff, and MaxTimeouts in a row without a data frame from p
// fail every PULL waiting for p's data with UNREACHABLE.
func (d *Device) expirePulls(p *peer, now int64) bool {
	if !awaitingPull(p) {
		d.unwatchPulls(p)
		return false
	}
	if p.pullExpired == 0 {
		p.pullExpired = d.pass
		return false
	}
	if d.pass-p.pullExpired < transport.GracePasses {
		return false
	}
	d.count(uapi.CtrTimeouts, 1)
	if p.pullTimeouts++; p.pullTimeouts < d.cfg.MaxTimeouts || d.tcfg.PeerWatched {
		p.pullDeadline = now + min(p.tx.RTO()<<min(p.pullTimeouts, 20), transport.MaxBackoff)
		p.pullExpired = 0
		return false
	}
	d.unwatchPulls(p)
	var orphans []*job
	for id, j := range p.pulls {
		if j.sentAll && seqLE(j.lastSeq, p.tx.Acked()) {
			delete(p.pulls, id)
			orphans = append(orphans, j)
		}
	}
	slices.SortFunc(orphans, func(a, b *job) int { return cmp.Compare(a.idx, b.idx) })
	for _, j := range orphans { // in posting order
		d.count(uapi.CtrMsgCut, 1)
		d.finish(j, uapi.EUnreachable, true)
	}
	return true
}
