package vdev

// The responder (the role of rxe_resp.c): the receive engine. pollRx takes
// frames from the port; receive runs each through a chain of named checks
// (rxe_resp.c's check states), each of which passes the frame on or says
// why it stops there, counted as it always was (rxVerdict); a frame that
// passes them all is placed (placement.go) and answered: the ACKs, gap
// NACKs, refusals and hold notices below. The responder also sends the
// data remote PULLs and atomics asked for (serveResponses).
//
// Where a PUSH or IPUSH arrives: receive's checks run in order (intact,
// addressed, admitted, session, sequence, held), then place. A faster way
// in for small messages on a lossless, in-order medium branches in receive
// after checkAdmitted, and must leave the peer's receive session
// (transport.Rx) as Accept would.

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/transport"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// pollRx retries held frames, then drains the port. It reports work done.
func (d *Device) pollRx() bool {
	busy := false
	if d.holding > 0 {
		for _, p := range d.peerList {
			if f := p.held; f != nil && !p.pagingHold {
				p.held = nil
				d.holding--
				if !d.handle(f, true) {
					busy = true // placed (or refused): the stall is over
					p.heldRF, p.rfOwed = false, false
					// The frames behind it were dropped: ask for them now
					// rather than after the sender's timeout (a NACK with
					// Hold set means "resume from here").
					d.sendCtl(p, wire.TypeNack, p.rx.Expect(), wire.NackRetry, wire.FlagHold)
				}
			}
		}
	}
	inPlace := d.inPlace
	for n := 0; n < 256; n++ {
		if n&7 == 7 && d.book.AcksOwed > 0 {
			// A stream's ACKs go as its frames are taken, every
			// AckPolicy.Every of them, not once the port is empty: a
			// sender that keeps the port filled kept this loop going
			// for its whole window, which got no ACK until the last
			// frame was placed, past its retransmission timer whenever
			// placing was slow (first touches of link memory: 50-450 µs
			// a 64 KiB packet here).
			d.flushAcks(true)
		}
		if inPlace != nil {
			f, rest := inPlace.RecvInPlace(wire.FrameOverhead)
			if f == nil {
				break
			}
			busy = true
			d.handleInPlace(f, rest)
			inPlace.Done()
			continue
		}
		f := d.port.Recv()
		if f == nil {
			break
		}
		busy = true
		d.handle(f, false)
	}
	if busy && d.book.AcksOwed > 0 {
		d.flushAcks(true) // the receive queue drained: keep streaming senders' windows open
	}
	return busy
}

// handle processes one frame: parse, then what it says of our own sending
// (ACKs, NACKs), then whether its sequence number lets it in, then
// placement, then the answer. In hold mode a frame that cannot be placed
// (ring or status ring full, or its peer's paging request under way) is
// kept as its peer's held frame and handle reports true; the link goes on
// carrying ACKs and other peers' frames.
func (d *Device) handle(f []byte, retry bool) bool {
	h, payload, err := d.parser.Parse(f)
	return d.handleParsed(f, nil, h, payload, err, retry)
}

// Offsets in a frame of the header fields handleInPlace looks at.
var (
	frameFlagsOff      = wire.EthHeaderLen + fieldOff("Flags")
	framePayloadLenOff = wire.EthHeaderLen + fieldOff("PayloadLen")
)

func fieldOff(name string) int {
	for _, f := range wire.Fields {
		if f.Name == name {
			return f.Off
		}
	}
	panic("vdev: no header field " + name)
}

// handleInPlace handles a frame of a port that lends its payload (a
// link.InPlaceReceiver): f holds its headers, copied, and rest its payload
// where the medium holds it, which placement copies into link memory:
// read once, the only copy on this side. Everything checked is in f, ours;
// the payload is never checked, only copied. A frame that does not fit
// (a checksum to verify over the payload, a payload length that is not
// rest's, padding) is made whole first, as Recv would have made it.
func (d *Device) handleInPlace(f, rest []byte) bool {
	if len(rest) == 0 {
		return d.handle(f, false)
	}
	pl := binary.LittleEndian.Uint32(f[framePayloadLenOff:])
	flags := wire.Flags(binary.LittleEndian.Uint16(f[frameFlagsOff:]))
	if len(f) != wire.FrameOverhead || uint64(pl) != uint64(len(rest)) || flags&wire.FlagCRC != 0 || d.crc {
		return d.handle(append(f, rest...), false)
	}
	// Parse the headers alone: a header whose payload is elsewhere.
	binary.LittleEndian.PutUint32(f[framePayloadLenOff:], 0)
	h, _, err := d.parser.Parse(f)
	binary.LittleEndian.PutUint32(f[framePayloadLenOff:], pl)
	if err == nil && h.Type == wire.TypePushBatch {
		// Its sub-headers are checked (wire.CheckBatch) and then read
		// again to place: two reads of bytes the sender may still write.
		// Made whole first (the frames are small by design).
		return d.handle(append(f, rest...), false)
	}
	if err == nil {
		h.PayloadLen = pl
	}
	return d.handleParsed(f, rest, h, rest, err, false)
}

