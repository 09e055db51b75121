//go:build dimmnet_ofi

package main

/*
#include "prov.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"unsafe"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// Link memory for applications (include/fi_dimmnet.h): the device
// reaches only link memory, so a buffer the caller allocated there moves
// with no copy where every other buffer is copied through a bounce. The
// allocations come out of the endpoint's arena, the one its bounce copies
// come from, with part of it kept back so ordinary sends still find
// bounce room.

// lmRoom is kept before every buffer handed out: an eager send from a
// buffer's start writes its wire header there, so header and body leave
// as one IPUSH from link memory.
const lmRoom = granule

// Errors of the allocation interface, named in FI_DIMMNET_DEBUG's log.
var (
	errLmZero     = errors.New("a buffer of zero bytes")
	errLmNoRoom   = errors.New("link memory cannot hold the buffer")
	errLmNotOurs  = errors.New("not a link-memory buffer allocated on this endpoint")
	errLmBadAlign = errors.New("alignment is not a power of two")
	errLmInUse    = errors.New("link-memory buffers are still allocated")
)

// lmBuf is one buffer the caller holds: arena bytes [at, at+n), the
// caller's [user, user+size) inside them, the room before user.
type lmBuf struct {
	at, n      uint64
	user, size uint64
	hdrBusy    bool // an eager send's header is in the room until its DONE
}

// lmState is an endpoint's application buffers, sorted by user offset,
// and what moved with and without copies.
type lmState struct {
	bufs   []*lmBuf
	held   uint64 // arena bytes the caller holds
	counts lmCounts
}

// lmCounts are what include/fi_dimmnet.h's stats report, printed at close
// with FI_DIMMNET_STATS=1 on a line of their own ("dimmnet-fi linkmem").
type lmCounts struct {
	// bodies that moved from or into the caller's link memory with no
	// copy, and those copied through a bounce
	ZeroCopySends, CopiedSends, ZeroCopyPulls, CopiedPulls int
	// RMA and atomics the device did on a region in the peer's link
	// memory, and how many of those bounced the local buffer
	DeviceRMA, CopiedRMA int
}

// lmReserve is the arena the caller cannot take: room for the largest
// rendezvous bounce and the eager copies beside it, or half the arena on
// a small region.
func (e *endpoint) lmReserve() uint64 {
	return min(uint64(maxMsg)+1<<20, e.arenaBytes()/2)
}

func (e *endpoint) arenaBytes() uint64 { return uint64(len(e.lm)) - e.ringBytes }

// lmAvail is the largest buffer alloc could hand out now (alignment 64).
func (e *endpoint) lmAvail() uint64 {
	free, largest := e.arena.room()
	res := e.lmReserve()
	if free <= res+lmRoom {
		return 0
	}
	return min(largest, free-res) - lmRoom
}

// lmAlloc hands out size bytes of link memory aligned to align (0: 64).
func (e *endpoint) lmAlloc(size, align uint64) (unsafe.Pointer, error) {
	if size == 0 {
		return nil, fmt.Errorf("alloc: %w", errLmZero)
	}
	if align == 0 {
		align = granule
	}
	if align&(align-1) != 0 {
		return nil, fmt.Errorf("alloc align %d: %w", align, errLmBadAlign)
	}
	align = max(align, granule)
	if size > e.arenaBytes() || align > e.arenaBytes() {
		return nil, fmt.Errorf("alloc %d bytes aligned %d, link memory %d: %w", size, align, len(e.lm), errLmNoRoom)
	}
	n := (lmRoom + size + align - granule + granule - 1) &^ (granule - 1)
	at, err := e.lmTake(size, n)
	if errors.Is(err, errLmNoRoom) && e.inj.held > 0 {
		// Unsignalled injects' stagings are room a FENCE's DONE gives
		// back (a round trip), and they may be what splits the arena:
		// take them back before saying there is none.
		e.injectFence()
		for deadline := monotime.Now() + fenceWaitNs; e.inj.fence != 0 && monotime.Now() < deadline; {
			e.progress()
		}
		at, err = e.lmTake(size, n)
	}
	if err != nil {
		return nil, err
	}
	b := &lmBuf{at: at, n: n, size: size, user: (at + lmRoom + align - 1) &^ (align - 1)}
	i := sort.Search(len(e.linkBufs.bufs), func(i int) bool { return e.linkBufs.bufs[i].user > b.user })
	e.linkBufs.bufs = append(e.linkBufs.bufs, nil)
	copy(e.linkBufs.bufs[i+1:], e.linkBufs.bufs[i:])
	e.linkBufs.bufs[i] = b
	e.linkBufs.held += n
	if trace {
		logf("linkmem alloc %d bytes aligned %d at link %#x", size, align, b.user)
	}
	return unsafe.Pointer(&e.lm[b.user]), nil
}

// fenceWaitNs bounds how long lmAlloc waits for the FENCE that frees
// held inject stagings: a peer that never acknowledges them (gone, or a
// lossy link's long timeout) makes alloc fail with errLmNoRoom instead of
// hanging.
const fenceWaitNs = 100_000_000

// lmTake takes n arena bytes for a size-byte buffer, keeping back the
// bounce copies' reserve.
func (e *endpoint) lmTake(size, n uint64) (uint64, error) {
	free, _ := e.arena.room()
	if free < n || free-n < e.lmReserve() {
		return 0, fmt.Errorf("alloc %d bytes: %d free, %d kept for bounce copies: %w", size, free, e.lmReserve(), errLmNoRoom)
	}
	at, ok := e.arena.alloc(n)
	if !ok {
		return 0, fmt.Errorf("alloc %d bytes: no piece of %d free: %w", size, n, errLmNoRoom)
	}
	return at, nil
}

// lmFree takes back a buffer lmAlloc handed out.
func (e *endpoint) lmFree(p unsafe.Pointer) error {
	off, ok := e.lmOffset(p)
	bufs := e.linkBufs.bufs
	i := sort.Search(len(bufs), func(i int) bool { return bufs[i].user >= off })
	if !ok || i == len(bufs) || bufs[i].user != off {
		return fmt.Errorf("free %p: %w", p, errLmNotOurs)
	}
	b := bufs[i]
	e.linkBufs.bufs = append(bufs[:i], bufs[i+1:]...)
	e.linkBufs.held -= b.n
	e.arena.free(b.at, b.n)
	return nil
}

// lmOffset is p's link address, if p points into link memory at all.
func (e *endpoint) lmOffset(p unsafe.Pointer) (uint64, bool) {
	if len(e.lm) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(&e.lm[0]))
	if uintptr(p) < base || uintptr(p)-base >= uintptr(len(e.lm)) {
		return 0, false
	}
	return uint64(uintptr(p) - base), true
}

// linkBuf is the caller's buffer [p, p+n) wholly holds, and p's link
// address; anything else (ordinary memory, a range straddling a buffer's
// end) is ordinary memory to the provider.
func (e *endpoint) linkBuf(p unsafe.Pointer, n int) (*lmBuf, uint64, bool) {
	bufs := e.linkBufs.bufs
	if len(bufs) == 0 || n <= 0 {
		return nil, 0, false
	}
	off, ok := e.lmOffset(p)
	if !ok {
		return nil, 0, false
	}
	i := sort.Search(len(bufs), func(i int) bool { return bufs[i].user > off }) - 1
	if i < 0 {
		return nil, 0, false
	}
	b := bufs[i]
	if off+uint64(n) > b.user+b.size {
		return nil, 0, false
	}
	return b, off, true
}

// sendLink sends from the caller's link memory when [buf, buf+n) lies in
// one of its buffers: handled reports whether it did (ret is then the
// send's result); otherwise the caller copies as for ordinary memory.
// Inject never comes here: its caller may reuse the buffer at return,
// while the device reads the source until the peer's acknowledgement.
func (e *endpoint) sendLink(op *txOp, p avEntry, buf unsafe.Pointer, n int, hflags byte) (ret int, handled bool) {
	if op.inject {
		return 0, false
	}
	b, off, ok := e.linkBuf(buf, n)
	if !ok {
		return 0, false
	}
	if n <= e.eagerMax {
		if off != b.user || b.hdrBusy {
			return 0, false // no room for the header before it: copied
		}
		at := off - eagerHdrLen
		e.putEagerHdr(at, hflags, op.data)
		op.kind = ckSend
		op.lmHdr = b
		b.hdrBusy = true
		if err := e.ipush(p.node, at, eagerHdrLen+n, op.tag, ckSend, op); err != 0 {
			b.hdrBusy = false
			e.freeTx(op)
			return err, true
		}
		e.linkBufs.counts.ZeroCopySends++
		return 0, true
	}
	// rendezvous: the receiver pulls the body from the caller's buffer,
	// which the FIN (the send's completion) gives back
	at, ok := e.alloc(hdrLen)
	if !ok {
		e.freeTx(op)
		return eAgain, true
	}
	e.stats.Rendezvous++
	id := e.id()
	op.kind = ckSend
	e.rdv[id] = op
	e.putHdr(at, kindRTS, hflags, op.data, uint64(n), off, id)
	rts := e.newTx()
	rts.kind, rts.stage, rts.stageN, rts.rbuf = ckRTS, at, hdrLen, id
	if err := e.ipush(p.node, at, hdrLen, op.tag, ckRTS, rts); err != 0 {
		delete(e.rdv, id)
		e.freeTx(op)
		return err, true
	}
	e.linkBufs.counts.ZeroCopySends++
	return 0, true
}

// linkSendDone frees an eager send's header room for the next.
func (op *txOp) linkSendDone() {
	if op.lmHdr != nil {
		op.lmHdr.hdrBusy = false
	}
}

// pullLink PULLs a rendezvous body straight into the receive buffer when
// it lies in the caller's link memory: started reports whether it did
// (or failed, named in the receive's error entry).
func (e *endpoint) pullLink(p *pullOp) (started bool) {
	if p.r == nil || p.done != nil {
		return false
	}
	_, off, ok := e.linkBuf(p.r.buf, p.n)
	if !ok {
		return false
	}
	p.direct = true
	p.bounce = off
	p.id = e.id()
	_, err := e.d.Pull(p.msg.node, off, p.msg.raddr, uint32(p.n), uint64(ckPull)<<56|p.id)
	if postFailed("pull", p.msg.node, err) {
		if errors.Is(err, driver.ErrQueueFull) {
			e.waiting = append(e.waiting, p)
			return true
		}
		e.rxErr(p.r, errIO, 0, 0)
		return true
	}
	e.pulls[p.id] = p
	return true
}

// pullLinkDone completes a direct pull: the body is in place.
func (e *endpoint) pullLinkDone(p *pullOp, s *uapi.Status) {
	if s.Type == uapi.StError {
		e.rxErrMsg(p.r, p.msg, errFor(s), int(s.Err))
		e.freeRecv(p.r)
		return
	}
	e.linkBufs.counts.ZeroCopyPulls++
	e.sendFIN(p.msg)
	e.rxComplete(p.r, p.msg, p.n, p.msg.n-p.n, false)
	e.freeRecv(p.r)
}

// ---------------------------------------------------------------- exports

//export goLmAlloc
func goLmAlloc(h C.uintptr_t, size, align C.size_t, out *unsafe.Pointer) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok || out == nil || e.closed {
		return -C.FI_EINVAL
	}
	p, err := e.lmAlloc(uint64(size), uint64(align))
	if err != nil {
		logf("linkmem: %v", err)
		if errors.Is(err, errLmNoRoom) {
			return -C.FI_ENOMEM
		}
		return -C.FI_EINVAL
	}
	*out = p
	return 0
}

//export goLmFree
func goLmFree(h C.uintptr_t, p unsafe.Pointer) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok || e.closed {
		return -C.FI_EINVAL
	}
	if err := e.lmFree(p); err != nil {
		logf("linkmem: %v", err)
		return -C.FI_EINVAL
	}
	return 0
}

// goLmStats fills struct fi_dimmnet_linkmem_stats (eight uint64 in order).
//
//export goLmStats
func goLmStats(h C.uintptr_t, st *C.uint64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok || st == nil {
		return -C.FI_EINVAL
	}
	v := unsafe.Slice((*uint64)(unsafe.Pointer(st)), 8)
	s := &e.linkBufs.counts
	v[0], v[1], v[2], v[3] = uint64(s.ZeroCopySends), uint64(s.CopiedSends), uint64(s.ZeroCopyPulls), uint64(s.CopiedPulls)
	v[4], v[5] = uint64(s.DeviceRMA), uint64(s.CopiedRMA)
	v[6], v[7] = e.linkBufs.held, 0
	if !e.closed {
		v[7] = e.lmAvail()
	}
	return 0
}

// lmBusy refuses to close an endpoint whose link memory the caller still
// holds: closing unmaps it under the caller's pointers.
func (e *endpoint) lmBusy() error {
	if n := len(e.linkBufs.bufs); n > 0 {
		logf("close: %d buffers: %v", n, errLmInUse)
		return errLmInUse
	}
	return nil
}

// ---------------------------------------------------------------- rma

// RMA on a region in link memory goes through the device: the target's
// PUSH and PULL serve it with no software of the target's (a region in
// ordinary memory is a request the target's provider serves when its
// caller progresses, rma.go). The initiator must know the region's link
// address, so such a region's key is the provider's, not the caller's:
//
//	63     1: a region in link memory
//	55..62 a check of the target's node id ((node ^ node>>8) & 0xff)
//	28..54 the region's length in bytes (below 128 MiB)
//	0..27  the region's link address / 8 (below 2 GiB)
//
// A key with bit 63 set is refused for ordinary memory (it would send
// the device to a link address nobody registered).
// ckLinkRMA is the cookie kind of an RMA the device does on a region in
// the peer's link memory: far from ep.go's kinds, which count up from 1.
const ckLinkRMA = 0x40

const (
	lkMark      = uint64(1) << 63
	lkNodeShift = 55
	lkLenShift  = 28
	lkLenMax    = 1<<27 - 1
	lkOffMax    = 1<<31 - 8
)

var errLmKey = errors.New("requested key has bit 63 set, which marks regions in link memory")

func lkNode(node uint16) uint64 { return uint64(node^node>>8) & 0xff }

// linkMRKey is the key for a region fi_mr_reg registers: the provider's
// for a region wholly inside one endpoint's link-memory buffer, the
// caller's requested key for any other.
func linkMRKey(requested uint64, buf unsafe.Pointer, n uint64) (uint64, error) {
	for _, h := range handles {
		e, ok := h.(*endpoint)
		if !ok || e.closed || n == 0 || n > lkLenMax {
			continue
		}
		if _, off, ok := e.linkBuf(buf, int(n)); ok && off%8 == 0 && off <= lkOffMax {
			e.tagFrames(off, n)
			return lkMark | lkNode(e.node)<<lkNodeShift | n<<lkLenShift | off/8, nil
		}
	}
	if requested&lkMark != 0 {
		return 0, errLmKey
	}
	return requested, nil
}

// lkPort tags the link page frames of registered link regions, and the
// device writes into them are TAGGED PUSHes to it: the target's device
// writes no status for such a write, so a target that never calls into
// the provider does not fill its status ring with them (an untagged PUSH
// leaves one each, and once the ring is full the initiator's writes fail
// with HOLD_LIMIT). Only TAGGED writes look at the tags: a frame shared
// with other buffers is written by nothing else that way.
const lkPort = 0xd1f0

// tagFrames tags the frames [off, off+n) lies on with lkPort.
func (e *endpoint) tagFrames(off, n uint64) {
	ps := e.d.PageSize()
	for f := off / ps; f <= (off+n-1)/ps; f++ {
		if err := e.d.SetFrameTag(uint32(f), lkPort); err != nil {
			logf("linkmem: %v", err)
		}
	}
}

// rmaLink moves an RMA read or write through the device when key names
// a region in the peer's link memory: handled reports whether it did.
// Remote CQ data needs the target's provider (it writes the entry), so
// such a write, and anything the device cannot do (unaligned, beyond the
// region: the target names the error), takes the request path.
func (e *endpoint) rmaLink(write bool, buf unsafe.Pointer, n int, p avEntry, addr, key uint64, flags uint64, op *rmaOp, id uint64) (ret int, handled bool) {
	if key&lkMark == 0 || n <= 0 || flags&fCQData != 0 || p.node == e.node || (key>>lkNodeShift)&0xff != lkNode(p.node) {
		return 0, false
	}
	rlen, rbase := (key>>lkLenShift)&lkLenMax, (key&(1<<lkLenShift-1))*8
	if addr > rlen || uint64(n) > rlen-addr || (rbase+addr)%8 != 0 {
		return 0, false
	}
	tx := e.newTx()
	tx.kind, tx.rbuf = ckLinkRMA, id
	_, local, direct := e.linkBuf(buf, n)
	// FI_INJECT lets the caller reuse the source at return, and the
	// device reads it until the peer's acknowledgement: copied.
	if !direct || local%8 != 0 || flags&fInject != 0 {
		at, ok := e.alloc(uint64(n))
		if !ok {
			e.freeTx(tx)
			return eAgain, true
		}
		local = at
		if write {
			copy(e.lm[at:at+uint64(n)], unsafe.Slice((*byte)(buf), n))
			tx.stage, tx.stageN = at, uint64(n) // freed by the DONE
		} else {
			tx.body, tx.bodyN = at, uint64(n) // copied out, then freed, by the PULL_DONE
		}
		e.linkBufs.counts.CopiedRMA++
	}
	cookie := uint64(ckLinkRMA)<<56 | e.id()
	var err error
	if write {
		_, err = e.d.PushTagged(p.node, local, rbase+addr, uint32(n), lkPort, uapi.FlagSignal, cookie)
	} else {
		_, err = e.d.Pull(p.node, local, rbase+addr, uint32(n), cookie)
	}
	if postFailed("rma", p.node, err) {
		e.arena.free(tx.stage, tx.stageN)
		e.arena.free(tx.body, tx.bodyN)
		e.freeTx(tx)
		return postErr("rma", p.node, err), true
	}
	e.ops[cookie&(1<<56-1)] = tx
	e.rmaOps[id] = op
	e.linkBufs.counts.DeviceRMA++
	return 0, true
}

// atomicLink applies an 8-byte atomic with the device's FADD8 or CAS8
// when key names a region in the peer's link memory (the target's word
// changes under its device, not its provider): handled reports whether
// it did. The old value lands in an 8-byte bounce.
func (e *endpoint) atomicLink(op int, operand, compare uint64, p avEntry, addr, key, id uint64) (ret int, handled bool) {
	if key&lkMark == 0 || (key>>lkNodeShift)&0xff != lkNode(p.node) || (op != opSum && op != opRead && op != opCswap) {
		return 0, false
	}
	rlen, rbase := (key>>lkLenShift)&lkLenMax, (key&(1<<lkLenShift-1))*8
	if addr > rlen || rlen-addr < 8 || (rbase+addr)%8 != 0 {
		return 0, false
	}
	at, ok := e.alloc(8)
	if !ok {
		return eAgain, true
	}
	tx := e.newTx()
	tx.kind, tx.rbuf, tx.body, tx.bodyN = ckLinkRMA, id, at, 8
	cookie := uint64(ckLinkRMA)<<56 | e.id()
	var err error
	switch op {
	case opSum:
		_, err = e.d.FetchAdd8(p.node, at, rbase+addr, operand, cookie)
	case opRead:
		_, err = e.d.FetchAdd8(p.node, at, rbase+addr, 0, cookie)
	case opCswap:
		_, err = e.d.CAS8(p.node, at, rbase+addr, compare, operand, cookie)
	}
	if postFailed("atomic", p.node, err) {
		e.arena.free(at, 8)
		e.freeTx(tx)
		return postErr("atomic", p.node, err), true
	}
	e.ops[cookie&(1<<56-1)] = tx
	e.linkBufs.counts.DeviceRMA++
	return 0, true
}

// linkRMADone completes an RMA or atomic the device did: a read's bounce
// is copied out, an atomic's old value handed over, and the bounce freed
// (a write's staging the caller of this freed).
func (e *endpoint) linkRMADone(tx *txOp, s *uapi.Status) {
	o := e.rmaOps[tx.rbuf]
	if tx.bodyN > 0 {
		switch {
		case s.Type == uapi.StError || o == nil:
		case o.result != nil:
			*(*uint64)(o.result) = binary.LittleEndian.Uint64(e.lm[tx.body:])
		case o.buf != nil:
			copy(unsafe.Slice((*byte)(o.buf), o.n), e.lm[tx.body:tx.body+tx.bodyN])
		}
		e.arena.free(tx.body, tx.bodyN)
	}
	if s.Type == uapi.StError {
		e.rmaFail(tx.rbuf, errFor(s), int(s.Err))
		return
	}
	e.rmaAnswer(tx.rbuf, 0, nil)
}
