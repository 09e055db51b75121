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

// The receive queue in the endpoint's C memory (struct dn_ep, prov.h):
// fi_recv and fi_trecv fill it without entering Go, and every entry into
// the provider for the endpoint takes what it holds, in order, before it
// does anything else with receives or arrivals.

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
}

// takeQueued posts every receive queued in C, in the order the callers
// queued them; the caller holds mu.
func (e *endpoint) takeQueued() {
	c := e.cep()
	if c == nil {
		return
	}
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
