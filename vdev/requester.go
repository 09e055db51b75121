package vdev

// The requester (the role of rxe_req.c in Linux's software RDMA NIC): the
// sending half of the command engine. It takes descriptors from the command
// queue (intake, take, execute: local commands run at once, remote ones join
// their destination peer's queue in posting order), cuts each remote command
// into packets within its peer's window (advance, transmit), and resends
// what the transport marks lost (retransmit, expire). What becomes of a
// command once its packets are acknowledged is the completer's
// (completer.go); data a remote PULL asked for is sent by the responder
// (serveResponses).
//
// Where a PUSH or IPUSH leaves: advance builds each packet's record
// (sentPkt) and transmit encodes it and hands it to send (peer.go), which
// adds the piggybacked ACK and gives the frame to the port. A faster way
// out for small messages on a lossless, in-order medium
// (link.LosslessMedium) branches in advance, before the window's
// bookkeeping, and must leave the same numbered packets behind it.

import (
	"encoding/binary"
	"errors"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/transport"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// txBurst bounds the packets one destination gets per engine pass, so a
// large transfer interleaves with receive processing and with other
// destinations instead of queueing a whole message of frames.
const txBurst = 8

// job is one command taken from the command queue and not yet completed:
// being packetized, sent and waiting for its acknowledgement (PUSH, IPUSH,
// PAGE) or for its data (PULL).
type job struct {
	desc      uapi.Desc
	idx       uint64
	msgID     uint32
	peer      *peer
	off       uint32 // next byte to packetize
	lastSeq   uint32 // number of its last packet, once sentAll
	sentAll   bool   // no more packets of it will be sent (all were, or it was refused)
	started   bool   // its first packet left (unordered is decided)
	unordered bool   // its middle packets may be placed out of order (no earlier overlap)
	finished  bool   // its one completion was posted
	err       uapi.Errno
	pulled    uint32 // PULL: bytes landed
}

func seqLE(a, b uint32) bool { return int32(a-b) <= 0 }

// pollCommands posts held completions, takes descriptors into their
// destinations' queues and advances every destination. It reports work.
func (d *Device) pollCommands() bool {
	busy, held := d.flushCompletions()
	if held {
		return busy // nothing new is taken while completions wait
	}
	if d.fence != nil && d.inflight == 0 {
		d.done(&d.fence.desc, d.fence.idx)
		d.fence = nil
		busy = true
	}
	busy = d.intake() || busy
	if d.sending > 0 {
		for _, p := range d.peerList {
			if p.pkz < len(p.q) {
				busy = d.advance(p) || busy
			}
		}
	}
	return busy
}

// intake takes published descriptors: local commands run at once, remote
// ones join their destination's queue. It stops at a FENCE until every
// command before it completed, and when MAX_INFLIGHT commands are in
// flight (head-of-line blocking returns only then); READ_DONE and
// PAGE_DONE still run behind either, from anywhere in the queue (see
// takeAhead), since they are local and may be what unblocks it.
func (d *Device) intake() bool {
	busy := false
	for n := 0; n < 64 && len(d.compQ) == 0; n++ {
		// A slot is published when its SEQ word is its index+1: polling the
		// slot itself costs one cache-line transfer per command where
		// polling CMDQ_TAIL and then reading the slot costs two.
		slot := d.cmdSlot(d.cmdHead)
		if seq := d.r.Load64At(slot + uapi.DescSeqOff); seq != d.cmdHead+1 {
			if d.chk != nil {
				d.chk.overrun(d.cmdHead, seq)
			}
			break
		}
		idx := d.cmdHead
		if d.cmdAhead.taken[idx] { // ran ahead of a blocked command: only the head moves
			delete(d.cmdAhead.taken, idx)
			d.cmdHead++
			d.r.StoreOwn64(uapi.RegCmdqHead, d.cmdHead) // its one writer: a release store
			busy = true
			continue
		}
		if d.fence != nil || d.inflight >= d.cfg.MaxInflight {
			if op := uapi.Opcode(d.r.Load64At(slot) & 0xff); op != uapi.OpREADDONE && op != uapi.OpPAGEDONE {
				busy = d.takeAhead() || busy
				break
			}
		}
		desc := d.r.ReadDesc(slot)
		d.cmdHead++
		d.r.StoreOwn64(uapi.RegCmdqHead, d.cmdHead) // its one writer: a release store
		d.take(&desc, idx)
		busy = true
	}
	return busy
}

func (d *Device) cmdSlot(idx uint64) uint64 {
	return d.g.CmdqOff + (idx&(d.g.CmdqEntries-1))*uapi.DescSize
}

// take executes a descriptor taken from the command queue (read once,
// by pointer from here on: each copy of it by value was a descriptor's
// worth of stores on every command's path).
func (d *Device) take(desc *uapi.Desc, idx uint64) {
	d.count(uapi.CtrCmds, 1)
	if t := d.tracer.Load(); t != nil {
		t.emit(d, Event{Kind: EvCmd, Index: idx, Desc: *desc})
	}
	if d.trace {
		d.stamp(uapi.TraceCmdSeen)
	}
	d.execute(desc, idx)
}

// cmdAhead is what the command engine remembers of the published slots
// past a blocked head that it has looked at.
type cmdAhead struct {
	next  uint64          // the next slot to look at (below it, each was seen once)
	taken map[uint64]bool // slots run ahead of the head, skipped when it gets there
}

// takeAhead runs the READ_DONEs and PAGE_DONEs published behind the
// blocked command at the head, in posting order: a PAGE_DONE ends a
// paging hold that may be what keeps that command (or the FENCE before
// it) from completing, as when two nodes page towards each other with
// full windows (docs/lmmc.md). The head moves past them only when it gets
// there, so their slots stay the device's until then. Each slot is looked
// at once, however long the head stays blocked.
func (d *Device) takeAhead() bool {
	busy := false
	end := d.cmdHead + d.g.CmdqEntries
	i := max(d.cmdAhead.next, d.cmdHead+1)
	for ; i != end && len(d.compQ) == 0; i++ {
		slot := d.cmdSlot(i)
		if d.r.Load64At(slot+uapi.DescSeqOff) != i+1 {
			break // not published yet: look again from here
		}
		if op := uapi.Opcode(d.r.Load64At(slot) & 0xff); op != uapi.OpREADDONE && op != uapi.OpPAGEDONE {
			continue
		}
		if d.cmdAhead.taken == nil {
			d.cmdAhead.taken = map[uint64]bool{}
		}
		d.cmdAhead.taken[i] = true
		desc := d.r.ReadDesc(slot)
		d.take(&desc, i)
		busy = true
	}
	d.cmdAhead.next = i
	return busy
}

// validate checks a descriptor before anything is sent.
func (d *Device) validate(c *uapi.Desc) uapi.Errno {
	if c.Opcode == 0 || c.Opcode >= uapi.NumOpcodes {
		return uapi.EBadOpcode
	}
	if c.Flags&^uapi.FlagsValid != 0 || c.Flags&uapi.FlagDirectAMT != 0 && c.Opcode != uapi.OpIPUSH ||
		c.Flags&uapi.FlagTagged != 0 && (c.Opcode != uapi.OpPUSH || c.Operand == 0 || c.Operand > 0xffff) {
		return uapi.EBadFlags
	}
	if (c.Opcode == uapi.OpPAGE || c.Opcode == uapi.OpPAGEDONE) && c.DstNode == d.node {
		return uapi.EBadNode
	}
	switch c.Opcode {
	case uapi.OpPUSH, uapi.OpPULL, uapi.OpIPUSH:
		if c.Length == 0 || c.Length > uapi.MaxXfer {
			return uapi.EBadLength
		}
		if c.LocalAddr%uapi.AddrAlign != 0 || c.Opcode != uapi.OpIPUSH && c.RemoteAddr%uapi.AddrAlign != 0 {
			return uapi.EBadAlign
		}
		if !d.inLinkMem(c.LocalAddr, c.Length) {
			return uapi.EBadAddr
		}
		if c.DstNode == d.node {
			return uapi.EBadNode
		}
		if c.Flags&uapi.FlagDirectAMT != 0 && c.RemoteAddr > 0xffff {
			return uapi.EBadAMT // would alias another entry on the wire
		}
	case uapi.OpFADD8, uapi.OpCAS8:
		if c.Length != 8 {
			return uapi.EBadLength
		}
		if c.LocalAddr%8 != 0 || c.RemoteAddr%8 != 0 {
			return uapi.EBadAlign
		}
		if !d.inLinkMem(c.LocalAddr, 8) {
			return uapi.EBadAddr
		}
		if c.DstNode == d.node {
			return uapi.EBadNode
		}
	}
	return uapi.EOK
}

func (d *Device) execute(c *uapi.Desc, idx uint64) {
	if e := d.validate(c); e != uapi.EOK {
		d.fail(c, idx, e)
		return
	}
	switch c.Opcode {
	case uapi.OpNOP:
		d.done(c, idx)
	case uapi.OpFENCE:
		if d.inflight == 0 {
			d.done(c, idx)
		} else {
			d.fence = &job{desc: *c, idx: idx}
		}
	case uapi.OpREADDONE:
		d.readDone(c, idx)
	case uapi.OpPAGEDONE:
		if p := d.peers[c.DstNode]; p != nil && p.pagingHold {
			p.pagingHold = false // its held frame is retried on the next pass
		}
		d.done(c, idx)
	default: // PUSH, IPUSH, PULL, PAGE, FADD8, CAS8: to a destination's queue
		d.msgID++
		j := d.newJob()
		p := d.peerOf(c.DstNode)
		*j = job{desc: *c, idx: idx, msgID: d.msgID, peer: p}
		d.inflight++
		if c.Opcode.Reads() {
			p.pulls[j.msgID] = j
		}
		if p.pkz == len(p.q) {
			d.sending++
		}
		p.q = append(p.q, j)
	}
}

// newJob takes a job from the free list (steady traffic allocates nothing,
// so the garbage collector stays out of the latency).
func (d *Device) newJob() *job {
	if n := len(d.freeJobs); n > 0 {
		j := d.freeJobs[n-1]
		d.freeJobs = d.freeJobs[:n-1]
		return j
	}
	return new(job)
}

// readDone advances the head of a ring in device-head mode.
func (d *Device) readDone(c *uapi.Desc, idx uint64) {
	if c.RemoteAddr >= d.g.AMTEntries {
		d.fail(c, idx, uapi.EBadAMT)
		return
	}
	e := d.g.AMTOff + c.RemoteAddr*uapi.AMTSize
	cfg := d.r.Load64At(e + uapi.AMTCfg)
	head, tail := d.r.Load64At(e+uapi.AMTHead), d.r.Load64At(e+uapi.AMTTail)
	if cfg>>32&uapi.AMTFlagDevHead == 0 || c.Imm < head || c.Imm > tail {
		d.fail(c, idx, uapi.EBadHead)
		return
	}
	d.r.Store64At(e+uapi.AMTHead, c.Imm)
	d.done(c, idx)
}

// overlaps reports whether [a, a+n) and [b, b+m) share a byte.
func overlaps(a uint64, n uint32, b uint64, m uint32) bool {
	return a < b+uint64(m) && b < a+uint64(n)
}

// mayReorder decides whether j's middle packets may be placed out of order
// at the receiver: a plain PUSH (no per-packet status, not LMMC's tagged
// write, which is ordered with paging) whose remote range no earlier
// command to that node still in flight writes or reads. Then arrival order
// cannot change what the receiver's memory holds once both complete.
func (d *Device) mayReorder(p *peer, j *job) bool {
	c := &j.desc
	if c.Opcode != uapi.OpPUSH || c.Flags&(uapi.FlagPktStatus|uapi.FlagTagged) != 0 || c.Length <= 2*d.maxPayload {
		return false
	}
	for _, x := range p.q {
		if x == j {
			return true
		}
		if (x.desc.Opcode == uapi.OpPUSH || x.desc.Opcode == uapi.OpPULL) && overlaps(c.RemoteAddr, c.Length, x.desc.RemoteAddr, x.desc.Length) {
			return false
		}
		if x.desc.Opcode == uapi.OpPAGE {
			return false // paging moves frames under the receiver's feet
		}
	}
	return true
}

// advance packetizes the commands queued for p, in order, as far as the
// window, the link and the per-pass burst allow; it reports work done.
func (d *Device) advance(p *peer) bool {
	busy := false
	for burst := 0; burst < txBurst && p.pkz < len(p.q); burst++ {
		j := p.q[p.pkz]
		if !p.tx.Room() {
			return busy // more next pass: the receive side runs in between, keeping frames cache-hot
		}
		if p.pkz+1 < len(p.q) && d.tcfg.Lossless && batchable(j) && batchable(p.q[p.pkz+1]) {
			sent, stop := d.coalesce(p)
			busy = busy || sent
			if stop {
				return busy
			}
			if sent {
				continue
			}
		}
		if !j.started {
			j.started, j.unordered = true, d.mayReorder(p, j)
		}
		total := j.desc.Length
		if j.desc.Opcode.Reads() || j.desc.Opcode == uapi.OpPAGE {
			total = 1 // one request packet
		}
		n := min(total-j.off, d.maxPayload)
		e := sentPkt{typ: wire.TypePush, j: j, off: j.off, n: n, last: j.off+max(n, 1) >= total}
		switch j.desc.Opcode {
		case uapi.OpIPUSH:
			e.typ = wire.TypeIPush
		case uapi.OpPULL:
			e.typ, e.n = wire.TypePullReq, 0
		case uapi.OpPAGE:
			e.typ, e.n = wire.TypePage, 0
		case uapi.OpFADD8:
			e.typ, e.n = wire.TypeFAdd8, 0
		case uapi.OpCAS8:
			e.typ, e.n = wire.TypeCAS8, 0
		}
		if j.unordered && j.off != 0 && !e.last {
			e.flags = wire.FlagUnordered
		}
		seq := p.tx.Next()
		if err := d.transmit(p, &e, seq, false); err != nil {
			if d.notSent(p, err) {
				return true
			}
			return busy
		}
		busy = true
		if p.tx.NeedsClock() {
			p.tx.Sent(d.now())
		} else {
			p.tx.SentUntimed()
		}
		p.sent = append(p.sent, e)
		j.off += max(n, 1)
		if e.last {
			d.packetized(p, seq)
		}
	}
	return busy
}

// maxSubLen is the largest PUSH a PUSHB frame carries: small messages,
// whose cost is the frame and not the bytes (a large one's payload
// crosses by reference on the shared-memory link instead).
const maxSubLen = 512

// batchable reports whether j can travel in a PUSHB frame: a whole
// one-packet PUSH not yet started, asking for no per-packet status and
// not LMMC's tagged write.
func batchable(j *job) bool {
	return j.desc.Opcode == uapi.OpPUSH && j.desc.Flags&^uapi.FlagSignal == 0 && !j.started && j.desc.Length <= maxSubLen
}

// coalesce sends the batchable commands at p's packetizing position, as
// many as one PUSHB frame holds (at least two), under one sequence
// number: on a lossless medium a stream of small PUSHes pays one frame,
// one ring slot and one ACK'd packet for a batch instead of one each
// (docs/design.md, "Where a stream of 8-byte messages is bound"). sent:
// a frame left; stop: the link refused it (advance stops, as for any
// packet), or failed the peer.
func (d *Device) coalesce(p *peer) (sent, stop bool) {
	k, size, bytes := 0, 0, uint32(0)
	for p.pkz+k < len(p.q) && k < wire.MaxSubs {
		x := p.q[p.pkz+k]
		sz := wire.SubSize(x.desc.Length)
		if !batchable(x) || size+sz > int(d.maxPayload) {
			break
		}
		size += sz
		bytes += x.desc.Length
		k++
	}
	if k < 2 {
		return false, false
	}
	b := d.newBatch()
	b.jobs = append(b.jobs, p.q[p.pkz:p.pkz+k]...)
	e := sentPkt{typ: wire.TypePushBatch, batch: b, n: bytes, last: true}
	seq := p.tx.Next()
	if err := d.transmit(p, &e, seq, false); err != nil {
		d.freeBatch(b)
		return d.notSent(p, err), true
	}
	if p.tx.NeedsClock() {
		p.tx.Sent(d.now())
	} else {
		p.tx.SentUntimed()
	}
	p.sent = append(p.sent, e)
	for _, j := range b.jobs {
		j.started, j.off = true, j.desc.Length
		d.packetized(p, seq)
	}
	return true, false
}

// newBatch is an empty PUSHB job list from the free list (retire gives
// them back), so a stream of batches allocates nothing.
func (d *Device) newBatch() *pushBatch {
	if n := len(d.freeBatches); n > 0 {
		b := d.freeBatches[n-1]
		d.freeBatches = d.freeBatches[:n-1]
		return b
	}
	return &pushBatch{jobs: make([]*job, 0, wire.MaxSubs)}
}

// freeBatch gives a PUSHB job list back to the free list.
func (d *Device) freeBatch(b *pushBatch) {
	clear(b.jobs)
	b.jobs = b.jobs[:0]
	d.freeBatches = append(d.freeBatches, b)
}

// notSent handles a new packet to p the link did not take: a full link
// blocks it (blocked); any other error fails the peer (nobody on the
// link has that node's address, or it left), which it reports.
func (d *Device) notSent(p *peer, err error) (failed bool) {
	if err != link.ErrFull && !errors.Is(err, link.ErrFull) {
		d.failPeer(p, sendErrno(err))
		return true
	}
	d.blocked(p)
	return false
}

// blocked handles a new packet to p refused by a full link: a link that
// stays full for a timeout counts as one (see transport.Tx.Blocked).
func (d *Device) blocked(p *peer) {
	if p.tx.Unacked() > 0 {
		return // their timer covers it (transport.Tx.Blocked): no clock read per refusal of a full ring
	}
	switch p.tx.Blocked(d.now()) {
	case transport.TimedOut:
		d.count(uapi.CtrTimeouts, 1)
	case transport.Unreachable:
		d.count(uapi.CtrTimeouts, 1)
		d.failPeer(p, uapi.EUnreachable)
	}
}

// packetized notes that the job at p's packetizing position sent its last
// packet (lastSeq): it completes when that is acknowledged (a PULL, when
// its data has landed).
func (d *Device) packetized(p *peer, lastSeq uint32) {
	j := p.q[p.pkz]
	j.sentAll, j.lastSeq = true, lastSeq
	if p.pkz++; p.pkz == len(p.q) {
		d.sending--
	}
}

// transmit encodes and sends packet seq (first send or resend).
func (d *Device) transmit(p *peer, e *sentPkt, seq uint32, resend bool) error {
	h := wire.Header{Version: wire.Version1, Type: e.typ, Flags: wire.FlagSeq | e.flags, SrcNode: d.node, DstNode: p.node, Seq: seq, Offset: e.off, Code: p.tx.Epoch()}
	var payload []byte
	if e.batch != nil {
		// Each sub-message as its own one-packet PUSH would carry it;
		// the header names the sender and the count.
		h.SrcProc, h.MsgLen = e.batch.jobs[0].desc.SrcProc, uint32(len(e.batch.jobs))
		buf := d.batchBuf[:0]
		for _, j := range e.batch.jobs {
			c := &j.desc
			s := wire.Sub{Addr: c.RemoteAddr, Imm: c.Imm, MsgID: j.msgID, Len: c.Length, SrcProc: c.SrcProc}
			if c.Flags&uapi.FlagSignal != 0 {
				s.Flags = wire.FlagSignal
				h.Flags |= wire.FlagSignal // its sender waits for a DONE: the receiver ACKs promptly
			}
			buf = wire.AppendSub(buf, &s, d.lm[c.LocalAddr:c.LocalAddr+uint64(c.Length)])
		}
		d.batchBuf = buf
		payload = buf
	} else if j := e.j; j != nil {
		c := &j.desc
		h.SrcProc, h.DstProc, h.MsgID, h.MsgLen, h.Imm = c.SrcProc, c.DstProc, j.msgID, c.Length, c.Imm
		if c.Flags&uapi.FlagPktStatus != 0 {
			h.Flags |= wire.FlagPktStatus
		}
		if c.Flags&uapi.FlagSignal != 0 {
			h.Flags |= wire.FlagSignal
		}
		switch e.typ {
		case wire.TypePush:
			h.Addr = c.RemoteAddr + uint64(e.off)
			if c.Flags&uapi.FlagTagged != 0 {
				h.Flags |= wire.FlagTagged
				h.Tag = uint16(c.Operand)
			}
		case wire.TypePage:
			h.Addr, h.Imm = c.RemoteAddr, c.Imm // frame, port
		case wire.TypeIPush:
			if c.Flags&uapi.FlagDirectAMT != 0 {
				h.Flags |= wire.FlagDirectAMT
				h.DstProc = uint32(c.RemoteAddr)
			}
		case wire.TypePullReq:
			h.Addr, h.Imm = c.RemoteAddr, c.LocalAddr
		case wire.TypeFAdd8, wire.TypeCAS8:
			h.Addr, h.Imm = c.RemoteAddr, c.LocalAddr
			payload = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(make([]byte, 0, 16), c.Operand), c.Imm)
		}
		if e.n > 0 {
			payload = d.lm[c.LocalAddr+uint64(e.off) : c.LocalAddr+uint64(e.off)+uint64(e.n)]
		}
	} else {
		r := e.r
		h.SrcProc, h.MsgID, h.MsgLen, h.Addr = r.srcProc, r.msgID, r.n, r.dst+uint64(e.off)
		if r.val != nil {
			payload = r.val
		} else {
			payload = d.lm[r.src+uint64(e.off) : r.src+uint64(e.off)+uint64(e.n)]
		}
	}
	if e.off == 0 {
		h.Flags |= wire.FlagFirst
	}
	if e.last {
		h.Flags |= wire.FlagLast
	}
	// A command's own payload is gathered from link memory on its first
	// send: its buffer is the driver's to keep stable until the command
	// completes, which needs the ACK, which needs the frame to have left.
	// A resend is copied: the first send's ACK may complete the command
	// while the resend still waits in the port's queue. A PULL response
	// reads memory that may be changing under the remote read, so it is
	// gathered only where the port copies the payload during the call (no
	// transmit queue) and no checksum must cover the bytes that leave (the
	// shared-memory link): there the frame carries what the memory held
	// when it was copied, as a copy into a frame buffer would, one copy
	// sooner (1 MiB PULLs over shared memory ran at half a PUSH's rate).
	gather := !resend && (e.j != nil || e.r != nil && !d.crc && d.backlog == nil && e.r.val == nil)
	if err := d.send(p, &h, payload, gather); err != nil {
		return err
	}
	d.count(uapi.CtrTxPkts, 1)
	d.count(uapi.CtrTxBytes, uint64(e.n))
	return nil
}

