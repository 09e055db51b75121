package fmpl

import (
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// Msg describes a completed receive: who sent it, under which matching
// area index (the sender's, which a TagAny receive learns only here), and
// how many bytes arrived.
type Msg struct {
	Source int // rank in the communicator
	Index  int
	Size   int
}

// Alloc returns n bytes of link memory (64-byte aligned) for buffers: a
// send from it and a receive into it move no byte through the CPU (zero
// copy); buffers elsewhere are copied through link memory. Free returns it.
func (w *World) Alloc(n int) ([]byte, error) {
	if n <= 0 {
		return nil, fmt.Errorf("alloc %d bytes: %w", n, ErrCount)
	}
	e, ok := w.heap.alloc(uint64(n))
	if !ok {
		return nil, fmt.Errorf("alloc %d bytes (largest free %d): %w", n, w.heap.largest(), ErrNoMemory)
	}
	return w.lm[e.addr : e.addr+uint64(n) : e.addr+e.size], nil
}

// Free returns a buffer Alloc gave.
func (w *World) Free(b []byte) error {
	a, ok := w.linkAddr(b)
	if !ok {
		return fmt.Errorf("free: buffer not in link memory: %w", ErrConfig)
	}
	if !w.heap.free(a) {
		return fmt.Errorf("free %#x: not allocated: %w", a, ErrConfig)
	}
	return nil
}

// linkAddr is the link address of b when b lies in link memory and starts
// 8-byte aligned (what a PUSH may name), so it can be sent from or
// received into without a copy.
func (w *World) linkAddr(b []byte) (uint64, bool) {
	if cap(b) == 0 || len(w.lm) == 0 {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(w.lm)))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(w.lm)) || (p-base)%uapi.AddrAlign != 0 {
		return 0, false
	}
	return uint64(p - base), true
}

// world maps a communicator rank to a world rank.
func (w *World) world(comm Comm, r int) (int, error) {
	c, err := w.comm(comm)
	if err != nil {
		return 0, err
	}
	if r < 0 || r >= len(c.ranks) {
		return 0, fmt.Errorf("rank %d of communicator %d (size %d): %w", r, comm, len(c.ranks), ErrRank)
	}
	wr := c.ranks[r]
	if wr == w.rank {
		return 0, fmt.Errorf("rank %d is this process (no self messages): %w", r, ErrRank)
	}
	return wr, nil
}

func (w *World) userIdx(idx int) error {
	if idx < 0 || idx >= w.cfg.Count {
		return fmt.Errorf("index %d (count %d): %w", idx, w.cfg.Count, ErrIndex)
	}
	return nil
}

// Isend starts sending buf to rank dst of comm under matching area idx
// (fmpl_isend). buf must stay unchanged until IsendWait.
func (w *World) Isend(buf []byte, dst, idx int, comm Comm) error {
	if !w.live {
		return ErrNotInit
	}
	r, err := w.world(comm, dst)
	if err != nil {
		return fmt.Errorf("isend: %w", err)
	}
	if err := w.userIdx(idx); err != nil {
		return fmt.Errorf("isend to %d: %w", dst, err)
	}
	return w.isend(buf, r, idx, false)
}

