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
	if err == nil {
		h.PayloadLen = pl
	}
	return d.handleParsed(f, rest, h, rest, err, false)
}

// handleParsed is handle after Parse. A frame whose payload is still in
// the medium (rest, see handleInPlace) is made whole before it is held:
// the medium's memory is lent only until handle returns.
func (d *Device) handleParsed(f, rest []byte, h *wire.Header, payload []byte, err error, retry bool) bool {
	if err == nil && d.crc && h.Flags&wire.FlagCRC == 0 {
		// On a medium that needs checksums every frame carries one: this
		// one had its CRC flag flipped on the way, and nothing else of it
		// is known intact.
		err = wire.ErrChecksum
	}
	if err != nil {
		switch {
		case errors.Is(err, wire.ErrNotDimmnet):
			d.count(uapi.CtrRxForeign, 1)
		case errors.Is(err, wire.ErrChecksum):
			d.count(uapi.CtrCRCFail, 1)
		default:
			d.count(uapi.CtrRxMalformed, 1)
		}
		d.port.Release(f)
		return false
	}
	if t := d.tracer.Load(); t != nil && !retry {
		d.traceFrame(t, EvRx, h, f, rest)
	}
	if h.DstNode != d.node || h.SrcNode == d.node {
		d.count(uapi.CtrRxMalformed, 1)
		d.port.Release(f)
		return false
	}
	if d.trace && !retry && h.Type <= wire.TypeIPush {
		d.stamp(uapi.TraceRx)
	}
	p, ok := d.admit(h.SrcNode, f[6:12])
	if !ok {
		d.port.Release(f)
		return false
	}
	if !retry {
		if h.Flags&wire.FlagSeq != 0 && p.rx.Stale(h.Code) {
			// A late data frame of a session the peer has ended: it would
			// end the session that replaced it and place old packets again.
			// Its ACK field is as old: it says nothing of our sending.
			d.count(uapi.CtrDuplicates, 1)
			d.port.Release(f)
			return false
		}
		d.control(p, h)
		switch {
		case h.Type == wire.TypeAck:
			d.count(uapi.CtrAcksRx, 1)
			if h.Flags&wire.FlagRefused != 0 {
				d.confirmRefusal(p, h.Code, h.Seq)
			}
			fallthrough
		case h.Type == wire.TypeNack:
			d.port.Release(f)
			return false
		case h.Flags&wire.FlagSeq == 0: // a data frame outside any session
			d.count(uapi.CtrRxMalformed, 1)
			d.port.Release(f)
			return false
		}
		if known := p.rx.Known(); p.rx.Session(h.Code) && known {
			d.cutSession(p)
		}
		d.pullProgress(p) // p is serving us in this session
	}
	switch p.rx.Check(h.Seq) {
	case transport.Duplicate:
		d.count(uapi.CtrDuplicates, 1) // never placed twice; answer with what we have
		p.rx.Owe(d.pass)
		d.repeatRefusals(p) // what we have may be held back below a refusal
		d.port.Release(f)
		return false
	case transport.Ahead:
		d.ahead(p, h, payload)
		d.port.Release(f)
		return false
	}
	if p.held != nil && !retry {
		// A retransmission of the frame we hold: say we hold it, so the
		// sender keeps its packet and does not count us unreachable.
		d.sendCtl(p, wire.TypeAck, h.Seq, 0, wire.FlagHold)
		d.port.Release(f)
		return false
	}
	if p.pagingHold { // a second paging request waits too: PAGE_DONE answers one at a time
		// The driver is paging for this peer's request: nothing more from
		// it is placed until PAGE_DONE (later frames are dropped and come
		// again; retransmissions of this one get hold-flagged ACKs).
		p.held = append(f, rest...)
		d.holding++
		return true
	}
	out, code := d.place(p, h, payload)
	switch out {
	case delivered, discarded:
		p.rx.Accept(d.pass)
	case refused:
		p.rx.Accept(d.pass)
		d.refuse(p, h.Seq, uint16(code)) // consumes seq: the NACK's ACK field covers it
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
			break
		}
		// Hold: keep the frame as this peer's; withhold its ACK, drop the
		// peer's later data unacknowledged, and go on with ACKs and other
		// peers' frames.
		if !retry {
			d.count(uapi.CtrHolds, 1)
		}
		p.held = append(f, rest...)
		d.holding++
		return true
	}
	d.port.Release(f)
	return false
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
