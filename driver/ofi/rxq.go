//go:build dimmnet_ofi

package main

/*
#include "prov.h"
*/
import "C"

import (
	"sync/atomic"
	"unsafe"
)

// The queues in the endpoint's C memory (struct dn_ep, prov.h): fi_recv
// and fi_trecv fill one with receives, fi_inject and fi_tinject the other
// with small injects to an address this side vouched for (okDst), without
// entering Go; every entry into the provider for the endpoint takes what
// they hold, in order, before it does anything else with receives,
// arrivals or sends.

func (e *endpoint) cep() *C.struct_dn_ep { return (*C.struct_dn_ep)(e.c) }

// setQueueing opens (enable) or closes (close) the queue to callers; a
// closed queue sends them to goRecv, which names the error.
func (e *endpoint) setQueueing(on bool) {
	if e.c == nil {
		return
	}
	v := int32(0)
	if on {
		v = 1
	}
	atomic.StoreInt32((*int32)(unsafe.Pointer(&e.cep().ready)), v)
	if !on {
		C.dn_ep_fence(e.cep()) // what queued before is ours to take
	}
}

// vouch lets small injects to dst queue in C: dst was sent to, is
// inserted, and the caller's thread drives the device, so a call or the
// hand-back (release) takes what queues. notAvail withdraws it (an AV
// removal, the hand-back), after which nothing more queues.
func (e *endpoint) vouch(dst uint64) {
	c := e.cep()
	if c == nil || uint64(c.ok_dst) == dst || dst != notAvail && !e.driving {
		return
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.ok_dst)), dst)
	if dst == notAvail {
		C.dn_ep_fence(c)
	}
}

// takeQueued posts every receive and sends every inject queued in C, in
// the order the callers queued them, and reports whether injects are
// still queued (the link memory to stage them ran out: the next entry
// sends them, and no other send may pass them); the caller holds mu.
func (e *endpoint) takeQueued() (txLeft bool) {
	c := e.cep()
	if c == nil || e.taking {
		return false
	}
	e.taking = true // a send's wait for link memory progresses, which comes here
	defer func() { e.taking = false }()
	e.takeRecvs(c)
	return e.takeInjects(c)
}

func (e *endpoint) takeInjects(c *C.struct_dn_ep) bool {
	tail := atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.txq_tail)))
	head := uint64(c.txq_head) // only we store it, under mu
	for ; head != tail; head++ {
		q := &c.txq[head&(C.DN_TXQ-1)]
		r := e.post(unsafe.Pointer(&q.buf[0]), int(q.len), uint64(q.dst), uint64(q.tag), 0, nil, uint64(q.flags))
		if r == eAgain {
			break
		}
		if r != 0 {
			// queued only to an address we had sent to: it was removed since
			logf("a queued inject of %d bytes to %d failed: %d", q.len, q.dst, r)
			if e.txCntr != nil {
				e.txCntr.errs++
			}
		}
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.txq_head)), head)
	return head != tail
}

func (e *endpoint) takeRecvs(c *C.struct_dn_ep) {
	tail := atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.rxq_tail)))
	head := uint64(c.rxq_head) // only we store it, under mu
	if head == tail {
		return
	}
	for ; head != tail; head++ {
		q := &c.rxq[head&(C.DN_RXQ-1)]
		r := e.newRecv()
		*r = recvOp{buf: q.buf, size: int(q.len), src: uint64(q.src), tag: uint64(q.tag), ignore: uint64(q.ignore),
			ctx: q.ctx, flags: uint64(q.flags)}
		if ret := e.recv(r); ret != 0 {
			// the queue takes only what recv accepts (an open endpoint,
			// a buffer where there are bytes): say so if that changes
			logf("a queued receive of %d bytes was refused: %d", r.size, ret)
		}
	}
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&c.rxq_head)), head)
}
