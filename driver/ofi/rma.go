//go:build dimmnet_ofi

package main

/*
#include "prov.h"
*/
import "C"

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// RMA and atomics. The device reaches only link memory, and a region
// fi_mr_reg registers is ordinary memory of its process: so a one-sided
// operation is a request the target's provider serves from the region
// when its caller next progresses (FI_PROGRESS_MANUAL, as the target's
// receives are): a write's body comes inline or is PULLed from the
// initiator's link memory, a read's answer goes back inline or is offered
// for PULL, and an 8-byte atomic is applied by the target with the CPU's
// atomic instructions on the region's word, then acknowledged. mr_mode 0:
// addresses are offsets in the region, keys the ones the caller chose.

// region is one registered memory region.
type region struct {
	base unsafe.Pointer
	n    uint64
}

// regions are the process's registered regions by key (keys are the
// caller's, unique per domain; one table serves every domain).
var regions = map[uint64]region{}

// rmaOp is a request waiting for its answer.
type rmaOp struct {
	ctx    unsafe.Pointer
	flags  uint64 // completion flags
	buf    unsafe.Pointer
	n      int
	result unsafe.Pointer // atomic fetch
	cq     bool
	cntr   *cntr
}

// Atomic operation codes on the wire (libfabric's enum fi_op values).
const (
	opSum   = C.FI_SUM
	opRead  = C.FI_ATOMIC_READ
	opCswap = C.FI_CSWAP
)

func (e *endpoint) regionAt(key, addr uint64, n int) (unsafe.Pointer, int) {
	r, ok := regions[key]
	if !ok {
		return nil, -C_FI_EKEYREJECTED
	}
	if addr > r.n || uint64(n) > r.n-addr {
		return nil, -C_FI_EACCES
	}
	return unsafe.Add(r.base, addr), 0
}

// Error numbers rma answers carry.
const (
	C_FI_EKEYREJECTED = 129
	C_FI_EACCES       = 13
)

func (e *endpoint) rma(write bool, buf unsafe.Pointer, n int, peer, addr, key, data uint64, ctx unsafe.Pointer, flags uint64) int {
	if e.closed || !e.enabled {
		return eInval
	}
	if flags&dnDefault != 0 {
		flags = flags&^dnDefault | e.txFlags
	}
	if n < 0 || n > maxMsg || (n > 0 && buf == nil) || flags&fInject != 0 && n > injectMax {
		return eMsgSize
	}
	p, ok := e.peer(peer)
	if !ok {
		if flags&dnInjectCall != 0 {
			return eInval
		}
		e.txErr(ctx, fRMA, n, 0, 0, errAddr, 0)
		return 0
	}
	op := &rmaOp{ctx: ctx, buf: buf, n: n, cq: flags&dnInjectCall == 0 && (!e.txSel || flags&fCompletion != 0)}
	kind := byte(kindReadReq)
	op.flags, op.cntr = fRMA|fRead, e.rdCntr
	if write {
		op.flags, op.cntr = fRMA|fWrite, e.wrCntr
	}
	var hflags byte
	if flags&fCQData != 0 {
		hflags |= hdrData
	}
	id := e.id()
	if write {
		e.stats.RMAWrites++
	} else {
		e.stats.RMAReads++
	}
	if ret, handled := e.rmaLink(write, buf, n, p, addr, key, flags, op, id); handled {
		return ret
	}
	src := unsafe.Slice((*byte)(buf), n)
	if p.node == e.node {
		e.rmaOps[id] = op
		if write {
			e.serveWrite(e.node, key, hflags, data, addr, id, src)
		} else {
			e.serveRead(e.node, key, addr, id, n)
		}
		return 0
	}
	switch {
	case write && n <= e.eagerMax:
		at, ok := e.alloc(uint64(hdrLen + n))
		if !ok {
			return eAgain
		}
		kind = kindWrite
		e.putHdr(at, kind, hflags, data, uint64(n), 0, id)
		binary.LittleEndian.PutUint64(e.lm[at+40:], addr)
		copy(e.lm[at+hdrLen:], src)
		if err := e.ipush(p.node, at, hdrLen+n, key, ckRMA, &txOp{stage: at, stageN: uint64(hdrLen + n), rbuf: id}); err != 0 {
			return err
		}
	case write:
		body, ok := e.alloc(uint64(n))
		if !ok {
			return eAgain
		}
		at, ok := e.alloc(hdrLen)
		if !ok {
			e.arena.free(body, uint64(n))
			return eAgain
		}
		copy(e.lm[body:], src)
		e.putHdr(at, kindWriteRTS, hflags, data, uint64(n), body, id)
		binary.LittleEndian.PutUint64(e.lm[at+40:], addr)
		if err := e.ipush(p.node, at, hdrLen, key, ckRMA, &txOp{stage: at, stageN: hdrLen, rbuf: id}); err != 0 {
			e.arena.free(body, uint64(n))
			return err
		}
		op.result = nil
		e.rmaBodies[id] = [2]uint64{body, uint64(n)}
	default:
		at, ok := e.alloc(hdrLen)
		if !ok {
			return eAgain
		}
		e.putHdr(at, kindReadReq, 0, 0, uint64(n), 0, id)
		binary.LittleEndian.PutUint64(e.lm[at+40:], addr)
		if err := e.ipush(p.node, at, hdrLen, key, ckRMA, &txOp{stage: at, stageN: hdrLen, rbuf: id}); err != 0 {
			return err
		}
	}
	e.rmaOps[id] = op
	return 0
}