// handleParsed is handle after Parse: the frame goes through the
// responder's checks (receive) and is released, unless a check kept it as
// its peer's held frame. A frame whose payload is still in the medium
// (rest, see handleInPlace) is made whole before it is held: the medium's
// memory is lent only until handle returns.
func (d *Device) handleParsed(f, rest []byte, h *wire.Header, payload []byte, err error, retry bool) bool {
	fr := rxFrame{f: f, rest: rest, h: h, payload: payload, retry: retry}
	if d.receive(&fr, err).kept() {
		return true
	}
	d.port.Release(f)
	return false
}

// rxFrame is one received frame on its way through the responder's checks.
type rxFrame struct {
	f, rest []byte // the frame (its headers only when rest holds its payload in the medium)
	h       *wire.Header
	payload []byte
	retry   bool  // a held frame tried again: its session and control part were applied when it came
	p       *peer // its sender, once checkAdmitted passed
}

// rxVerdict is where a frame's way through the responder's checks ended,
// and why: each check either passes the frame on (rxNext) or stops it with
// one of these, counted in the counter it names. Every verdict but the two
// kept ones releases the frame.
type rxVerdict uint8

const (
	rxNext rxVerdict = iota // passed this check: on to the next

	// checkIntact: not a dimmnet frame (RX_FOREIGN), a checksum that failed
	// or is missing on a medium that needs one (CRC_FAIL), or a header
	// that does not parse (RX_MALFORMED).
	rxCorrupt
	// checkAddressed: not for this node, or claiming to come from it
	// (RX_MALFORMED).
	rxMisaddressed
	// checkAdmitted: its Ethernet source is not its node's (RX_SPOOFED),
	// or its node is one the port does not vouch for and no stranger's
	// place is free (RX_UNKNOWN_PEER).
	rxUnadmitted
	// checkSession: a data frame of a session its sender has since ended
	// (DUPLICATES): placing it would end the session that replaced it.
	rxStaleSession
	// checkData: an ACK or NACK, applied to our sending (control) and
	// nothing to place (ACKS_RX for an ACK).
	rxControl
	// checkData: a data frame outside any session (RX_MALFORMED).
	rxSessionless
	// checkSequence: placed before (DUPLICATES); answered with the ACK
	// owed and the refusals not yet confirmed.
	rxDuplicate
	// checkSequence: beyond the next expected number: placed ahead of its
	// turn (RX_UNORDERED) or dropped to come again (OUT_OF_ORDER).
	rxAhead
	// checkHeld: a resend of the frame held for its peer, answered with a
	// Hold ACK so its sender keeps it and does not count us unreachable.
	rxHeldResend
	// checkPaging: its peer's paging request is under way: kept as the
	// peer's held frame until PAGE_DONE.
	rxPagingHold
	// deliver: placed, or consumed by placement (refused with a NACK, or
	// discarded as part of a broken message; placement counts which).
	rxPlaced
	// deliver: its ring or status ring is full in NACK mode: NACKed, to
	// come again (RING_FULL_NACKS for the ring).
	rxFullNACK
	// deliver: its ring or status ring is full in hold mode: kept as the
	// peer's held frame (HOLDS) and retried every pass.
	rxFullHold
)

// kept reports whether the verdict kept the frame as its peer's held frame.
func (v rxVerdict) kept() bool { return v == rxPagingHold || v == rxFullHold }

