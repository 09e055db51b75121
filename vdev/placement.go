package vdev

// Placement: what the responder does with an in-order data packet that
// passed every check (rxe_resp.c's execute). PUSH data goes to the exposed
// window of link memory, IPUSH data into the ring its AMT entry names,
// PULL requests and atomics become responses to send, PULL responses land
// where their command asked; each placement that ends a message posts its
// status (completer.go). outcome says what became of the packet.

import (
	"cmp"
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// outcome of delivering one packet.
type outcome int

const (
	delivered  outcome = iota
	refused            // consumed and NACKed with an error code
	discarded          // consumed without placing: its message was cut or refused
	ringFull           // IPUSH ring full: hold or NACK
	statusFull         // no room for the status: hold or NACK
)

// ringState is what the receive engine remembers of one IPUSH ring to tell
// interleaved per-message statuses: the message whose packet it wrote last
// and the per-message messages still open.
type ringState struct {
	last msgKey
	open map[msgKey]*openMsg
}

type msgKey struct {
	proc  uint32
	msgID uint32
	node  uint16
}

type openMsg struct {
	addr        uint64
	interleaved bool
	wrapped     bool   // continued at the ring base
	first       uint32 // bytes before the wrap
}

// place delivers an in-order data packet. A PUSH or IPUSH packet that does
// not continue p's message in progress (its first packet never came, or
// the message was cut or a packet of it refused) is discarded and counted:
// a message is reported complete only when every packet of it was placed.
func (d *Device) place(p *peer, h *wire.Header, payload []byte) (outcome, uapi.Errno) {
	if h.Type != wire.TypePush && h.Type != wire.TypeIPush {
		switch h.Type {
		case wire.TypePullReq:
			return d.rxPullReq(p, h)
		case wire.TypePullResp:
			return d.rxPullResp(p, h, payload)
		case wire.TypeFAdd8, wire.TypeCAS8:
			return d.rxAtomic(p, h, payload)
		default: // TypePage
			return d.rxPage(p, h)
		}
	}
	m := &p.msg
	first, last := h.Flags&wire.FlagFirst != 0, h.Flags&wire.FlagLast != 0
	switch {
	case first && m.open:
		d.cutMsg(p) // its sender gave up on it (a refusal stopped it)
	case !first && (!m.open || m.id != h.MsgID || m.typ != h.Type || m.broken):
		d.count(uapi.CtrRxDiscarded, 1)
		if last && m.open && m.id == h.MsgID {
			*m = rxMsg{} // the broken message ends here
		}
		return discarded, 0
	}
	var out outcome
	var code uapi.Errno
	if h.Type == wire.TypePush {
		out, code = d.rxPush(h, payload)
	} else {
		out, code = d.rxIPush(p, h, payload)
	}
	switch {
	case out != delivered && out != refused: // comes again
	case last:
		*m = rxMsg{}
	case first:
		*m = rxMsg{open: true, id: h.MsgID, typ: h.Type, broken: out == refused}
	case out == refused:
		m.broken = true
	}
	return out, code
}

// placeAhead places a packet its sender marked Unordered before the
// packets ahead of it arrived: a middle packet of a PUSH or a PULL
// response, no status, checked as in order. It reports false when it
// must wait for its turn instead.
func (d *Device) placeAhead(p *peer, h *wire.Header, payload []byte) bool {
	if h.Flags&wire.FlagUnordered == 0 || h.Flags&(wire.FlagFirst|wire.FlagLast|wire.FlagPktStatus|wire.FlagTagged) != 0 ||
		!p.rx.CanPlaceAhead(h.Seq) || !consistent(h, len(payload)) {
		return false
	}
	n := uint32(len(payload))
	switch h.Type {
	case wire.TypePush:
		if h.Addr%uapi.AddrAlign != 0 || !d.inWindow(h.Addr, n) || h.Addr < uint64(h.Offset) {
			return false
		}
		d.count(uapi.CtrRxPush, 1)
	case wire.TypePullResp:
		j := p.pulls[h.MsgID]
		if j == nil || h.Addr < j.desc.LocalAddr || h.Addr+uint64(n) > j.desc.LocalAddr+uint64(j.desc.Length) || !d.inLinkMem(h.Addr, n) {
			return false
		}
		j.pulled += n
	default:
		return false
	}
	copy(d.lm[h.Addr:], payload)
	d.count(uapi.CtrRxPkts, 1)
	d.count(uapi.CtrRxBytes, uint64(n))
	return true
}

// inWindow reports whether [addr, addr+n) lies in the exposed range of
// link memory for remote PUSH/PULL.
func (d *Device) inWindow(addr uint64, n uint32) bool {
	base, size, ok := d.window()
	return ok && inRange(base, size, addr, uint64(n))
}

// window is the exposed range of link memory; ok is false for a
// scribbled one, which exposes nothing.
func (d *Device) window() (base, size uint64, ok bool) {
	base, size = d.r.Load64(uapi.RegWinBase), d.r.Load64(uapi.RegWinSize)
	return base, size, d.inLinkMem(base, 0) && size <= d.g.LinkMemSize-base
}

// inRange reports whether [addr, addr+n) lies in [base, base+size).
func inRange(base, size, addr, n uint64) bool {
	return addr >= base && addr-base <= size && n <= size-(addr-base)
}

// tagsMatch checks a TAGGED write against the frame tag table: every link
// page frame it touches must belong to its port.
func (d *Device) tagsMatch(addr uint64, n uint32, tag uint16) bool {
	ps := d.g.PageSize
	last := (addr + uint64(max(n, 1)) - 1) / ps
	for f := addr / ps; f <= last; f++ {
		if d.r.Load32At(d.g.FrameTagOff+4*f) != uint32(tag) {
			return false
		}
	}
	return true
}

// consistent checks what a sender claims about a packet's place in its
// message: statuses carry it to drivers, which size buffers by it.
func consistent(h *wire.Header, n int) bool {
	end := uint64(h.Offset) + uint64(n)
	return end <= uint64(h.MsgLen) && h.MsgLen <= uapi.MaxXfer &&
		(h.Flags&wire.FlagFirst != 0) == (h.Offset == 0) &&
		(h.Flags&wire.FlagLast != 0) == (end == uint64(h.MsgLen))
}

func stFlags(h *wire.Header) uint8 {
	var f uint8
	if h.Flags&wire.FlagLast != 0 {
		f |= uapi.StFlagLast
	}
	if h.Flags&wire.FlagFirst != 0 {
		f |= uapi.StFlagFirst
	}
	return f
}

func (d *Device) rxPush(h *wire.Header, payload []byte) (outcome, uapi.Errno) {
	n := uint32(len(payload))
	if !consistent(h, len(payload)) {
		d.count(uapi.CtrRxMalformed, 1)
		return refused, uapi.EBadLength
	}
	if h.Addr%uapi.AddrAlign != 0 || !d.inWindow(h.Addr, n) || h.Addr < uint64(h.Offset) {
		d.count(uapi.CtrRxBadAddr, 1)
		return refused, uapi.ERemoteAddr
	}
	if h.Flags&wire.FlagTagged != 0 && !d.tagsMatch(h.Addr, n, h.Tag) {
		d.count(uapi.CtrMisplaced, 1)
		return refused, uapi.EBadTag
	}
	pkt := h.Flags&wire.FlagPktStatus != 0
	// A TAGGED write is LMMC's plain remote write: no software runs on the
	// receiving side, so it gets no status (unless per packet is asked).
	last := h.Flags&wire.FlagLast != 0 && h.Flags&wire.FlagTagged == 0
	if (pkt || last) && !d.statusRoom(1) {
		d.noteStatusFull()
		return statusFull, 0
	}
	copy(d.lm[h.Addr:], payload)
	if d.trace {
		d.stamp(uapi.TracePlaced)
	}
	d.count(uapi.CtrRxPkts, 1)
	d.count(uapi.CtrRxBytes, uint64(n))
	d.count(uapi.CtrRxPush, 1)
	if pkt || last {
		s := uapi.Status{Type: uapi.StPUSH, SrcNode: h.SrcNode, SrcProc: h.SrcProc, MsgID: h.MsgID, Imm: h.Imm}
		if pkt {
			s.Length, s.Offset, s.Addr = n, h.Offset, h.Addr
			s.Flags = stFlags(h)
		} else {
			s.Length, s.Addr, s.Flags = h.MsgLen, h.Addr-uint64(h.Offset), uapi.StFlagLast|uapi.StFlagFirst
		}
		d.postStatus(&s)
		if d.trace {
			d.stamp(uapi.TraceStatus)
		}
	}
	return delivered, 0
}

func (d *Device) rxIPush(p *peer, h *wire.Header, payload []byte) (outcome, uapi.Errno) {
	if !consistent(h, len(payload)) {
		d.count(uapi.CtrRxMalformed, 1)
		return refused, uapi.EBadLength
	}
	var idx uint64
	if h.Flags&wire.FlagDirectAMT != 0 {
		idx = uint64(h.DstProc)
		if idx >= d.g.AMTEntries {
			d.count(uapi.CtrIPushBadAMT, 1)
			return refused, uapi.EBadAMT
		}
	} else {
		if uint64(h.SrcProc) >= uint64(len(d.amtat)) || d.amtat[h.SrcProc]&uapi.AMTATValid == 0 {
			d.count(uapi.CtrIPushNoEntry, 1)
			return refused, uapi.ENoAMTEntry
		}
		idx = uint64(d.amtat[h.SrcProc] & 0xffff)
	}
	e := d.g.AMTOff + idx*uapi.AMTSize
	base := d.r.Load64At(e + uapi.AMTBase)
	cfg := d.r.Load64At(e + uapi.AMTCfg)
	size, flags := cfg&0xffffffff, cfg>>32
	n := uint64(len(payload))
	need := roundUp(n, uapi.RingAlign)
	if flags&uapi.AMTFlagValid == 0 || base%uapi.RingAlign != 0 || size%uapi.RingAlign != 0 || size == 0 ||
		!d.inLinkMem(base, uint32(min(size, uapi.MaxXfer))) || size > uapi.MaxXfer {
		d.count(uapi.CtrIPushBadAMT, 1)
		return refused, uapi.EBadAMT
	}
	pkt := h.Flags&wire.FlagPktStatus != 0
	last := h.Flags&wire.FlagLast != 0
	msgNeed := roundUp(uint64(h.MsgLen), uapi.RingAlign)
	if need > size || !pkt && msgNeed+min(msgNeed, uint64(d.maxPayload)) > size {
		// A per-message message must be placeable whole from any position:
		// with at most one pad, shorter than one of its packets, at the end.
		return refused, uapi.ETooBig
	}
	head, tail := d.r.Load64At(e+uapi.AMTHead), d.r.Load64At(e+uapi.AMTTail)
	pos := tail % size
	pad := uint64(0)
	if !pkt && h.Offset == 0 && pos+msgNeed > size && msgNeed <= pos {
		// Keep a per-message message contiguous by starting it at the ring
		// base. Only when it can ever fit there (msgNeed <= pos); otherwise
		// it wraps and its status says where (StFlagWrapped).
		pad = size - pos
	} else if pos+need > size {
		pad = size - pos // a packet never straddles the ring's end
	}
	if tail-head > size || tail+pad+need-head > size {
		if tail-head > size {
			d.count(uapi.CtrIPushBadAMT, 1)
			return refused, uapi.EBadAMT // the driver scribbled the pointers
		}
		d.ringFullOnce(p, uint16(idx))
		return ringFull, 0
	}
	if !d.flushRingFull(p) || (pkt || last) && !d.statusRoom(1) {
		d.noteStatusFull()
		return statusFull, 0
	}
	p.heldRF = false
	at := base + (pos+pad)%size
	copy(d.lm[at:at+n], payload)
	if d.trace {
		d.stamp(uapi.TracePlaced)
	}
	newTail := tail + pad + need
	d.r.Store64At(e+uapi.AMTTail, newTail) // data, then the AMT tail, then the status, then the status tail
	d.count(uapi.CtrRxPkts, 1)
	d.count(uapi.CtrRxBytes, n)
	d.count(uapi.CtrRxIPush, 1)

	rs := &d.rings[idx]
	k := msgKey{proc: h.SrcProc, msgID: h.MsgID, node: h.SrcNode}
	if rs.last != k {
		if o := rs.open[rs.last]; o != nil {
			o.interleaved = true
		}
		if o := rs.open[k]; o != nil {
			o.interleaved = true
		}
	}
	rs.last = k
	s := uapi.Status{SrcNode: h.SrcNode, SrcProc: h.SrcProc, MsgID: h.MsgID, AMT: uint16(idx), End: newTail, Imm: h.Imm}
	switch {
	case pkt:
		s.Type, s.Length, s.Offset, s.Addr, s.Flags = uapi.StIPUSHPkt, uint32(n), h.Offset, at, stFlags(h)
	default:
		o := rs.open[k]
		var single openMsg
		if h.Offset == 0 {
			if last { // single packet: nothing to track, nothing to allocate
				single.addr = at
				o = &single
			} else {
				if rs.open == nil {
					rs.open = map[msgKey]*openMsg{}
				}
				nm := &openMsg{addr: at}
				rs.open[k] = nm
				o = nm
			}
		} else if o != nil && pad > 0 && !o.wrapped {
			o.wrapped, o.first = true, h.Offset // the rest continues at the ring base
		}
		if !last {
			return delivered, 0
		}
		delete(rs.open, k)
		s.Type, s.Length, s.Flags = uapi.StIPUSHMsg, h.MsgLen, uapi.StFlagFirst|uapi.StFlagLast
		if o != nil {
			s.Addr = o.addr
			if o.interleaved {
				s.Flags |= uapi.StFlagInterleaved
				d.count(uapi.CtrInterleaved, 1)
			}
			if o.wrapped {
				s.Flags |= uapi.StFlagWrapped
				s.Offset = o.first
			}
		}
	}
	d.postStatus(&s)
	if d.trace {
		d.stamp(uapi.TraceStatus)
	}
	return delivered, 0
}

// ringFullOnce starts a ring-full stall (hold mode): it counts the stall and
// raises its one RING_FULL status, now or, when the status ring is full, as
// soon as there is room (before the held packet is placed).
func (d *Device) ringFullOnce(p *peer, idx uint16) {
	if d.r.Load64(uapi.RegRingFullMode) == uapi.RingFullNACK {
		return
	}
	if !p.heldRF { // a stall is per peer: other peers' traffic does not end it
		p.heldRF = true
		p.rfOwed, p.rfAMT = true, idx
		d.count(uapi.CtrRingFullHolds, 1)
	}
	d.flushRingFull(p)
}

// flushRingFull posts a stall's RING_FULL status still owed; false while
// the status ring has no room for it.
func (d *Device) flushRingFull(p *peer) bool {
	if !p.rfOwed {
		return true
	}
	if !d.statusRoom(1) {
		d.noteStatusFull()
		return false
	}
	p.rfOwed = false
	d.postStatus(&uapi.Status{Type: uapi.StRingFull, AMT: p.rfAMT, SrcNode: d.node})
	return true
}

// rxPage delivers an LMMC paging request to the driver and holds the peer
// until the driver posts PAGE_DONE: data behind the request waits for the
// page-out and page-in, in the same ordered stream.
func (d *Device) rxPage(p *peer, h *wire.Header) (outcome, uapi.Errno) {
	if !d.statusRoom(1) {
		d.noteStatusFull()
		return statusFull, 0
	}
	d.postStatus(&uapi.Status{Type: uapi.StPageReq, SrcNode: h.SrcNode, SrcProc: h.SrcProc, MsgID: h.MsgID, Imm: h.Imm, Addr: h.Addr})
	p.pagingHold = true
	d.count(uapi.CtrPagingHolds, 1)
	return delivered, 0
}

func (d *Device) rxPullReq(p *peer, h *wire.Header) (outcome, uapi.Errno) {
	if h.Addr%uapi.AddrAlign != 0 || h.MsgLen == 0 || !d.inWindow(h.Addr, h.MsgLen) {
		d.count(uapi.CtrRxBadAddr, 1)
		return refused, uapi.ERemoteAddr
	}
	d.count(uapi.CtrRxPull, 1)
	d.respJobs++
	p.resp = append(p.resp, &respJob{msgID: h.MsgID, src: h.Addr, dst: h.Imm, n: h.MsgLen, srcProc: h.DstProc})
	return delivered, 0
}

// rxAtomic performs a remote atomic on this device's aligned word in the
// window and answers with the old value like a PULL of 8 bytes. A packet
// reaches it once (duplicates are dropped before place), so the word
// changes once per command. sync/atomic makes it atomic against the
// driver's own atomics on the same word and against other devices'.
func (d *Device) rxAtomic(p *peer, h *wire.Header, payload []byte) (outcome, uapi.Errno) {
	if len(payload) != 16 || h.MsgLen != 8 {
		d.count(uapi.CtrRxMalformed, 1)
		return refused, uapi.EBadLength
	}
	if h.Addr%8 != 0 || !d.inWindow(h.Addr, 8) {
		d.count(uapi.CtrRxBadAddr, 1)
		return refused, uapi.ERemoteAddr
	}
	w := (*uint64)(unsafe.Pointer(&d.lm[h.Addr]))
	x, y := binary.LittleEndian.Uint64(payload), binary.LittleEndian.Uint64(payload[8:])
	var old uint64
	if h.Type == wire.TypeFAdd8 {
		old = atomic.AddUint64(w, x) - x
	} else {
		for {
			old = atomic.LoadUint64(w)
			if old != x || atomic.CompareAndSwapUint64(w, old, y) {
				break
			}
		}
	}
	d.count(uapi.CtrRxPull, 1)
	d.respJobs++
	p.resp = append(p.resp, &respJob{msgID: h.MsgID, dst: h.Imm, n: 8, srcProc: h.DstProc, val: binary.LittleEndian.AppendUint64(nil, old)})
	return delivered, 0
}

func (d *Device) rxPullResp(p *peer, h *wire.Header, payload []byte) (outcome, uapi.Errno) {
	j := p.pulls[h.MsgID]
	n := uint32(len(payload))
	if j == nil || h.Addr < j.desc.LocalAddr || h.Addr+uint64(n) > j.desc.LocalAddr+uint64(j.desc.Length) || !d.inLinkMem(h.Addr, n) {
		d.count(uapi.CtrRxBadAddr, 1)
		if j != nil && j.err == uapi.EOK {
			j.err = uapi.ERemoteAddr // completes with it when the last packet comes
		}
		return refused, uapi.ERemoteAddr
	}
	last := h.Flags&wire.FlagLast != 0
	if last && !d.statusRoom(1) {
		d.noteStatusFull()
		return statusFull, 0
	}
	copy(d.lm[h.Addr:], payload)
	d.count(uapi.CtrRxPkts, 1)
	d.count(uapi.CtrRxBytes, uint64(n))
	j.pulled += n
	if last {
		delete(p.pulls, h.MsgID)
		if j.pulled != j.desc.Length || j.err != uapi.EOK { // a piece of the response was refused
			d.count(uapi.CtrMsgCut, 1)
			d.finish(j, cmp.Or(j.err, uapi.ERemoteAddr), true)
			return delivered, 0
		}
		d.finish(j, uapi.EOK, true)
	}
	return delivered, 0
}

// placeBatch places an in-order PUSHB frame (wire.CheckBatch passed in
// checkIntact): each sub-message in order, as a one-packet PUSH with its
// fields would be: placed with its status, or refused (its bit set in
// mask, the refusal NACK's Imm; code names the reason). A full status
// ring stops it where it is, as it would stop the next of a stream of
// PUSHes: what is placed stays placed, the frame is held or NACKed, and
// its retry goes on from there (Device.rxBatches), so a batch of more messages
// than the status ring holds is placed as the driver frees room.
func (d *Device) placeBatch(p *peer, h *wire.Header, payload []byte) (out outcome, code uapi.Errno, mask uint64) {
	b, ok := d.rxBatches[p]
	if !ok || b.seq != h.Seq {
		if p.msg.open {
			d.cutMsg(p) // a batch starts new messages: its sender gave up on the open one
		}
		b = rxBatch{seq: h.Seq}
		d.count(uapi.CtrRxPkts, 1) // one frame; RX_PUSH counts its messages, as one-packet PUSHes
	}
	// The window is read once for the frame, and the statuses published
	// once (publishStatuses), where a stream of PUSHes pays both per
	// message.
	base, size, exposed := d.window()
	if !exposed {
		size = 0 // a scribbled window exposes nothing
	}
	var placed, bytes uint64
	rest := payload
	for i := range int(h.MsgLen) {
		s, data, r, err := wire.NextSub(rest)
		if err != nil {
			// Not reached: CheckBatch passed this payload, and it is
			// ours (handleInPlace copies a PUSHB out of the medium). If
			// it were, the rest is refused, never given statuses.
			d.count(uapi.CtrRxMalformed, 1)
			for ; i < int(h.MsgLen); i++ {
				b.mask |= 1 << i
			}
			b.next = int(h.MsgLen)
			break
		}
		rest = r
		if i < b.next {
			continue
		}
		if s.Addr%uapi.AddrAlign != 0 || !inRange(base, size, s.Addr, uint64(s.Len)) {
			d.count(uapi.CtrRxBadAddr, 1)
			b.mask |= 1 << i
			b.next = i + 1
			continue
		}
		if !d.statusRoom(1) {
			d.noteStatusFull()
			d.placedBatch(placed, bytes)
			if d.rxBatches == nil {
				d.rxBatches = map[*peer]rxBatch{}
			}
			d.rxBatches[p] = b
			return statusFull, 0, 0
		}
		copy(d.lm[s.Addr:], data)
		d.writeStatus(&uapi.Status{Type: uapi.StPUSH, SrcNode: h.SrcNode, SrcProc: s.SrcProc, MsgID: s.MsgID, Imm: s.Imm,
			Length: s.Len, Addr: s.Addr, Flags: uapi.StFlagLast | uapi.StFlagFirst})
		placed++
		bytes += uint64(s.Len)
		b.next = i + 1
	}
	d.placedBatch(placed, bytes)
	mask = b.mask
	if ok {
		delete(d.rxBatches, p)
	}
	if mask != 0 {
		return refused, uapi.ERemoteAddr, mask
	}
	return delivered, 0, 0
}

// placedBatch counts the n messages of bytes a PUSHB frame placed and
// publishes their statuses.
func (d *Device) placedBatch(n, bytes uint64) {
	if n == 0 {
		return
	}
	d.count(uapi.CtrRxPush, n)
	d.count(uapi.CtrRxBytes, bytes)
	if d.trace {
		d.stamp(uapi.TracePlaced)
	}
	d.publishStatuses(n)
	if d.trace {
		d.stamp(uapi.TraceStatus)
	}
}