func (e *endpoint) atomic(op int, operand, compare uint64, result unsafe.Pointer, dst, addr, key uint64, ctx unsafe.Pointer) int {
	if e.closed || !e.enabled {
		return eInval
	}
	p, ok := e.peer(dst)
	if !ok {
		e.txErr(ctx, fAtomic, 8, 0, 0, errAddr, 0)
		return 0
	}
	o := &rmaOp{ctx: ctx, result: result, n: 8, cq: !e.txSel || e.txFlags&fCompletion != 0}
	o.flags, o.cntr = fAtomic|fWrite, e.wrCntr
	if result != nil {
		o.flags, o.cntr = fAtomic|fRead, e.rdCntr
	}
	id := e.id()
	e.stats.Atomics++
	e.rmaOps[id] = o
	if p.node == e.node {
		e.serveAtomic(e.node, key, byte(op), operand, compare, addr, id)
		return 0
	}
	if ret, handled := e.atomicLink(op, operand, compare, p, addr, key, id); handled {
		if ret != 0 {
			delete(e.rmaOps, id)
		}
		return ret
	}
	at, ok := e.alloc(hdrLen)
	if !ok {
		delete(e.rmaOps, id)
		return eAgain
	}
	e.putHdr(at, kindAtomicReq, byte(op)<<4, operand, 8, compare, id)
	binary.LittleEndian.PutUint64(e.lm[at+40:], addr)
	if err := e.ipush(p.node, at, hdrLen, key, ckRMA, &txOp{stage: at, stageN: hdrLen, rbuf: id}); err != 0 {
		delete(e.rmaOps, id)
		return err
	}
	return 0
}