// receive runs a frame through the responder's checks, in order, and
// delivers one that passes them all (rxe_resp.c's chain of check states).
// A held frame tried again (retry) skips what it passed when it came: the
// session and control checks.
func (d *Device) receive(fr *rxFrame, err error) rxVerdict {
	if v := d.checkIntact(fr, err); v != rxNext {
		return v
	}
	if t := d.tracer.Load(); t != nil && !fr.retry {
		d.traceFrame(t, EvRx, fr.h, fr.f, fr.rest)
	}
	if v := d.checkAddressed(fr); v != rxNext {
		return v
	}
	if d.trace && !fr.retry && tracedType(fr.h.Type) {
		d.stamp(uapi.TraceRx)
	}
	if v := d.checkAdmitted(fr); v != rxNext {
		return v
	}
	if !fr.retry {
		if v := d.checkSession(fr); v != rxNext {
			return v
		}
		if !d.deferAck(fr.p, fr.h) {
			d.control(fr.p, fr.h) // what it says of our sending (completer.go)
		}
		if v := d.checkData(fr); v != rxNext {
			return v
		}
		d.followSession(fr)
	}
	if v := d.checkSequence(fr); v != rxNext {
		return v
	}
	if v := d.checkHeld(fr); v != rxNext {
		return v
	}
	if v := d.checkPaging(fr); v != rxNext {
		return v
	}
	return d.deliver(fr)
}

// checkIntact stops a frame that did not parse. On a medium that needs
// checksums every frame carries one: a frame without one had its CRC flag
// flipped on the way, and nothing else of it is known intact.
func (d *Device) checkIntact(fr *rxFrame, err error) rxVerdict {
	if err != nil || d.crc && fr.h.Flags&wire.FlagCRC == 0 {
		return d.corrupt(err)
	}
	if fr.h.Type == wire.TypePushBatch {
		// its sub-messages' framing, once the frame is known intact:
		// counted malformed and dropped
		if err := wire.CheckBatch(fr.h, fr.payload); err != nil {
			return d.corrupt(err)
		}
	}
	return rxNext
}

// corrupt counts a frame checkIntact stops (err nil: its CRC flag was
// flipped) under the reason it failed for.
func (d *Device) corrupt(err error) rxVerdict {
	if err == nil {
		err = wire.ErrChecksum
	}
	switch {
	case errors.Is(err, wire.ErrNotDimmnet):
		d.count(uapi.CtrRxForeign, 1)
	case errors.Is(err, wire.ErrChecksum):
		d.count(uapi.CtrCRCFail, 1)
	default:
		d.count(uapi.CtrRxMalformed, 1)
	}
	return rxCorrupt
}

// checkAddressed stops a frame for another node or claiming to be ours.
func (d *Device) checkAddressed(fr *rxFrame) rxVerdict {
	if fr.h.DstNode != d.node || fr.h.SrcNode == d.node {
		d.count(uapi.CtrRxMalformed, 1)
		return rxMisaddressed
	}
	return rxNext
}

// checkAdmitted finds the frame's peer, or stops a frame from a sender
// that may not have one (admit, peer.go, counts why).
func (d *Device) checkAdmitted(fr *rxFrame) rxVerdict {
	p, ok := d.admit(fr.h.SrcNode, fr.f[6:12])
	fr.p = p
	if ok {
		return rxNext
	}
	return rxUnadmitted
}

// checkSession stops a late data frame of a session the peer has ended:
// it would end the session that replaced it and place old packets again.
// Its ACK field is as old: it says nothing of our sending.
func (d *Device) checkSession(fr *rxFrame) rxVerdict {
	if rx := fr.p.rx; fr.h.Flags&wire.FlagSeq == 0 || !rx.Known() || fr.h.Code == rx.Epoch() {
		return rxNext // not a data frame, or of the session being received
	}
	return d.staleSession(fr)
}

// staleSession stops a data frame checkSession looks at twice: one of a
// session the peer ended before the one being received.
func (d *Device) staleSession(fr *rxFrame) rxVerdict {
	if !fr.p.rx.Stale(fr.h.Code) {
		return rxNext // a new session
	}
	d.count(uapi.CtrDuplicates, 1)
	return rxStaleSession
}

// checkData stops what has nothing to place once control has applied it:
// an ACK or NACK, and a data frame outside any session.
func (d *Device) checkData(fr *rxFrame) rxVerdict {
	if h := fr.h; h.Type != wire.TypeAck && h.Type != wire.TypeNack && h.Flags&wire.FlagSeq != 0 {
		return rxNext
	}
	return d.notData(fr)
}

