package vdev

import (
	"cmp"
	"errors"
	"slices"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/transport"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// peer is everything the device keeps about one other node: the two
// halves of the reliable session (package transport, which knows sequence
// numbers only), what each unacknowledged number carries, the commands to
// that node, and the receive-side state of its traffic to us.
type peer struct {
	node uint16
	tx   *transport.Tx
	rx   *transport.Rx

	// sending
	sent  []sentPkt       // sent[i] is what number tx.Acked()+1+i carries
	q     []*job          // commands to this node taken and not completed, in posting order
	pkz   int             // q[:pkz] are wholly packetized
	resp  []*respJob      // PULL responses owed to this node, in order
	pulls map[uint32]*job // our PULLs from this node, by message id
	// the requester's guard on PULLs whose request this node acknowledged:
	// armed while any waits for its data, pushed back by every data frame
	// of this node's session; MaxTimeouts in a row fail them UNREACHABLE
	pullDeadline int64
	pullExpired  uint64 // the engine pass that first saw pullDeadline passed
	pullTimeouts int

	// receiving
	owedCtl    []ctl  // NACKs the link could not take yet
	held       []byte // hold mode: the frame this peer sent that we cannot place yet
	pagingHold bool   // its paging request was delivered: place nothing more until PAGE_DONE
	heldRF     bool   // hold mode: this peer's ring-full stall was counted
	rfOwed     bool   // its RING_FULL status still waits for status ring room
	rfAMT      uint16 // the ring that status names
	msg        rxMsg  // the PUSH or IPUSH message of this peer in progress
	// refusals of this peer's packets (its current session) it has not
	// confirmed taking (an ACK with flag Refused), oldest first: no ACK
	// field to it passes one, and each is repeated when it resends
	refusals    []refusal
	refusalPass uint64 // the engine pass that last repeated them

	// stranger: made for a sender no PeerSet vouched for (a shared segment
	// without a key); such peers are bounded, and forgotten when idle
	stranger  bool
	lastHeard int64 // a stranger's last frame (ns)
}

// maxStrangers bounds the peers a device keeps for senders its port
// cannot vouch for: each may pin a held frame and owed replies, so a flood
// of made-up node ids must not grow them without limit.
const maxStrangers = 256

// strangerIdle is how long a stranger with nothing outstanding is kept
// after its last frame when its place is wanted.
const strangerIdle = 10_000_000_000

// admit decides whether a frame from node, whose Ethernet source is src,
// may reach the peer table: the source must be the node's own address,
// and the node one the port vouches for, or, when it cannot, one of at
// most maxStrangers. Refusals are counted (RX_SPOOFED, RX_UNKNOWN_PEER)
// and keep nothing.
func (d *Device) admit(node uint16, src []byte) (*peer, bool) {
	if n, ok := wire.MACNode(src); !ok || n != node {
		d.screened.Spoofed++
		d.mirrorScreen()
		return nil, false
	}
	if p := d.peers[node]; p != nil {
		if p.stranger {
			p.lastHeard = d.now()
		}
		return p, true
	}
	if d.peerSet != nil {
		if !d.peerSet.KnowsPeer([6]byte(src)) {
			d.screened.UnknownPeer++
			d.mirrorScreen()
			return nil, false
		}
		return d.peerOf(node), true
	}
	if d.strangers >= maxStrangers && !d.evictStranger() {
		d.screened.UnknownPeer++
		d.mirrorScreen()
		return nil, false
	}
	p := d.peerOf(node)
	p.stranger, p.lastHeard = true, d.now()
	d.strangers++
	return p, true
}

// evictStranger forgets the stranger idle longest, if one has nothing
// outstanding either way and was idle for strangerIdle.
func (d *Device) evictStranger() bool {
	now := d.now()
	victim := -1
	for i, p := range d.peerList {
		if !p.stranger || now-p.lastHeard < strangerIdle || len(p.q) > 0 || len(p.resp) > 0 || len(p.pulls) > 0 ||
			p.held != nil || p.pagingHold || len(p.owedCtl) > 0 || p.tx.Unacked() > 0 || p.tx.Armed() ||
			p.rx.Pending() || p.msg.open || p.pullDeadline != 0 {
			continue
		}
		if victim < 0 || p.lastHeard < d.peerList[victim].lastHeard {
			victim = i
		}
	}
	if victim < 0 {
		return false
	}
	p := d.peerList[victim]
	delete(d.peers, p.node)
	d.peerList = slices.Delete(d.peerList, victim, victim+1)
	d.strangers--
	return true
}

// refusal is a packet the receiver refused for good, and why.
type refusal struct {
	seq  uint32
	code uint16
}

// maxRefusals bounds the refusals a receiver keeps per peer. A peer that
// confirms each refusal it takes never comes near it; beyond it the oldest
// is forgotten (its ACK is no longer held back).
const maxRefusals = 256

// rxMsg is the receiver's view of the message a peer is sending: a
// message is reported complete only when every packet of it was placed.
type rxMsg struct {
	open   bool
	id     uint32
	typ    wire.Type
	broken bool // a packet of it was refused: the rest is discarded, no completion
}

// sentPkt is what one sequence number carries, to encode it again.
type sentPkt struct {
	typ   wire.Type
	flags wire.Flags // FlagUnordered, decided when the command started
	j     *job
	r     *respJob
	off   uint32
	n     uint32
	last  bool
}

func (d *Device) peerOf(node uint16) *peer {
	p := d.peers[node]
	if p == nil {
		// The epoch starts from the clock, so a restarted device's packets
		// are known for a new session by the peer that still remembers it.
		p = &peer{node: node, pulls: map[uint32]*job{},
			tx: transport.NewTx(&d.tcfg, &d.book, uint16(d.now()>>24)),
			rx: transport.NewRx(&d.book)}
		d.peers[node] = p
		d.peerList = append(d.peerList, p)
	}
	return p
}

// ctl is a control frame (NACK) the link could not take yet.
type ctl struct {
	typ   wire.Type
	seq   uint32
	code  uint16
	flags wire.Flags
}

// send frames a header and payload to p, piggybacking the cumulative ACK
// under the epoch of p's session it acknowledges (Tag): p numbers a new
// session from 1 again, and must tell a late ACK or NACK of the session
// it ended from one of the new. A Tagged PUSH needs Tag for its port, so
// it carries no ACK; the ACK stays owed and goes alone.
// gather: a port that can sends the payload from where it lies.
func (d *Device) send(p *peer, h *wire.Header, payload []byte, gather bool) error {
	if h.Flags&wire.FlagTagged == 0 && p.rx.Known() {
		h.Tag = p.rx.Epoch()
		if ack, ok := p.rx.AckField(); ok {
			h.Flags |= wire.FlagAckValid
			h.Ack = heldAck(p, h, ack)
		}
	}
	if d.crc {
		h.Flags |= wire.FlagCRC
	}
	if gather && d.vec != nil && len(payload) > 0 {
		head := wire.AppendHead(d.port.Buffer(), wire.NodeMAC(p.node), d.mac, h, payload)
		if t := d.tracer.Load(); t != nil {
			d.traceTx(t, h, head, payload)
		}
		if err := d.vec.SendVec(head, payload); err != nil {
			d.port.Release(head)
			return err
		}
	} else {
		f := wire.AppendFrame(d.port.Buffer(), wire.NodeMAC(p.node), d.mac, h, payload)
		if t := d.tracer.Load(); t != nil {
			d.traceTx(t, h, f, nil)
		}
		if err := d.port.Send(f); err != nil {
			d.port.Release(f)
			return err
		}
	}
	if d.trace && h.Type <= wire.TypeIPush {
		d.stamp(uapi.TraceTx)
	}
	if h.Flags&wire.FlagAckValid != 0 {
		p.rx.AckSent(h.Flags&wire.FlagSack != 0 || h.Type == wire.TypeNack && h.Code == wire.NackSeqErr)
	}
	return nil
}

// heldAck caps an ACK field below the oldest refusal p has not confirmed
// taking, other than the refusal h carries: a frame that acknowledged the
// refused packet while the refusal NACK was lost, overtaken or still owed
// (the link was full) would complete the refused command as if its data
// had been placed. Only the refusal NACK itself acknowledges the refused
// packet, so the sender reads the reason before the ACK.
func heldAck(p *peer, h *wire.Header, ack uint32) uint32 {
	for _, r := range p.refusals {
		if seqLE(r.seq, ack) && !(h.Type == wire.TypeNack && h.Seq == r.seq && h.Code == r.code) {
			return r.seq - 1
		}
	}
	return ack
}

// refuse records that p's packet seq (just consumed) is refused with
// code, and sends the refusal NACK. The refusal is kept, holding back
// every other ACK field, until p confirms it (confirmRefusal).
func (d *Device) refuse(p *peer, seq uint32, code uint16) {
	if len(p.refusals) >= maxRefusals {
		p.refusals = append(p.refusals[:0], p.refusals[1:]...)
	}
	p.refusals = append(p.refusals, refusal{seq, code})
	d.sendCtl(p, wire.TypeNack, seq, code, 0)
}

// repeatRefusals sends p's unconfirmed refusals again, once per engine
// pass: p resent a packet, so it is waiting for an ACK that the refusal
// holds back, and the refusal NACK (or its confirmation) was lost.
func (d *Device) repeatRefusals(p *peer) {
	if len(p.refusals) == 0 || p.refusalPass == d.pass {
		return
	}
	p.refusalPass = d.pass
	for _, r := range p.refusals {
		if !slices.Contains(p.owedCtl, ctl{wire.TypeNack, r.seq, r.code, 0}) {
			d.sendCtl(p, wire.TypeNack, r.seq, r.code, 0)
		}
	}
}

// confirmRefusal applies p's confirmation (an ACK with flag Refused) that
// it took our refusal of its packet seq in its session epoch.
func (d *Device) confirmRefusal(p *peer, epoch uint16, seq uint32) {
	if !p.rx.Known() || epoch != p.rx.Epoch() {
		return // an older session's: its refusals went with it
	}
	if i := slices.IndexFunc(p.refusals, func(r refusal) bool { return r.seq == seq }); i >= 0 {
		p.refusals = slices.Delete(p.refusals, i, i+1)
	}
}

// sendCtl sends a NACK now or keeps it for a later pass when the link is
// full: a lost refusal NACK would let the next cumulative ACK complete the
// refused command as if it had succeeded.
func (d *Device) sendCtl(p *peer, typ wire.Type, seq uint32, code uint16, flags wire.Flags) {
	if len(p.owedCtl) == 0 {
		err := d.sendAck(p, typ, seq, code, flags)
		if err == nil {
			return
		}
		if !errors.Is(err, link.ErrFull) {
			d.count(uapi.CtrOwedDropped, 1) // nobody on the link has that node's address
			return
		}
	}
	p.owedCtl = append(p.owedCtl, ctl{typ, seq, code, flags})
	d.owed++
}

// flushOwed retries control frames the link refused, in order.
func (d *Device) flushOwed() bool {
	busy := false
	for _, p := range d.peerList {
		for len(p.owedCtl) > 0 {
			c := p.owedCtl[0]
			if err := d.sendAck(p, c.typ, c.seq, c.code, c.flags); err != nil {
				if errors.Is(err, link.ErrFull) {
					return busy
				}
				d.count(uapi.CtrOwedDropped, 1) // no route to it: trying again every pass would only burn the core
			}
			p.owedCtl = p.owedCtl[1:]
			d.owed--
			busy = true
		}
	}
	return busy
}

// sendAck sends a standalone ACK or NACK to p. A gap NACK (and any ACK
// while packets are missing) says what is missing: the SACK bitmap in Imm,
// the highest number received in Addr.
func (d *Device) sendAck(p *peer, typ wire.Type, seq uint32, code uint16, flags wire.Flags) error {
	h := wire.Header{Version: wire.Version1, Type: typ, Flags: flags, SrcNode: d.node, DstNode: p.node, Seq: seq, Code: code}
	plain := typ == wire.TypeAck && flags&(wire.FlagHold|wire.FlagRefused) == 0 || typ == wire.TypeNack && code == wire.NackSeqErr
	switch gap, expect, hi, sack := p.rx.Gap(); {
	case plain && gap:
		h.Type, h.Code, h.Seq, h.Addr = wire.TypeNack, wire.NackSeqErr, expect, uint64(hi)
		if sack != 0 {
			h.Flags |= wire.FlagSack
			h.Imm = sack
		}
	case plain: // the gap closed before this could leave: an ACK says it all
		h.Type, h.Code, h.Seq = wire.TypeAck, 0, 0
	}
	if err := d.send(p, &h, nil, false); err != nil {
		return err
	}
	switch {
	case h.Type == wire.TypeAck:
		d.count(uapi.CtrAcksTx, 1)
	case h.Code == wire.NackSeqErr:
		d.count(uapi.CtrSeqNACKsTx, 1)
	}
	return nil
}

// ackEvery is how many received frames make an ACK go at the end of the
// receive burst instead of waiting for a reply to carry it: a streaming
// sender's window must keep moving.
func (d *Device) ackEvery() int { return max(1, d.cfg.Window/8) }

// flushAcks sends the ACKs (gap NACKs while packets are missing) that no
// data frame carried; see transport.Rx.AckWanted for when. An ACK the
// link refused stays due and is tried again on the next pass.
func (d *Device) flushAcks(burst bool) {
	for _, p := range d.peerList {
		if !p.rx.Pending() || len(p.owedCtl) > 0 { // owed NACKs go first: they carry the same ACK
			continue
		}
		if !p.rx.AckWanted(d.pass, burst, d.ackEvery()) {
			continue
		}
		switch err := d.sendAck(p, wire.TypeAck, 0, 0, 0); {
		case err == nil:
			p.rx.AckSent(true) // also a bare ACK (nothing accepted yet): never resend it every pass
		case !errors.Is(err, link.ErrFull):
			// The link has no route to p (a sender from outside the peers
			// file): the ACK can never leave, and retrying it every pass
			// would keep an idle engine busy for good.
			d.count(uapi.CtrOwedDropped, 1)
			p.rx.AckSent(true)
		}
	}
}

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
	now := d.now()
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
	if c := h.Code; nack && c != wire.NackRetry && c <= wire.NackRefusalMax {
		// Only a refusal NACK's ACK field covers the refused packet (every
		// other ACK is held below it until we confirm): record the reason
		// first, or the ACK completes its command as if it had succeeded
		// (and a refused PULL never completes). Confirm every refusal
		// NACK, repeats too: a lost confirmation makes the peer repeat it.
		d.refused(p, h.Seq, uapi.Errno(c))
		d.sendCtl(p, wire.TypeAck, h.Seq, p.tx.Epoch(), wire.FlagRefused)
	}
	// The cumulative ACK goes before what a NACK asks: a gap report, a
	// retry or a resume acknowledges nothing by its Seq (see
	// transport.Tx.Gap).
	if h.Flags&wire.FlagAckValid != 0 {
		p.tx.Ack(h.Ack, now)
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

// retransmit runs the retransmission timers that ran out and resends what
// the transport marked (a gap the receiver reported, a timeout, a go-back
// it asked for); a peer that stopped answering fails its commands with
// UNREACHABLE.
func (d *Device) retransmit(now int64) bool {
	busy := false
	for _, p := range d.peerList {
		if p.pullDeadline != 0 && now >= p.pullDeadline {
			busy = d.expirePulls(p, now) || busy
		}
		if p.tx.Due(now) {
			d.expire(p, now)
		}
		if !p.tx.Resending() {
			continue
		}
		n, err := p.tx.Resend(now, func(seq uint32) error {
			return d.transmit(p, &p.sent[seq-p.tx.Acked()-1], seq, true)
		})
		total := n[transport.CauseGap] + n[transport.CauseTimeout] + n[transport.CauseGoBack]
		d.count(uapi.CtrRetransmits, uint64(total))
		d.count(uapi.CtrRetxGap, uint64(n[transport.CauseGap]))
		d.count(uapi.CtrRetxTimeout, uint64(n[transport.CauseTimeout]))
		busy = busy || total > 0
		if err != nil && !errors.Is(err, link.ErrFull) {
			d.failPeer(p, sendErrno(err))
		}
	}
	return busy
}

// expire handles p's run-out timer.
func (d *Device) expire(p *peer, now int64) {
	if d.backlog != nil {
		// A packet still in our own port's queue is not lost (resending
		// it would queue it twice): look again after the timeout. A packet
		// that left late is timed from when it left.
		queued, last := d.backlog.Backlog([6]byte(wire.NodeMAC(p.node)))
		if queued > 0 {
			p.tx.Rearm(now + p.tx.RTO())
			return
		}
		if at := last + p.tx.RTO(); at > now {
			p.tx.Rearm(at)
			return
		}
	}
	switch p.tx.Expire(now, d.pass) {
	case transport.TimedOut:
		d.count(uapi.CtrTimeouts, 1)
	case transport.Unreachable:
		d.count(uapi.CtrTimeouts, 1)
		d.failPeer(p, uapi.EUnreachable)
	case transport.HoldExpired:
		d.count(uapi.CtrHoldExpired, 1)
		d.failPeer(p, uapi.EHoldLimit)
	}
}

// failPeer ends the sending session with p: every command to it completes
// once, with e, in posting order; nothing of them is sent again; the next
// packet starts a new session (a new epoch, numbers from 1), which tells
// the peer to discard what it kept of the old one. What p sends us is
// another session and stays as it is.
func (d *Device) failPeer(p *peer, e uapi.Errno) {
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
		d.book.Timers--
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
	if p.pullTimeouts++; p.pullTimeouts < d.cfg.MaxTimeouts {
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
