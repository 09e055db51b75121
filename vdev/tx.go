package vdev

import (
	"cmp"
	"errors"
	"slices"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// Retransmission backoff after a NACK or timeout: ACP's UDP transport figures.
const (
	minBackoff = 100_000     // ns
	maxBackoff = 100_000_000 // ns
	// losslessRTO is the least retransmission timeout on a medium that
	// never loses a frame (the in-memory hub: backpressure, not loss):
	// there a timeout only means the engine was off its core, and 100 us
	// fired for that under load, resending what was on its way. The timer
	// still makes a peer that stopped answering unreachable.
	losslessRTO = 5_000_000 // ns
	// graceP is how many more engine passes a passed deadline waits before
	// it counts as a timeout (see retransmit): with the ACK rule, an answer
	// from a peer on the same engine is read within three.
	graceP = 4
)

// txBurst bounds the packets one command sends per engine pass, so a large
// transfer interleaves with receive processing instead of queueing a whole
// message of frames (which would push link memory out of the cache).
const txBurst = 8

// job is one command in progress: being packetized, or sent and waiting for
// its acknowledgement (PUSH/IPUSH) or its data (PULL).
type job struct {
	desc    uapi.Desc
	idx     uint64
	msgID   uint32
	peer    *peer
	off     uint32 // next byte to packetize
	lastSeq uint32 // sequence number of the last packet, once all are sent
	sentAll bool
	err     uapi.Errno
	pulled  uint32 // PULL: bytes landed
}

// respJob sends the data a remote PULL asked for.
type respJob struct {
	msgID   uint32
	src     uint64 // local link address read
	dst     uint64 // requester's link address
	n, off  uint32
	srcProc uint32
}

// txEntry is one sent, unacknowledged packet, kept as metadata: it is
// re-encoded from link memory if it must be sent again (the command has not
// completed, so its buffer is still the sender's to keep stable).
type txEntry struct {
	seq    uint32
	typ    wire.Type
	sentAt int64 // last time on the link
	resent bool  // sent more than once: its ACK says nothing of the path's round trip
	j      *job
	r      *respJob
	off    uint32
	n      uint32
	last   bool
}

// peer is the per-destination reliability state.
type peer struct {
	node        uint16
	nextSeq     uint32
	acked       uint32 // highest cumulative ACK received
	unacked     []txEntry
	jobs        []*job // PUSH/IPUSH awaiting ACK, in sequence order
	resp        []*respJob
	deadline    int64  // >0: retransmission timer (RTO, or a NACK's go-back)
	expiredPass uint64 // the engine pass that first saw deadline passed (0: not yet)
	resuming    bool   // the deadline continues a go-back the link cut short, from resumeSeq
	resumeSeq   uint32
	roundEnd    int64  // resuming: when the cut-short go-back counts as timed out itself
	resend      bool   // the deadline is a NACK's go-back, not a timeout
	backoff     int64  // current retransmission interval
	srtt        int64  // smoothed round trip of acknowledged packets, ns
	timeouts    int    // consecutive timeouts without progress
	expect      uint32 // next sequence number to accept
	gotAny      bool   // something was accepted, so Ack = expect-1 means something
	owedCtl     []ctl  // NACKs the link could not take yet
	held        []byte // hold mode: the frame this peer sent that we cannot place yet
	pagingHold  bool   // its paging request was delivered: place nothing more until PAGE_DONE
	txEpoch     uint16 // our sending session with this peer (the Code field of data frames)
	rxEpoch     uint16 // the peer's sending session we follow
	rxKnown     bool   // rxEpoch was seen
	heldRF      bool   // hold mode: this peer's ring-full stall was counted
	rfOwed      bool   // its RING_FULL status still waits for status ring room
	rfAMT       uint16 // the ring that status names
	ackDue      bool   // something accepted (or a duplicate) awaits our cumulative ACK
	ackPass     uint64 // the engine pass in which ackDue was set
	rxSinceAck  int    // frames that made an ACK due since the last one went out
	pulls       map[uint32]*job
}

func (d *Device) peerOf(node uint16) *peer {
	p := d.peers[node]
	if p == nil {
		// The epoch starts from the clock, so a restarted device's packets
		// are known for a new session by the peer that still remembers it.
		p = &peer{node: node, nextSeq: 1, expect: 1, backoff: minBackoff, pulls: map[uint32]*job{}, txEpoch: uint16(monotime.Now() >> 24)}
		d.peers[node] = p
	}
	return p
}

func (p *peer) windowFull(w int) bool { return len(p.unacked) >= w || p.resend }

// rto is how long to wait for p's ACK before sending again: the backoff,
// but never below three smoothed round trips (a slow medium is not a lost
// packet) nor the medium's floor, and never above maxBackoff.
func (d *Device) rto(p *peer) int64 { return min(max(p.backoff, 3*p.srtt, d.rtoFloor), maxBackoff) }

// setDeadline arms p's retransmission timer; timers counts armed peers so
// the engine looks at the clock only when one is armed.
func (d *Device) setDeadline(p *peer, at int64, resend bool) {
	if p.deadline == 0 {
		d.timers++
	}
	p.deadline, p.resend, p.expiredPass, p.resuming = at, resend, 0, false
}

func (d *Device) clearDeadline(p *peer) {
	if p.deadline != 0 {
		d.timers--
	}
	p.deadline, p.resend, p.expiredPass, p.resuming = 0, false, 0, false
}

// sent records a packet just put on the link and arms the timer if idle.
func (d *Device) sent(p *peer, e *txEntry) {
	e.sentAt = monotime.Now()
	if p.deadline == 0 {
		d.setDeadline(p, e.sentAt+d.rto(p), false)
	}
}

// pollCommands consumes descriptors and advances sends. It reports work done.
func (d *Device) pollCommands() bool {
	busy := false
	for len(d.compQ) > 0 { // completions wait for status room, in order
		if !d.postStatus(&d.compQ[0]) {
			return busy
		}
		d.compQ = d.compQ[1:]
		busy = true
	}
	if d.cur != nil {
		sent := d.cur.off
		if !d.advance(d.cur) {
			return d.readDoneAhead() || busy || d.cur.off != sent
		}
		busy = true
	}
	for n := 0; n < 64; n++ {
		// A slot is published when its SEQ word is its index+1: polling the
		// slot itself costs one cache-line transfer per command where
		// polling CMDQ_TAIL and then reading the slot costs two.
		slot := d.g.CmdqOff + (d.cmdHead&(d.g.CmdqEntries-1))*uapi.DescSize
		if d.r.Load64At(slot+uapi.DescSeqOff) != d.cmdHead+1 {
			break
		}
		desc := d.r.ReadDesc(slot)
		idx := d.cmdHead
		d.cmdHead++
		d.r.Store64(uapi.RegCmdqHead, d.cmdHead)
		d.count(uapi.CtrCmds, 1)
		if d.trace {
			d.stamp(uapi.TraceCmdSeen)
		}
		busy = true
		d.execute(desc, idx)
		if d.cur != nil || len(d.compQ) > 0 {
			break
		}
	}
	return busy
}

// readDoneAhead runs READ_DONE and PAGE_DONE commands queued behind a
// blocked transfer: they are local, need no order with it, and may be what
// unblocks it (a hold-mode stall on a device-head ring is released only by
// READ_DONE; two nodes paging towards each other each hold the data the
// other's blocked transfer waits on until PAGE_DONE).
func (d *Device) readDoneAhead() bool {
	busy := false
	for len(d.compQ) == 0 {
		slot := d.g.CmdqOff + (d.cmdHead&(d.g.CmdqEntries-1))*uapi.DescSize
		if d.r.Load64At(slot+uapi.DescSeqOff) != d.cmdHead+1 {
			break
		}
		desc := d.r.ReadDesc(slot)
		if desc.Opcode != uapi.OpREADDONE && desc.Opcode != uapi.OpPAGEDONE {
			break
		}
		idx := d.cmdHead
		d.cmdHead++
		d.r.Store64(uapi.RegCmdqHead, d.cmdHead)
		d.count(uapi.CtrCmds, 1)
		d.execute(desc, idx)
		busy = true
	}
	return busy
}

// fail completes a command with an error status naming it and the reason.
func (d *Device) fail(desc *uapi.Desc, idx uint64, e uapi.Errno) {
	d.setError(desc.Opcode, idx, e)
	d.complete(&uapi.Status{Type: uapi.StError, Opcode: desc.Opcode, Err: e, End: idx, Cookie: desc.Cookie,
		SrcNode: d.node, SrcProc: desc.SrcProc})
}

func (d *Device) complete(s *uapi.Status) {
	if len(d.compQ) > 0 || !d.postStatus(s) {
		d.compQ = append(d.compQ, *s)
	}
}

func (d *Device) done(desc *uapi.Desc, idx uint64) {
	if desc.Flags&uapi.FlagSignal != 0 {
		d.complete(&uapi.Status{Type: uapi.StDone, Opcode: desc.Opcode, End: idx, Cookie: desc.Cookie,
			SrcNode: d.node, SrcProc: desc.SrcProc, Length: desc.Length})
	}
}

func (d *Device) inLinkMem(addr uint64, n uint32) bool {
	return addr <= d.g.LinkMemSize && uint64(n) <= d.g.LinkMemSize-addr
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
	}
	return uapi.EOK
}