// notData counts and applies a frame checkData stops.
func (d *Device) notData(fr *rxFrame) rxVerdict {
	h := fr.h
	switch {
	case h.Type == wire.TypeAck:
		d.count(uapi.CtrAcksRx, 1)
		if h.Flags&wire.FlagRefused != 0 {
			d.confirmRefusal(fr.p, h.Code, h.Seq)
		}
		return rxControl
	case h.Type == wire.TypeNack:
		return rxControl
	default: // no sequence number
		d.count(uapi.CtrRxMalformed, 1)
		return rxSessionless
	}
}

// followSession notes a data frame of the peer's current session: one that
// starts a new session discards what was kept of the old (cutSession), and
// any restarts the guard on our PULLs from the peer, which is serving us.
func (d *Device) followSession(fr *rxFrame) {
	p := fr.p
	if !p.rx.Known() || fr.h.Code != p.rx.Epoch() {
		d.newSession(p, fr.h.Code)
	}
	d.pullProgress(p)
}

// newSession starts receiving p's session epoch, discarding what was kept
// of the one it replaces.
func (d *Device) newSession(p *peer, epoch uint16) {
	if known := p.rx.Known(); p.rx.Session(epoch) && known {
		d.cutSession(p)
	}
}

// checkSequence stops a frame that is not the next expected one: a
// duplicate (never placed twice; answered with what we have, which may be
// held back below a refusal) or one ahead of its turn (see ahead).
func (d *Device) checkSequence(fr *rxFrame) rxVerdict {
	if fr.h.Seq == fr.p.rx.Expect() {
		return rxNext // transport.InOrder
	}
	return d.outOfSequence(fr)
}

// outOfSequence answers a frame checkSequence stops.
func (d *Device) outOfSequence(fr *rxFrame) rxVerdict {
	p := fr.p
	switch p.rx.Check(fr.h.Seq) {
	case transport.InOrder: // not reached: checkSequence passed it
		return rxNext
	case transport.Duplicate:
		d.count(uapi.CtrDuplicates, 1)
		p.rx.Owe(d.pass)
		p.rx.Await() // a resend: its sender's timer ran out
		d.repeatRefusals(p)
		return rxDuplicate
	default: // transport.Ahead
		d.ahead(p, fr.h, fr.payload)
		return rxAhead
	}
}

// checkHeld stops a resend of the frame held for its peer, saying we hold
// it, so the sender keeps its packet and does not count us unreachable.
func (d *Device) checkHeld(fr *rxFrame) rxVerdict {
	if fr.p.held == nil || fr.retry {
		return rxNext
	}
	d.sendCtl(fr.p, wire.TypeAck, fr.h.Seq, 0, wire.FlagHold)
	return rxHeldResend
}

// checkPaging keeps the frame while the driver pages for its peer's
// request: nothing more from it is placed until PAGE_DONE (later frames
// are dropped and come again; resends of this one get Hold ACKs), and a
// second paging request waits too, since PAGE_DONE answers one at a time.
func (d *Device) checkPaging(fr *rxFrame) rxVerdict {
	if !fr.p.pagingHold {
		return rxNext
	}
	d.hold(fr)
	return rxPagingHold
}

// hold keeps the frame as its peer's held frame, whole.
func (d *Device) hold(fr *rxFrame) {
	fr.p.held = append(fr.f, fr.rest...)
	d.holding++
}

// deliver places an in-order data frame that passed every check
// (placement.go) and answers it: its number is accepted unless its ring or
// status ring is full, when it is NACKed or held as RING_FULL_MODE says.
func (d *Device) deliver(fr *rxFrame) rxVerdict {
	p, h := fr.p, fr.h
	var out outcome
	var code uapi.Errno
	var mask uint64
	if h.Type == wire.TypePushBatch {
		out, code, mask = d.placeBatch(p, h, fr.payload)
	} else {
		out, code = d.place(p, h, fr.payload)
	}
	switch out {
	case delivered, discarded:
		p.rx.Accept(d.pass)
		if h.Flags&wire.FlagSignal != 0 {
			p.rx.Await() // its sender waits for the DONE our ACK gives it
		}
	case refused:
		p.rx.Accept(d.pass)
		d.refuse(p, h.Seq, uint16(code), mask) // consumes seq: the NACK's ACK field covers it
	case ringFull, statusFull:
		if d.r.Load64(uapi.RegRingFullMode) == uapi.RingFullNACK {
			if out == ringFull {
				d.count(uapi.CtrRingFullNACKs, 1)
			}
			// NACK every refused arrival, retransmissions included: the
			// sender sends again only when NACKed (its backoff paces
			// this), so staying silent after the first NACK would leave
			// it waiting for ever once the ring has room again.
			d.sendCtl(p, wire.TypeNack, h.Seq, wire.NackRetry, 0)
			return rxFullNACK
		}
		// Hold: keep the frame as this peer's; withhold its ACK, drop the
		// peer's later data unacknowledged, and go on with ACKs and other
		// peers' frames.
		if !fr.retry {
			d.count(uapi.CtrHolds, 1)
		}
		d.hold(fr)
		return rxFullHold
	}
	return rxPlaced
}