// rmaPacket serves a request, or completes one with its answer.
func (e *endpoint) rmaPacket(kind, flags byte, node uint16, imm uint64, h, body []byte) {
	data := binary.LittleEndian.Uint64(h[8:])
	n := binary.LittleEndian.Uint64(h[16:])
	raddr := binary.LittleEndian.Uint64(h[24:])
	id := binary.LittleEndian.Uint64(h[32:])
	addr := binary.LittleEndian.Uint64(h[40:])
	switch kind {
	case kindWrite:
		if uint64(len(body)) != n {
			logf("dropped an rma write from node %d: %d bytes, header says %d", node, len(body), n)
			return
		}
		e.serveWrite(node, imm, flags, data, addr, id, body)
	case kindWriteRTS:
		if n > maxMsg {
			return
		}
		key := imm
		p := &pullOp{msg: &inMsg{node: node, raddr: raddr, n: int(n)}, n: int(n)}
		p.done = func(b []byte) { e.serveWrite(node, key, flags, data, addr, id, b) }
		p.fail = func(err, _ int) { e.answer(node, kindAck, uint64(err), id, nil) }
		e.startPull(p)
	case kindReadReq:
		e.serveRead(node, imm, addr, id, int(n))
	case kindReadResp, kindAtomicRsp, kindAck:
		e.rmaAnswer(id, data, body)
	case kindReadRTS:
		o := e.rmaOps[id]
		if o == nil {
			return
		}
		p := &pullOp{msg: &inMsg{node: node, raddr: raddr, n: int(n)}, n: min(int(n), o.n)}
		p.done = func(b []byte) {
			e.answer(node, kindAck, 0, data, nil) // the target may free its copy (its id rides in data)
			e.rmaAnswer(id, 0, b)
		}
		p.fail = func(err, prov int) { e.rmaFail(id, err, prov) }
		if p.n == 0 {
			e.rmaAnswer(id, 0, nil)
			return
		}
		e.startPull(p)
	case kindAtomicReq:
		e.serveAtomic(node, imm, flags>>4, data, raddr, addr, id)
	}
}

// serveWrite copies a write's body into the region and acknowledges it.
func (e *endpoint) serveWrite(node uint16, key uint64, flags byte, data, addr, id uint64, body []byte) {
	dst, err := e.regionAt(key, addr, len(body))
	if err == 0 {
		copy(unsafe.Slice((*byte)(dst), len(body)), body)
		if e.remWrCntr != nil {
			e.remWrCntr.val++
		}
		if flags&hdrData != 0 && e.rxcq != nil {
			e.rxcq.push(cqEntry{flags: fRMA | fRemWrite | fCQData, len: len(body), data: data, src: e.av.source(node)})
		}
	}
	e.answer(node, kindAck, uint64(-err), id, nil)
}

// serveRead answers a read with the region's bytes: inline when small,
// offered for PULL otherwise (freed when the initiator's ack comes).
func (e *endpoint) serveRead(node uint16, key, addr, id uint64, n int) {
	src, err := e.regionAt(key, addr, n)
	if err != 0 {
		e.answer(node, kindAck, uint64(-err), id, nil)
		return
	}
	b := unsafe.Slice((*byte)(src), n)
	if node == e.node || n <= e.eagerMax {
		e.answer(node, kindReadResp, 0, id, b)
		return
	}
	body, ok := e.alloc(uint64(n))
	if !ok {
		e.answer(node, kindAck, uint64(-eAgain), id, nil)
		return
	}
	copy(e.lm[body:], b)
	cid := e.id()
	e.rmaBodies[cid] = [2]uint64{body, uint64(n)}
	at, ok := e.alloc(hdrLen)
	if !ok {
		return
	}
	e.putHdr(at, kindReadRTS, 0, cid, uint64(n), body, id)
	e.ipush(node, at, hdrLen, 0, ckCtl, &txOp{kind: ckCtl, stage: at, stageN: hdrLen})
}

// serveAtomic applies an 8-byte atomic to the region's word.
func (e *endpoint) serveAtomic(node uint16, key uint64, op byte, operand, compare, addr, id uint64) {
	p, err := e.regionAt(key, addr, 8)
	if err == 0 && uintptr(p)%8 != 0 {
		err = eInval
	}
	if err != 0 {
		e.answer(node, kindAck, uint64(-err), id, nil)
		return
	}
	w := (*uint64)(p)
	var old uint64
	switch op {
	case opSum:
		old = atomic.AddUint64(w, operand) - operand
	case opRead:
		old = atomic.LoadUint64(w)
	case opCswap:
		for {
			old = atomic.LoadUint64(w)
			if old != compare || atomic.CompareAndSwapUint64(w, old, operand) {
				break
			}
		}
	default:
		e.answer(node, kindAck, uint64(-eOpNotSup), id, nil)
		return
	}
	if e.remWrCntr != nil {
		e.remWrCntr.val++
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], old)
	e.answer(node, kindAtomicRsp, 0, id, b[:])
}