func (w *World) isend(buf []byte, r, idx int, poison bool) error {
	sl := &w.slots[w.slotOff(r, idx)]
	if sl.send != nil && sl.send.spooled {
		// The caller was told that send completed: this one queues behind
		// it until the receiver takes it.
		if err := w.waitFor(r, func() bool { return sl.send == nil }, -1); err != nil {
			return fmt.Errorf("isend to rank %d index %d behind a spooled send: %w", r, idx, err)
		}
	}
	if sl.send != nil {
		return fmt.Errorf("isend to rank %d index %d: %w", r, idx, ErrInFlight)
	}
	if len(buf) > uapi.MaxXfer {
		return fmt.Errorf("isend of %d bytes: %w", len(buf), ErrCount)
	}
	op := &sl.sendStore // no allocation on the path: a slot holds one send at a time
	*op = sendOp{peer: r, idx: idx, size: len(buf), poison: poison}
	if a, ok := w.linkAddr(buf); ok {
		op.addr = a
	} else if len(buf) > InlineMax {
		e, ok := w.heap.alloc(uint64(len(buf)))
		if !ok {
			return fmt.Errorf("isend of %d bytes from host memory: %w", len(buf), ErrNoMemory)
		}
		copy(w.lm[e.addr:], buf)
		op.tmp, op.addr = e, e.addr
	} else {
		op.host = buf
	}
	if p := &w.peers[r]; p.dead != nil {
		w.heap.free(op.tmp.addr)
		return fmt.Errorf("isend: %w", p.dead)
	}
	sl.send = op
	w.peers[r].waiting = append(w.peers[r].waiting, op)
	if sl.hdr {
		w.hdrq = append(w.hdrq, readyHdr{r, idx})
	} else if w.slots[w.slotOff(r, w.nsl-1)].hdr {
		w.hdrq = append(w.hdrq, readyHdr{r, w.nsl - 1})
	}
	w.performReady()
	return nil
}

// performReady sends every waiting send whose header has come: the
// header of its own index first, else the pair's TagAny header.
func (w *World) performReady() {
	q := w.hdrq
	w.hdrq = w.hdrq[:0]
	for i, h := range q {
		sl := &w.slots[w.slotOff(h.peer, h.idx)]
		if !sl.hdr {
			continue
		}
		var op *sendOp
		if h.idx == w.nsl-1 { // a TagAny receive: the oldest send waiting for this peer
			for _, o := range w.peers[h.peer].waiting {
				if own := &w.slots[w.slotOff(h.peer, o.idx)]; !own.hdr && o.idx < w.cfg.Count {
					op = o
					break
				}
			}
		} else if o := sl.send; o != nil && !o.posted {
			op = o
		}
		if op == nil {
			continue
		}
		if !w.perform(op, h.idx) {
			w.hdrq = append(w.hdrq, q[i:]...) // staging full: try again on the next progress
			return
		}
	}
}

// perform sends op's body into the receive buffer the header at slot
// hidx names, then the receiver's completion flag. The two PUSHes go to
// one destination in posting order, and the flag is a single packet the
// receiving device accepts only in sequence, so it lands after every
// packet of the body (docs/fmpl.md). It reports false when the staging
// ring has no room yet.
func (w *World) perform(op *sendOp, hidx int) bool {
	r := op.peer
	p := &w.peers[r]
	off := w.slotOff(r, hidx)
	sl := &w.slots[off]
	trunc := op.size > int(sl.hdrSize)
	inline := !trunc && op.size <= InlineMax
	need := uint64(8)
	if inline {
		need += align(uint64(op.size), 8)
	}
	w.staging.reclaim(w)
	at, ok := w.staging.alloc(need)
	if !ok {
		return false
	}
	if w.bdOn {
		w.tHdr = monotime.Now()
	}
	flag := uint64(flagValid) | uint64(op.idx)<<flagIdxShift | uint64(op.size)&sizeMask
	var imm uint64
	if op.poison {
		flag |= flagPoison
	}
	dst := sl.hdrAddr
	sl.hdr = false
	w.store(w.match+off*hdrBytes, 0) // reset the matching area (the paper's last step)
	w.store(w.match+off*hdrBytes+8, 0)
	p.waiting = slices.DeleteFunc(p.waiting, func(o *sendOp) bool { return o == op })
	if trunc {
		flag |= flagTrunc
		op.err = fmt.Errorf("send of %d bytes to rank %d index %d, receive buffer %d: %w", op.size, r, op.idx, sl.hdrSize, ErrTruncated)
	} else if op.size <= ImmMax && op.size > 0 {
		b := op.host
		if b == nil {
			b = w.lm[op.addr : op.addr+uint64(op.size)]
		}
		for i, c := range b {
			imm |= uint64(c) << (8 * i)
		}
		flag |= flagImm
		op.inline = true
	} else if op.size > 0 {
		src := op.addr
		if inline {
			src = at + 8
			if op.host != nil {
				copy(w.lm[src:src+uint64(op.size)], op.host)
			} else {
				copy(w.lm[src:src+uint64(op.size)], w.lm[op.addr:op.addr+uint64(op.size)])
			}
			op.inline = true
		}
		if _, err := w.post(&uapi.Desc{Opcode: uapi.OpPUSH, DstNode: p.node, SrcProc: w.d.GPID(), Length: uint32(op.size),
			LocalAddr: src, RemoteAddr: dst, Cookie: cookie(ckBody, r)}); err != nil {
			op.err = err
		}
	}
	op.host = nil
	w.store(at, flag)
	idx, err := w.post(&uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: p.node, SrcProc: w.d.GPID(),
		Length: 8, LocalAddr: at, RemoteAddr: w.flags + w.slotOff(w.rank, hidx)*8, Imm: imm, Cookie: cookie(ckFlag, r)})
	if err != nil && op.err == nil {
		op.err = err
	}
	op.cmd = idx
	op.posted = true
	p.lastSig = idx + 1
	w.staging.commit(r, idx)
	w.stats.Sends++
	if op.spooled {
		w.spool.performed++
	}
	return true
}