// ahead handles a data frame beyond the next expected number: placed at
// once when its sender allows it and it lies within the SACK span, dropped
// otherwise (it comes again). A gap that opens is reported to the sender
// at once; while a frame is held, later ones are no gap and are dropped.
func (d *Device) ahead(p *peer, h *wire.Header, payload []byte) {
	if p.held != nil || p.pagingHold {
		d.count(uapi.CtrOutOfOrder, 1)
		return
	}
	if d.placeAhead(p, h, payload) {
		p.rx.PlacedAhead(h.Seq)
		d.count(uapi.CtrRxUnordered, 1)
	} else {
		d.count(uapi.CtrOutOfOrder, 1)
	}
	if p.rx.SawAhead(h.Seq, d.pass) {
		d.sendCtl(p, wire.TypeNack, 0, wire.NackSeqErr, 0)
	}
}

// cutSession discards what the receiver kept of p's old session when a
// new one starts: the message in progress (counted in MSG_CUT, its
// remaining packets never complete it), a held frame, a paging hold, and
// our PULLs whose request p had taken (their response was the old
// session's: they fail with UNREACHABLE).
func (d *Device) cutSession(p *peer) {
	if p.msg.open {
		d.cutMsg(p)
	}
	delete(d.rxBatches, p) // a held PUSHB's placed part stays; its rest is the old session's
	if p.held != nil {
		d.port.Release(p.held)
		p.held = nil
		d.holding--
	}
	p.pagingHold, p.heldRF, p.rfOwed = false, false, false
	p.refusals = p.refusals[:0] // the old session's packets will not come again
	// NACKs and Hold ACKs still owed name the old session's numbers, and
	// would leave under the new session's epoch: the new one's packet 1
	// refused or held for the old one's. Confirmations of p's refusals are
	// of our own session, and stay.
	owed := p.owedCtl[:0]
	for _, c := range p.owedCtl {
		if c.typ == wire.TypeAck && c.flags&wire.FlagRefused != 0 {
			owed = append(owed, c)
		}
	}
	d.owed -= len(p.owedCtl) - len(owed)
	clear(p.owedCtl[len(owed):])
	p.owedCtl = owed
	for id, j := range p.pulls {
		if j.sentAll && seqLE(j.lastSeq, p.tx.Acked()) {
			delete(p.pulls, id)
			d.count(uapi.CtrMsgCut, 1)
			d.finish(j, uapi.EUnreachable, true)
		}
	}
}

// cutMsg ends p's message in progress without a completion: an IPUSH
// message's open record goes (the ring bytes it took are freed with the
// next status's END).
func (d *Device) cutMsg(p *peer) {
	d.count(uapi.CtrMsgCut, 1)
	if p.msg.typ == wire.TypeIPush {
		for i := range d.rings {
			for k := range d.rings[i].open {
				if k.node == p.node && k.msgID == p.msg.id {
					delete(d.rings[i].open, k)
				}
			}
		}
	}
	p.msg = rxMsg{}
}

// respJob sends the data a remote PULL asked for.
type respJob struct {
	msgID     uint32
	src       uint64 // local link address read
	dst       uint64 // requester's link address
	n, off    uint32
	srcProc   uint32
	lastSeq   uint32
	unordered bool
	val       []byte // a remote atomic's old value, sent instead of link memory
}