// answer sends a reply (status or old value in data, a body inline) to
// the initiator's request id; to ourselves it is taken at once.
func (e *endpoint) answer(node uint16, kind byte, data, id uint64, body []byte) {
	if node == e.node {
		e.rmaAnswer(id, data, body)
		return
	}
	at, ok := e.alloc(uint64(hdrLen + len(body)))
	if !ok {
		logf("no link memory to answer node %d: its request %d waits for ever", node, id)
		return
	}
	e.putHdr(at, kind, 0, data, uint64(len(body)), 0, id)
	copy(e.lm[at+hdrLen:], body)
	e.ipush(node, at, hdrLen+len(body), 0, ckCtl, &txOp{kind: ckCtl, stage: at, stageN: uint64(hdrLen + len(body))})
}

// rmaAnswer completes request id: status in data (ack), the old value
// (atomic response) or the bytes read.
func (e *endpoint) rmaAnswer(id, data uint64, body []byte) {
	o := e.rmaOps[id]
	if o == nil {
		// an ack of a read body this endpoint offered (the id is ours)
		if b, ok := e.rmaBodies[id]; ok {
			delete(e.rmaBodies, id)
			e.arena.free(b[0], b[1])
		}
		return
	}
	if int64(data) > 0 && len(body) == 0 {
		// The target refused it: an ack naming the error (only an ack
		// carries a nonzero status and no body). An answer from the wire
		// has an empty body, not a nil one, so this is tested by length
		// and before the read's copy, and while the request is still
		// recorded, for rmaFail to report it.
		e.rmaFail(id, int(data), 0)
		return
	}
	if b, ok := e.rmaBodies[id]; ok { // a write's body offered for PULL
		delete(e.rmaBodies, id)
		e.arena.free(b[0], b[1])
	}
	delete(e.rmaOps, id)
	switch {
	case o.result != nil && len(body) == 8:
		*(*uint64)(o.result) = binary.LittleEndian.Uint64(body)
	case o.flags&fRead != 0 && o.flags&fRMA != 0 && body != nil:
		copy(unsafe.Slice((*byte)(o.buf), o.n), body)
	}
	if o.cntr != nil {
		o.cntr.val++
	}
	if o.cq && e.txcq != nil {
		e.txcq.push(cqEntry{ctx: o.ctx, flags: o.flags, src: notAvail})
	}
}

func (e *endpoint) rmaFail(id uint64, err, prov int) {
	o := e.rmaOps[id]
	if o == nil {
		return
	}
	delete(e.rmaOps, id)
	if b, ok := e.rmaBodies[id]; ok {
		delete(e.rmaBodies, id)
		e.arena.free(b[0], b[1])
	}
	if o.cntr != nil {
		o.cntr.errs++
	}
	if e.txcq != nil {
		e.txcq.push(cqEntry{ctx: o.ctx, flags: o.flags, len: o.n, err: err, provErr: prov, src: notAvail})
	}
}

//export goMrReg
func goMrReg(key C.uint64_t, buf unsafe.Pointer, n C.size_t, out *C.uint64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	k, err := linkMRKey(uint64(key), buf, uint64(n)) // linkmem.go: the provider's key for a region in link memory
	if err != nil {
		logf("fi_mr_reg: %v", err)
		return -C.FI_ENOKEY
	}
	if _, ok := regions[k]; ok {
		return -C.FI_ENOKEY
	}
	regions[k] = region{base: buf, n: uint64(n)}
	*out = C.uint64_t(k)
	return 0
}

//export goMrClose
func goMrClose(key C.uint64_t) {
	mu.Lock()
	defer mu.Unlock()
	delete(regions, uint64(key))
}