func (d *Device) execute(c uapi.Desc, idx uint64) {
	if e := d.validate(&c); e != uapi.EOK {
		d.fail(&c, idx, e)
		return
	}
	switch c.Opcode {
	case uapi.OpNOP:
		d.done(&c, idx)
	case uapi.OpFENCE:
		j := &job{desc: c, idx: idx}
		if !d.advance(j) {
			d.cur = j
		}
	case uapi.OpREADDONE:
		d.readDone(&c, idx)
	case uapi.OpPAGEDONE:
		if p := d.peers[c.DstNode]; p != nil && p.pagingHold {
			p.pagingHold = false // its held frame is retried on the next pass
		}
		d.done(&c, idx)
	default: // PUSH, IPUSH, PULL
		d.msgID++
		j := d.newJob()
		*j = job{desc: c, idx: idx, msgID: d.msgID, peer: d.peerOf(c.DstNode)}
		d.inflight++
		if c.Opcode == uapi.OpPULL {
			j.peer.pulls[j.msgID] = j
		}
		if !d.advance(j) {
			d.cur = j
		}
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

// advance packetizes as much of j as the window and link allow; it reports
// whether j no longer blocks the command queue.
func (d *Device) advance(j *job) bool {
	if j.desc.Opcode == uapi.OpFENCE {
		if d.inflight > 0 {
			return false
		}
		d.cur = nil
		d.done(&j.desc, j.idx)
		return true
	}
	p := j.peer
	total := j.desc.Length
	if j.desc.Opcode == uapi.OpPULL || j.desc.Opcode == uapi.OpPAGE {
		total = 1 // one request packet
	}
	for burst := 0; j.off < total; burst++ {
		if p.windowFull(d.cfg.Window) || burst == txBurst {
			return false // more next pass: the receive side runs in between, keeping frames cache-hot
		}
		n := min(total-j.off, d.maxPayload)
		typ := wire.TypePush
		switch j.desc.Opcode {
		case uapi.OpIPUSH:
			typ = wire.TypeIPush
		case uapi.OpPULL:
			typ, n = wire.TypePullReq, 0
		case uapi.OpPAGE:
			typ, n = wire.TypePage, 0
		}
		e := txEntry{seq: p.nextSeq, typ: typ, j: j, off: j.off, n: n, last: j.off+max(n, 1) >= total}
		if err := d.transmit(p, &e, false); err != nil {
			if errors.Is(err, link.ErrFull) {
				return false
			}
			d.failPeer(p, j, uapi.EBadNode) // nobody on the link has that node's address
			d.cur = nil
			return true
		}
		p.nextSeq++
		d.sent(p, &e)
		p.unacked = append(p.unacked, e)
		j.off += max(n, 1)
	}
	j.sentAll = true
	j.lastSeq = p.nextSeq - 1
	if j.desc.Opcode != uapi.OpPULL {
		p.jobs = append(p.jobs, j)
	}
	d.cur = nil
	return true
}

// transmit encodes and sends one sequenced packet (first send or resend).
func (d *Device) transmit(p *peer, e *txEntry, resend bool) error {
	h := wire.Header{Version: wire.Version1, Type: e.typ, Flags: wire.FlagSeq, SrcNode: d.node, DstNode: p.node, Seq: e.seq, Offset: e.off, Code: p.txEpoch}
	var payload []byte
	if j := e.j; j != nil {
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
		}
		if e.n > 0 {
			payload = d.lm[c.LocalAddr+uint64(e.off) : c.LocalAddr+uint64(e.off)+uint64(e.n)]
		}
	} else {
		r := e.r
		h.SrcProc, h.MsgID, h.MsgLen, h.Addr = r.srcProc, r.msgID, r.n, r.dst+uint64(e.off)
		payload = d.lm[r.src+uint64(e.off) : r.src+uint64(e.off)+uint64(e.n)]
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
	// while the resend still waits in the port's queue. A PULL response is
	// copied too, since the memory it reads may be changing under a remote
	// read and the checksum must cover the bytes that leave.
	if err := d.send(p, &h, payload, e.j != nil && !resend); err != nil {
		return err
	}
	d.count(uapi.CtrTxPkts, 1)
	d.count(uapi.CtrTxBytes, uint64(e.n))
	return nil
}

// send frames a header and payload to p, piggybacking the cumulative ACK.
// gather: a port that can sends the payload from where it lies.
func (d *Device) send(p *peer, h *wire.Header, payload []byte, gather bool) error {
	if p.gotAny {
		h.Flags |= wire.FlagAckValid
		h.Ack = p.expect - 1
	}
	if d.crc {
		h.Flags |= wire.FlagCRC
	}
	if gather && d.vec != nil && len(payload) > 0 {
		head := wire.AppendHead(d.port.Buffer(), wire.NodeMAC(p.node), d.mac, h, payload)
		if err := d.vec.SendVec(head, payload); err != nil {
			d.port.Release(head)
			return err
		}
	} else {
		f := wire.AppendFrame(d.port.Buffer(), wire.NodeMAC(p.node), d.mac, h, payload)
		if err := d.port.Send(f); err != nil {
			d.port.Release(f)
			return err
		}
	}
	if d.trace && h.Type <= wire.TypeIPush {
		d.stamp(uapi.TraceTx)
	}
	if h.Flags&wire.FlagAckValid != 0 {
		d.ackSent(p)
	}
	return nil
}

// ackEvery is how many received frames make an ACK go at the end of the
// receive burst instead of waiting for a reply to carry it: a streaming
// sender's window must keep moving.
func (d *Device) ackEvery() int { return max(1, d.cfg.Window/8) }

// oweAck notes that p's frames (accepted, or a duplicate) want our
// cumulative ACK.
func (d *Device) oweAck(p *peer) {
	if !p.ackDue {
		p.ackDue, p.ackPass = true, d.pass
		d.acksOwed++
	}
	p.rxSinceAck++
}

// ackSent clears what a frame carrying our cumulative ACK paid.
func (d *Device) ackSent(p *peer) {
	if p.ackDue {
		p.ackDue = false
		d.acksOwed--
	}
	p.rxSinceAck = 0
}

// ctl is a control frame (NACK) the link could not take yet.
type ctl struct {
	typ   wire.Type
	seq   uint32
	code  uint16
	flags wire.Flags
}

// sendCtl sends a NACK now or keeps it to send on a later pass: a lost
// refusal NACK would let the next cumulative ACK complete the refused
// command as if it had succeeded.
func (d *Device) sendCtl(p *peer, typ wire.Type, seq uint32, code uint16, flags wire.Flags) {
	if len(p.owedCtl) == 0 && d.sendAck(p, typ, seq, code, flags) == nil {
		return
	}
	p.owedCtl = append(p.owedCtl, ctl{typ, seq, code, flags})
	d.owed++
}

// flushOwed retries control frames the link refused, in order.
func (d *Device) flushOwed() bool {
	busy := false
	for _, p := range d.peers {
		for len(p.owedCtl) > 0 {
			c := p.owedCtl[0]
			if d.sendAck(p, c.typ, c.seq, c.code, c.flags) != nil {
				return busy
			}
			p.owedCtl = p.owedCtl[1:]
			d.owed--
			busy = true
		}
	}
	return busy
}

// sendAck sends a standalone ACK (or NACK with code) to p.
func (d *Device) sendAck(p *peer, typ wire.Type, seq uint32, code uint16, flags wire.Flags) error {
	h := wire.Header{Version: wire.Version1, Type: typ, Flags: flags, SrcNode: d.node, DstNode: p.node, Seq: seq, Code: code}
	if err := d.send(p, &h, nil, false); err != nil {
		return err
	}
	if typ == wire.TypeAck {
		d.count(uapi.CtrAcksTx, 1)
	}
	return nil
}

// onAck retires packets and completes commands up to a cumulative ACK.
func (d *Device) onAck(p *peer, ack uint32) {
	if int32(ack-p.acked) <= 0 || int32(ack-(p.nextSeq-1)) > 0 {
		return // old, or acknowledging what was never sent
	}
	p.acked = ack
	now := monotime.Now()
	i := 0
	for i < len(p.unacked) && int32(p.unacked[i].seq-ack) <= 0 {
		i++
	}
	// Time the oldest packet the ACK retires: it waited longest for it
	// (ACKs are cumulative and may wait a pass), so under a stream the
	// timer learns what a burst really takes instead of firing spuriously
	// and sending a whole window again. Karn: only first transmissions.
	if i > 0 && !p.unacked[0].resent {
		if rtt := now - p.unacked[0].sentAt; p.srtt == 0 {
			p.srtt = rtt
		} else {
			p.srtt += (rtt - p.srtt) / 8
		}
	}
	p.unacked = p.unacked[:copy(p.unacked, p.unacked[i:])] // compact in place: no allocation per ACK
	p.backoff, p.timeouts = minBackoff, 0
	if len(p.unacked) > 0 {
		d.setDeadline(p, now+d.rto(p), false)
	} else {
		d.clearDeadline(p)
	}
	i = 0
	for i < len(p.jobs) && int32(p.jobs[i].lastSeq-ack) <= 0 {
		j := p.jobs[i]
		d.inflight--
		if j.err != uapi.EOK {
			d.fail(&j.desc, j.idx, j.err)
		} else {
			d.done(&j.desc, j.idx)
		}
		d.freeJobs = append(d.freeJobs, j) // every packet of it is retired: nothing refers to it
		i++
	}
	n := copy(p.jobs, p.jobs[i:])
	clear(p.jobs[n:])
	p.jobs = p.jobs[:n]
	// responder jobs whose every packet is acknowledged are finished
	for len(p.resp) > 0 && p.resp[0].off >= p.resp[0].n && !p.hasUnacked(p.resp[0]) {
		p.resp = p.resp[1:]
		d.respJobs--
	}
}

func (p *peer) hasUnacked(r *respJob) bool {
	for i := range p.unacked {
		if p.unacked[i].r == r {
			return true
		}
	}
	return false
}

// onNack handles a NACK: code 0 asks for a resend (ring full at the
// receiver); any other code refuses packet seq for good (the receiver
// consumed it) and fails its command with that reason.
func (d *Device) onNack(p *peer, seq uint32, code uint16, resume bool) {
	d.count(uapi.CtrNACKsRx, 1)
	if code != 0 {
		for i := range p.unacked {
			e := &p.unacked[i]
			if e.seq == seq && e.j != nil && e.j.err == uapi.EOK {
				e.j.err = uapi.Errno(code)
				if e.j.desc.Opcode == uapi.OpPULL { // no data will come: complete now
					delete(p.pulls, e.j.msgID)
					d.inflight--
					d.fail(&e.j.desc, e.j.idx, e.j.err)
				}
			}
		}
		d.onAck(p, seq)
		return
	}
	if resume { // the receiver's hold is over and it asks for the rest now
		d.onAck(p, seq-1)
		if len(p.unacked) > 0 {
			d.setDeadline(p, monotime.Now(), true)
		}
		return
	}
	if int32(seq-p.acked) <= 0 || p.resend {
		return
	}
	d.onAck(p, seq-1)
	d.setDeadline(p, monotime.Now()+p.backoff, true) // go back after the backoff; never counts as a timeout
	p.backoff = min(p.backoff*2, maxBackoff)
}

// retransmit goes back to the first unacknowledged packet of every peer
// whose timer ran out: after a NACK's backoff, or after a timeout (then the
// interval doubles, and MaxTimeouts in a row without progress make the
// peer unreachable: its commands fail with UNREACHABLE).
func (d *Device) retransmit(now int64) bool {
	busy := false
	for _, p := range d.peers {
		if p.deadline == 0 || now < p.deadline {
			continue
		}
		if len(p.unacked) == 0 {
			d.clearDeadline(p)
			continue
		}
		if d.backlog != nil {
			// A packet still in our own port's queue is not lost (resending
			// it would queue it twice): look again after the timeout, or,
			// for a go-back, shortly. A timed-out packet that left late is
			// timed from when it left.
			queued, last := d.backlog.Backlog([6]byte(wire.NodeMAC(p.node)))
			if queued > 0 {
				p.deadline, p.expiredPass = now+d.rto(p), 0 // re-armed: a go-back stays one
				if p.resend {
					p.deadline = now + minBackoff
				}
				continue
			}
			if at := last + d.rto(p); !p.resend && at > now {
				p.deadline, p.expiredPass = at, 0
				continue
			}
		}
		if !p.resend {
			// The deadline passed, but the clock also runs while this
			// engine is off its core, and then the answer may be waiting
			// unread (or, for a peer on this engine, unsent: its ACK goes
			// out one pass after the frame arrives). Give the receive side
			// graceP passes before calling it a timeout: microseconds
			// against 100 us. A go-back (NACK, or one the link cut short)
			// was asked for and goes at once.
			if p.expiredPass == 0 {
				p.expiredPass = d.pass
				continue
			}
			if d.pass-p.expiredPass < graceP {
				continue
			}
			p.expiredPass = 0
			if d.countTimeout(p) {
				busy = true
				continue
			}
		} else if p.resuming && now >= p.roundEnd {
			// A go-back the link has kept cut short for a whole timeout
			// (a full link to a peer that stopped draining it) counts as
			// one, so such a peer too becomes unreachable.
			if d.countTimeout(p) {
				busy = true
				continue
			}
			p.roundEnd = now + d.rto(p)
		}
		for i := range p.unacked {
			e := &p.unacked[i]
			if p.resuming && int32(e.seq-p.resumeSeq) < 0 {
				continue // resent earlier in this go-back
			}
			if err := d.transmit(p, e, true); err != nil {
				// The link is busy, the peer is not silent: go on from
				// this packet shortly, as part of the same go-back (never
				// a new timeout; and never from the start again, or a
				// window larger than the link's queue would loop forever
				// without counting towards UNREACHABLE).
				roundEnd := p.roundEnd
				if !p.resuming {
					roundEnd = now + d.rto(p)
				}
				d.setDeadline(p, now+minBackoff, true)
				p.resuming, p.resumeSeq, p.roundEnd = true, e.seq, roundEnd
				return busy
			}
			e.sentAt, e.resent = now, true
			d.count(uapi.CtrRetransmits, 1)
			busy = true
		}
		d.setDeadline(p, now+d.rto(p), false)
	}
	return busy
}

// countTimeout records a timeout of p: the interval doubles, and
// MaxTimeouts in a row without progress fail the peer's commands with
// UNREACHABLE (then it reports true).
func (d *Device) countTimeout(p *peer) bool {
	d.count(uapi.CtrTimeouts, 1)
	if p.timeouts++; p.timeouts >= d.cfg.MaxTimeouts {
		d.failPeer(p, nil, uapi.EUnreachable)
		return true
	}
	p.backoff = min(2*d.rto(p), maxBackoff)
	return false
}

// serveResponses sends PULL response data.
func (d *Device) serveResponses() bool {
	busy := false
	for _, p := range d.peers {
		for _, r := range p.resp {
			for r.off < r.n {
				if p.windowFull(d.cfg.Window) {
					break
				}
				n := min(r.n-r.off, d.maxPayload)
				e := txEntry{seq: p.nextSeq, typ: wire.TypePullResp, r: r, off: r.off, n: n, last: r.off+n >= r.n}
				if d.transmit(p, &e, false) != nil {
					return busy
				}
				p.nextSeq++
				d.sent(p, &e)
				p.unacked = append(p.unacked, e)
				r.off += n
				busy = true
			}
		}
	}
	return busy
}

// flushAcks sends the ACKs that no data frame carried. An ACK made due in
// pass N waits for the command engine's look in pass N+1, so a reply the
// driver posts meanwhile carries it (a ping-pong then sends two frames per
// round trip, not four); it goes at the end of pass N+1 at the latest,
// never on a timer. burst: only the peers whose frames since the last ACK
// reached ackEvery (called when a receive burst ends). An ACK the link
// refused stays due and is tried again on the next pass.
func (d *Device) flushAcks(burst bool) {
	for _, p := range d.peers {
		if !p.ackDue || len(p.owedCtl) > 0 { // owed NACKs go first: they carry the same ACK
			continue
		}
		if burst && p.rxSinceAck < d.ackEvery() || !burst && p.ackPass == d.pass && p.rxSinceAck < d.ackEvery() {
			continue
		}
		if d.sendAck(p, wire.TypeAck, 0, 0, 0) == nil {
			d.ackSent(p) // also when nothing was accepted yet (a bare ACK): never resend it every pass
		}
	}
}

// failPeer fails every command to a peer that cannot be reached (j too,
// which may not be registered anywhere yet), in command order.
func (d *Device) failPeer(p *peer, j *job, e uapi.Errno) {
	seen := map[*job]bool{}
	if j != nil {
		seen[j] = true
	}
	for _, x := range p.unacked {
		if x.j != nil {
			seen[x.j] = true
		}
	}
	if d.cur != nil && d.cur.peer == p {
		seen[d.cur] = true
	}
	for _, x := range p.jobs {
		seen[x] = true
	}
	for _, x := range p.pulls {
		seen[x] = true
	}
	jobs := make([]*job, 0, len(seen))
	for x := range seen {
		jobs = append(jobs, x)
	}
	slices.SortFunc(jobs, func(a, b *job) int { return cmp.Compare(a.idx, b.idx) })
	for _, x := range jobs {
		d.inflight--
		d.fail(&x.desc, x.idx, e)
	}
	d.clearDeadline(p)
	if p.held != nil {
		d.port.Release(p.held)
		d.holding--
	}
	d.respJobs -= len(p.resp)
	d.owed -= len(p.owedCtl)
	// Start a new sending session: sequence numbers from 1 under a new
	// epoch, which tells the receiver to expect 1 again. Deleting the peer
	// instead would also forget what we expect from it, and renumbering
	// under the old epoch would make the peer take new packets for
	// duplicates of old ones it may have placed.
	p.txEpoch++
	p.nextSeq, p.acked = 1, 0
	p.unacked, p.jobs, p.resp, p.owedCtl = p.unacked[:0], p.jobs[:0], nil, nil
	p.pulls = map[uint32]*job{}
	p.held, p.pagingHold, p.heldRF, p.rfOwed = nil, false, false, false
	p.backoff, p.timeouts = minBackoff, 0
}