// serveResponses sends PULL response data, per requester in order.
func (d *Device) serveResponses() bool {
	busy := false
	for _, p := range d.peerList {
		for i, r := range p.resp {
			if r.off == 0 && r.n > 2*d.maxPayload {
				r.unordered = true
				for _, x := range p.resp[:i] {
					if x.off < x.n || !seqLE(x.lastSeq, p.tx.Acked()) {
						if overlaps(r.dst, r.n, x.dst, x.n) {
							r.unordered = false
						}
					}
				}
			}
			for r.off < r.n {
				if !p.tx.Room() {
					break
				}
				n := min(r.n-r.off, d.maxPayload)
				e := sentPkt{typ: wire.TypePullResp, r: r, off: r.off, n: n, last: r.off+n >= r.n}
				if r.unordered && r.off != 0 && !e.last {
					e.flags = wire.FlagUnordered
				}
				seq := p.tx.Next()
				if err := d.transmit(p, &e, seq, false); err != nil {
					if errors.Is(err, link.ErrFull) {
						d.blocked(p)
						return busy
					}
					// No route to the requester: its responses can never
					// leave, and retrying them every pass would keep an
					// idle engine busy for good.
					d.count(uapi.CtrOwedDropped, uint64(len(p.resp)))
					d.failPeer(p, sendErrno(err))
					return busy
				}
				p.tx.Sent(d.now())
				p.sent = append(p.sent, e)
				r.off += n
				if e.last {
					r.lastSeq = seq
				}
				busy = true
			}
		}
	}
	return busy
}

// refuse records that p's packet seq (just consumed) is refused with
// code, and sends the refusal NACK. The refusal is kept, holding back
// every other ACK field, until p confirms it (confirmRefusal).
func (d *Device) refuse(p *peer, seq uint32, code uint16, mask uint64) {
	if len(p.refusals) >= maxRefusals {
		p.refusals = append(p.refusals[:0], p.refusals[1:]...)
	}
	p.refusals = append(p.refusals, refusal{seq, code, mask})
	d.sendCtlImm(p, wire.TypeNack, seq, code, 0, mask)
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
		if !slices.Contains(p.owedCtl, ctl{wire.TypeNack, r.seq, r.code, 0, r.mask}) {
			d.sendCtlImm(p, wire.TypeNack, r.seq, r.code, 0, r.mask)
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

// sendCtl sends a NACK now or keeps it for a later pass when the link is
// full: a lost refusal NACK would let the next cumulative ACK complete the
// refused command as if it had succeeded.
func (d *Device) sendCtl(p *peer, typ wire.Type, seq uint32, code uint16, flags wire.Flags) {
	d.sendCtlImm(p, typ, seq, code, flags, 0)
}

// sendCtlImm is sendCtl for a frame that carries Imm: a PUSHB refusal's
// mask of refused sub-messages.
func (d *Device) sendCtlImm(p *peer, typ wire.Type, seq uint32, code uint16, flags wire.Flags, imm uint64) {
	if len(p.owedCtl) == 0 {
		err := d.sendAck(p, typ, seq, code, flags, imm)
		if err == nil {
			return
		}
		if !errors.Is(err, link.ErrFull) {
			d.count(uapi.CtrOwedDropped, 1) // nobody on the link has that node's address
			return
		}
	}
	p.owedCtl = append(p.owedCtl, ctl{typ, seq, code, flags, imm})
	d.owed++
}

// flushOwed retries control frames the link refused, in order.
func (d *Device) flushOwed() bool {
	busy := false
	for _, p := range d.peerList {
		for len(p.owedCtl) > 0 {
			c := p.owedCtl[0]
			if err := d.sendAck(p, c.typ, c.seq, c.code, c.flags, c.imm); err != nil {
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
func (d *Device) sendAck(p *peer, typ wire.Type, seq uint32, code uint16, flags wire.Flags, imm uint64) error {
	h := wire.Header{Version: wire.Version1, Type: typ, Flags: flags, SrcNode: d.node, DstNode: p.node, Seq: seq, Code: code, Imm: imm}
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

// flushAcks sends the ACKs (gap NACKs while packets are missing) that no
// data frame carried; see transport.Rx.AckWanted for when. An ACK the
// link refused stays due and is tried again on the next pass.
func (d *Device) flushAcks(burst bool) {
	var now int64 // read once, and only where ACKs are held for replies
	pol := d.ackPolicy
	if !d.driverStep {
		// The engine's pass: no driver is about to post a reply, and its
		// passes are up to a watch apart. Passes held for would be
		// milliseconds.
		pol.HoldPasses = 1
	}
	for _, p := range d.peerList {
		if !p.rx.Pending() || len(p.owedCtl) > 0 { // owed NACKs go first: they carry the same ACK
			continue
		}
		if pol.HoldNs > 0 && now == 0 {
			now = d.now()
		}
		if !p.rx.AckWanted(d.pass, burst, now, &pol) {
			continue
		}
		switch err := d.sendAck(p, wire.TypeAck, 0, 0, 0, 0); {
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
