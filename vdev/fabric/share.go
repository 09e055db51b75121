package fabric

import "container/heap"

// Flit-level multiplexing of a link's VCs (the default; not Switch.WholePackets), modelled as
// processor sharing: while k packets on different VCs send on one link,
// each advances at 1/k of its rate. Cut through, a packet cannot finish on
// a link sooner than HopDelay after its tail finished on the link before,
// so a packet slowed upstream is slow downstream too; while it waits for
// its tail it keeps its VC but takes no bandwidth (the approximation: the
// flits it does get trickle in without taking the others' share).

// xfer is one packet's transmission on one channel.
type xfer struct {
	p        *packet
	ch, from int
	vc       int
	work     int64 // full-rate picoseconds still to send
	doneAt   int64 // when its last flit was sent at the link's share; -1 before
	end      int64 // when its tail left; -1 before
	prev     *xfer // the packet's transmission on the channel before
	next     *xfer
}

// psState is a shared link's state.
type psState struct {
	act   []*xfer // sending now
	held  []bool  // per VC: a packet holds it
	nheld int
	stamp int64  // when act's work was last brought up to date
	ver   uint64 // bumped whenever act changes, so stale evShare are ignored
}

// shared tells whether channel ch multiplexes its VCs: every switch output
// under flit-interleaved links; the NI sends one packet at a time.
func (s *sim) shared(ch int) bool {
	return !s.par.Switch.WholePackets && !(ch >= s.inter && ch < s.inter+len(s.hosts))
}

// transmitShared starts packet p on channel ch under flit-interleaved links.
func (s *sim) transmitShared(ch int, p *packet, from int) {
	c := &s.chans[ch]
	if c.ps.held == nil {
		c.ps.held = make([]bool, max(len(c.queues), s.vcs, 1))
	}
	s.advance(ch)
	x := &xfer{p: p, ch: ch, from: from, vc: p.vc, work: s.ser, doneAt: -1, end: -1}
	inject := ch >= s.inter && ch < s.inter+len(s.hosts)
	if inject {
		x.work = s.injectHold()
		x.vc = 0 // the NI's link: one packet at a time
	} else {
		x.prev = p.last
		p.last.next = x
	}
	p.last = x
	c.ps.held[x.vc] = true
	c.ps.nheld++
	c.ps.act = append(c.ps.act, x)
	s.reshare(ch)
	switch {
	case ch >= s.inter+len(s.hosts):
	case inject:
		p.in = ch
		s.at(s.now+s.par.HopDelay, evHead, 0, p)
	default:
		p.in = ch
		p.hop++
		s.at(s.now+s.par.HopDelay, evHead, 0, p)
	}
}

// advance brings the work of the link's senders up to now.
func (s *sim) advance(ch int) {
	c := &s.chans[ch].ps
	if k := int64(len(c.act)); k > 0 {
		d := (s.now - c.stamp) / k
		for _, x := range c.act {
			x.work -= d
		}
	}
	c.stamp = s.now
}

// reshare schedules the link's next sender to run out of work.
func (s *sim) reshare(ch int) {
	c := &s.chans[ch].ps
	c.ver++
	if len(c.act) == 0 {
		return
	}
	least := c.act[0].work
	for _, x := range c.act[1:] {
		least = min(least, x.work)
	}
	s.seq++
	t := s.now + max(least, 0)*int64(len(c.act))
	heap.Push(&s.q, event{t: t, seq: s.seq, kind: evShare, id: ch, from: -1, ver: c.ver})
}

// shareDone runs when a sender of link ch may have sent its last flit.
func (s *sim) shareDone(ch int, ver uint64) {
	c := &s.chans[ch].ps
	if ver != c.ver {
		return
	}
	s.advance(ch)
	var left, done []*xfer
	for _, x := range c.act {
		if x.work <= 0 {
			x.doneAt = s.now
			done = append(done, x)
		} else {
			left = append(left, x)
		}
	}
	c.act = left
	s.reshare(ch)
	for _, x := range done {
		s.tryTail(x)
	}
}

// tryTail ends a transmission whose flits are sent once its tail can have
// left: HopDelay after it left the channel before.
func (s *sim) tryTail(x *xfer) {
	if x.prev != nil && x.prev.end < 0 {
		return // the upstream's tailDone will call again
	}
	end := x.doneAt
	if x.prev != nil {
		end = max(end, x.prev.end+s.par.HopDelay)
	}
	if end <= s.now {
		s.tailDone(x)
		return
	}
	s.seq++
	heap.Push(&s.q, event{t: end, seq: s.seq, kind: evTail, from: -1, x: x})
}

// tailDone frees the transmission's VC and input FIFO, hands the packet to
// its host off the ejection link, and lets the next hop end if it waited.
func (s *sim) tailDone(x *xfer) {
	x.end = s.now
	c := &s.chans[x.ch].ps
	c.held[x.vc] = false
	c.nheld--
	x.prev = nil // the chain's past is not needed again
	if x.from >= 0 {
		s.leave(x.from)
	}
	if x.ch >= s.inter+len(s.hosts) {
		s.at(s.now, evDeliver, 0, x.p)
	}
	s.freed(x.ch)
	if n := x.next; n != nil && n.doneAt >= 0 {
		s.tryTail(n)
	}
}