// sendDone reports whether op's buffer may be reused.
func (w *World) sendDone(op *sendOp) bool {
	if !op.posted {
		return false
	}
	return op.inline || op.err != nil || w.peers[op.peer].done > op.cmd || w.peers[op.peer].dead != nil
}

// IsendWait waits until the Isend to dst under idx has completed: its
// buffer may be reused (fmpl_isend_wait).
func (w *World) IsendWait(dst, idx int, comm Comm) error {
	if !w.live {
		return ErrNotInit
	}
	r, err := w.world(comm, dst)
	if err != nil {
		return fmt.Errorf("isend wait: %w", err)
	}
	if err := w.userIdx(idx); err != nil {
		return fmt.Errorf("isend wait: %w", err)
	}
	return w.isendWait(r, idx, -1)
}

func (w *World) isendWait(r, idx int, timeout time.Duration) error {
	sl := &w.slots[w.slotOff(r, idx)]
	op := sl.send
	if op == nil || op.spooled {
		return fmt.Errorf("isend wait for rank %d index %d: %w", r, idx, ErrNoPending)
	}
	if err := w.waitFor(r, func() bool { return w.sendDone(op) }, timeout); err != nil {
		if errors.Is(err, errWaitTimeout) {
			return err
		}
		w.dropSend(op)
		return fmt.Errorf("send to rank %d index %d: %w", r, idx, err)
	}
	if op.posted && !op.inline && op.err == nil {
		if p := &w.peers[r]; p.done <= op.cmd && p.dead != nil {
			op.err = p.dead
		}
	}
	w.dropSend(op)
	return op.err
}

func (w *World) dropSend(op *sendOp) {
	if op.tmp.size != 0 {
		w.heap.free(op.tmp.addr)
		op.tmp = extent{}
	}
	w.peers[op.peer].waiting = slices.DeleteFunc(w.peers[op.peer].waiting, func(o *sendOp) bool { return o == op })
	if sl := &w.slots[w.slotOff(op.peer, op.idx)]; sl.send == op {
		sl.send = nil
	}
}

// Send sends buf to rank dst of comm under matching area idx and returns
// when buf may be reused (fmpl_send). Without SendBufSet it waits for the
// matching receive (synchronous mode); with a timeout it waits that long
// and then copies buf into the spool and returns (buffered, or standard).
func (w *World) Send(buf []byte, dst, idx int, comm Comm) error {
	var t0 int64
	if w.bdOn {
		t0 = monotime.Now()
		w.tHdr = 0
	}
	if err := w.Isend(buf, dst, idx, comm); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	var t1 int64
	if w.bdOn {
		t1 = monotime.Now()
	}
	r, _ := w.world(comm, dst)
	err := w.finishSend(r, idx)
	if w.bdOn && w.tHdr != 0 {
		t3 := monotime.Now()
		if w.tHdr < t1 { // the header was there: matched inside Isend
			w.bd.SendInit, w.bd.SendHeaderWait = w.tHdr-t0, 0
		} else {
			w.bd.SendInit, w.bd.SendHeaderWait = t1-t0, w.tHdr-t1
		}
		w.bd.SendData = t3 - w.tHdr
	}
	return err
}