// retransmit runs the retransmission timers that ran out and resends what
// the transport marked (a gap the receiver reported, a timeout, a go-back
// it asked for); a peer that stopped answering fails its commands with
// UNREACHABLE.
func (d *Device) retransmit(now int64) bool {
	busy := false
	var next int64 // the earliest deadline left (transport.Book.Soonest)
	for _, p := range d.peerList {
		if p.pullDeadline != 0 && now >= p.pullDeadline {
			busy = d.expirePulls(p, now) || busy
		}
		p.tx.Stamp(now)
		if p.tx.Due(now) {
			d.expire(p, now)
		}
		if p.tx.Resending() {
			busy = d.resend(p, now) || busy
		}
		for _, at := range [2]int64{p.tx.Deadline(), p.pullDeadline} {
			if at != 0 && (next == 0 || at < next) {
				next = at
			}
		}
	}
	d.book.Settle(next)
	return busy
}

// resend sends what p's transport marked for resending, counted by cause.
func (d *Device) resend(p *peer, now int64) bool {
	n, err := p.tx.Resend(now, func(seq uint32) error {
		return d.transmit(p, &p.sent[seq-p.tx.Acked()-1], seq, true)
	})
	total := n[transport.CauseGap] + n[transport.CauseTimeout] + n[transport.CauseGoBack] + n[transport.CauseProbe]
	d.count(uapi.CtrRetransmits, uint64(total))
	d.count(uapi.CtrRetxGap, uint64(n[transport.CauseGap]))
	d.count(uapi.CtrRetxTimeout, uint64(n[transport.CauseTimeout]))
	d.count(uapi.CtrTLPs, uint64(n[transport.CauseProbe]))
	if err != nil && !errors.Is(err, link.ErrFull) {
		d.failPeer(p, sendErrno(err))
	}
	return total > 0
}

// expire handles p's run-out timer.
func (d *Device) expire(p *peer, now int64) {
	if d.backlog != nil {
		// A packet still in our own port's queue is not lost (resending
		// it would queue it twice), and one that left late is timed, and
		// probed, from when it left.
		queued, last := d.backlog.Backlog([6]byte(wire.NodeMAC(p.node)))
		if queued > 0 {
			last = now
		}
		if !p.tx.LeftAt(last, now) {
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