func (w *World) finishSend(r, idx int) error {
	op := w.slots[w.slotOff(r, idx)].send
	if w.timeout < 0 {
		return w.isendWait(r, idx, -1)
	}
	err := w.waitFor(r, func() bool { return op.posted }, w.timeout)
	if err == nil {
		return w.isendWait(r, idx, -1)
	}
	if !errors.Is(err, errWaitTimeout) {
		w.dropSend(op)
		return fmt.Errorf("send to rank %d index %d: %w", r, idx, err)
	}
	if spooled := w.spoolSend(op); !spooled {
		return w.isendWait(r, idx, -1) // spool full: wait as in synchronous mode
	}
	return nil
}

// Irecv posts a receive of at most len(buf) bytes from rank src of comm
// under matching area idx, or TagAny (fmpl_irecv): it writes the header
// into the sender's matching area at once. buf belongs to FMPL until
// IrecvWait.
func (w *World) Irecv(buf []byte, src, idx int, comm Comm) error {
	if !w.live {
		return ErrNotInit
	}
	r, err := w.world(comm, src)
	if err != nil {
		return fmt.Errorf("irecv: %w", err)
	}
	slot := idx
	if idx == TagAny {
		slot = w.nsl - 1
	} else if err := w.userIdx(idx); err != nil {
		return fmt.Errorf("irecv from %d: %w", src, err)
	}
	return w.irecv(buf, r, slot)
}

func (w *World) irecv(buf []byte, r, slot int) error {
	off := w.slotOff(r, slot)
	sl := &w.slots[off]
	if sl.recv != nil {
		return fmt.Errorf("irecv from rank %d index %d: %w", r, slot, ErrInFlight)
	}
	if p := &w.peers[r]; p.dead != nil {
		return fmt.Errorf("irecv: %w", p.dead)
	}
	if len(buf) > uapi.MaxXfer {
		return fmt.Errorf("irecv of %d bytes: %w", len(buf), ErrCount)
	}
	op := &sl.recvStore
	*op = recvOp{size: len(buf)}
	if a, ok := w.linkAddr(buf); ok {
		op.addr = a
	} else {
		e, ok := w.heap.alloc(uint64(max(len(buf), 8)))
		if !ok {
			return fmt.Errorf("irecv of %d bytes into host memory: %w", len(buf), ErrNoMemory)
		}
		op.tmp, op.addr, op.host = e, e.addr, buf
	}
	sl.recv = op
	if w.bdOn {
		w.tPost = monotime.Now()
	}
	h := w.hdrOut + off*hdrBytes
	w.store(h, op.addr)
	w.store(h+8, uint64(op.size))
	if _, err := w.post(&w.peers[r].hdrDesc[slot]); err != nil {
		w.dropRecv(r, slot)
		return fmt.Errorf("irecv header to rank %d: %w", r, err)
	}
	return nil
}

func (w *World) dropRecv(r, slot int) {
	sl := &w.slots[w.slotOff(r, slot)]
	if sl.recv != nil && sl.recv.tmp.size != 0 {
		w.heap.free(sl.recv.tmp.addr)
	}
	sl.recv = nil
}

// IrecvWait waits until the Irecv from src under idx (or TagAny) has all
// its data (fmpl_irecv_wait).
func (w *World) IrecvWait(src, idx int, comm Comm) (Msg, error) {
	if !w.live {
		return Msg{}, ErrNotInit
	}
	r, err := w.world(comm, src)
	if err != nil {
		return Msg{}, fmt.Errorf("irecv wait: %w", err)
	}
	slot := idx
	if idx == TagAny {
		slot = w.nsl - 1
	} else if err := w.userIdx(idx); err != nil {
		return Msg{}, fmt.Errorf("irecv wait: %w", err)
	}
	m, err := w.irecvWait(r, slot)
	m.Source = src
	return m, err
}

func (w *World) irecvWait(r, slot int) (Msg, error) {
	sl := &w.slots[w.slotOff(r, slot)]
	op := sl.recv
	if op == nil {
		return Msg{}, fmt.Errorf("irecv wait for rank %d index %d: %w", r, slot, ErrNoPending)
	}
	if err := w.waitFor(r, func() bool { return op.done }, -1); err != nil {
		w.dropRecv(r, slot)
		return Msg{}, fmt.Errorf("receive from rank %d index %d: %w", r, slot, err)
	}
	m := Msg{Index: op.idx, Size: op.got}
	var err error
	switch {
	case op.trunc:
		err = fmt.Errorf("receive from rank %d index %d: %d bytes sent, buffer %d: %w", r, op.idx, op.got, op.size, ErrTruncated)
		m.Size = 0
	case op.got > op.size:
		err = fmt.Errorf("receive from rank %d: flag says %d bytes, buffer %d: %w", r, op.got, op.size, ErrProtocol)
		m.Size = 0
	case op.host != nil:
		copy(op.host, w.lm[op.addr:op.addr+uint64(op.got)])
	}
	if op.poison && err == nil {
		err = errPoisoned
	}
	w.dropRecv(r, slot)
	w.stats.Recvs++
	return m, err
}

// errPoisoned marks a collective message whose sender's reduction failed.
var errPoisoned = errors.New("fmpl: poisoned collective message")

// Recv receives at most len(buf) bytes from rank src of comm under
// matching area idx, or TagAny (fmpl_recv).
func (w *World) Recv(buf []byte, src, idx int, comm Comm) (Msg, error) {
	var t0 int64
	if w.bdOn {
		t0 = monotime.Now()
	}
	if err := w.Irecv(buf, src, idx, comm); err != nil {
		return Msg{}, fmt.Errorf("recv: %w", err)
	}
	if !w.bdOn {
		return w.IrecvWait(src, idx, comm)
	}
	t2 := monotime.Now()
	m, err := w.IrecvWait(src, idx, comm)
	w.bd.RecvInit, w.bd.RecvHeaderSend, w.bd.RecvData = w.tPost-t0, t2-w.tPost, monotime.Now()-t2
	return m, err
}

// Breakdown is the paper's Table 1 for the last blocking Send and Recv of
// this rank, in ns of the CPU clock: Send's set-up, its wait for the
// header, and its PUSHes of body and flag up to its return; Recv's
// set-up, its header PUSH, and its wait for the data.
type Breakdown struct {
	SendInit, SendHeaderWait, SendData int64
	RecvInit, RecvHeaderSend, RecvData int64
}

// SetBreakdown turns the stage clock of Send and Recv on or off: two or
// three clock reads per call.
func (w *World) SetBreakdown(on bool) { w.bdOn = on }

// LastBreakdown returns the stages of the last Send and Recv timed.
func (w *World) LastBreakdown() Breakdown { return w.bd }

// SendBufSet gives the spool (link memory from Alloc) that sends copy
// into when their receive has not been posted within timeout
// (fmpl_sendbuf_set): 0 buffers at once, a negative timeout turns
// spooling off again (synchronous mode, the default).
func (w *World) SendBufSet(buf []byte, timeout time.Duration) error {
	if timeout < 0 {
		w.timeout = -1
		return nil
	}
	a, ok := w.linkAddr(buf)
	if !ok || len(buf) < 64 {
		return fmt.Errorf("sendbuf set: the spool must be link memory from Alloc: %w", ErrConfig)
	}
	if w.spool.base == a && w.spool.h.end == a+uint64(len(buf)) {
		w.timeout = timeout // the same spool: only the mode changes
		return nil
	}
	if w.spool.count() > 0 {
		return fmt.Errorf("sendbuf set: %d sends still spooled: %w", w.spool.count(), ErrInFlight)
	}
	w.spool = spool{h: newHeap(a, a+uint64(len(buf))), base: a}
	w.timeout = timeout
	return nil
}

// SendBufCheck performs the spooled sends whose receives have been posted
// since (fmpl_sendbuf_check) and reports how many sends it performed since
// the last check and how many are still spooled. Any FMPL call makes the
// same progress; this one only waits for nothing.
func (w *World) SendBufCheck() (nsend, nspool int, err error) {
	if !w.live {
		return 0, 0, ErrNotInit
	}
	w.progress()
	nsend, w.spool.performed = w.spool.performed, 0
	if len(w.spool.errs) > 0 {
		err = errors.Join(w.spool.errs...)
		w.spool.errs = nil
	}
	return nsend, w.spool.count(), err
}

// spoolSend copies a send that timed out into the spool; it then
// completes in the background, the next time progress sees its header.
func (w *World) spoolSend(op *sendOp) bool {
	if w.spool.h.end == 0 {
		return false
	}
	e, ok := w.spool.h.alloc(uint64(max(op.size, 8)))
	if !ok {
		return false
	}
	if op.host != nil {
		copy(w.lm[e.addr:], op.host)
		op.host = nil
	} else {
		copy(w.lm[e.addr:e.addr+uint64(op.size)], w.lm[op.addr:op.addr+uint64(op.size)])
	}
	if op.tmp.size != 0 {
		w.heap.free(op.tmp.addr)
		op.tmp = extent{}
	}
	op.addr = e.addr
	op.spooled = true
	op.spoolExt = e
	w.spool.ops = append(w.spool.ops, op)
	w.stats.Spooled++
	return true
}

// spool holds the sends that were copied aside.
type spool struct {
	h         heap
	base      uint64
	ops       []*sendOp
	performed int
	errs      []error
}

func (s *spool) count() int { return len(s.ops) }

// reclaim frees the spool space of spooled sends that have completed.
func (s *spool) reclaim(w *World) {
	if len(s.ops) == 0 {
		return
	}
	s.ops = slices.DeleteFunc(s.ops, func(op *sendOp) bool {
		dead := w.peers[op.peer].dead
		if !w.sendDone(op) && dead == nil {
			return false
		}
		if op.err == nil && dead != nil && (!op.posted || w.peers[op.peer].done <= op.cmd) {
			op.err = dead
		}
		if op.err != nil {
			s.errs = append(s.errs, op.err)
		}
		s.h.free(op.spoolExt.addr)
		w.dropSend(op)
		return true
	})
}

// stagingRing holds the bodies of small sends and every completion flag
// until their commands complete: FIFO, freed from the head once the
// command of the oldest entry is done.
type stagingRing struct {
	base, size uint64
	head, tail uint64 // free-running positions
	ents       []stEnt
}

type stEnt struct {
	end  uint64
	peer int
	cmd  uint64
}

func (s *stagingRing) alloc(n uint64) (uint64, bool) {
	off := s.tail % s.size
	pad := uint64(0)
	if off+n > s.size {
		pad = s.size - off
	}
	if s.tail+pad+n-s.head > s.size {
		return 0, false
	}
	s.tail += pad
	a := s.base + s.tail%s.size
	s.tail += n
	return a, true
}

func (s *stagingRing) commit(peer int, cmd uint64) {
	s.ents = append(s.ents, stEnt{end: s.tail, peer: peer, cmd: cmd})
}

func (s *stagingRing) reclaim(w *World) {
	n := 0
	for _, e := range s.ents {
		p := &w.peers[e.peer]
		if p.done <= e.cmd && p.dead == nil {
			break
		}
		s.head = e.end
		n++
	}
	if n > 0 {
		s.ents = append(s.ents[:0], s.ents[n:]...)
	}
	if len(s.ents) == 0 {
		s.head = s.tail
	}
}
