//go:build dimmnet_ofi

package main

/*
#cgo LDFLAGS: -lfabric
#include <stdlib.h>
#include "prov.h"
*/
import "C"

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// mu serialises every call into the provider: the domain is FI_THREAD_SAFE
// by one lock, which costs an uncontended atomic on the single-threaded
// paths fi_pingpong and Open MPI's ranks take.
var mu sync.Mutex

// handles are the Go objects the C fids name: a fid holds the index
// plus one (0 is no object). A slice under mu instead of cgo.Handle,
// whose lookup hashes an interface in a sync.Map: every call into the
// provider looks its object up, three a small message, so this is a
// small-message cost.
var (
	handles  []any
	freeHdls []C.uintptr_t
)

// newHandle names v for C; the caller holds mu.
func newHandle(v any) C.uintptr_t {
	if n := len(freeHdls); n > 0 {
		h := freeHdls[n-1]
		freeHdls = freeHdls[:n-1]
		handles[h-1] = v
		return h
	}
	handles = append(handles, v)
	return C.uintptr_t(len(handles))
}

// handleValue is the object h names, nil for 0, a stale or a junk handle;
// the caller holds mu.
func handleValue(h C.uintptr_t) any {
	if h == 0 || uint64(h) > uint64(len(handles)) {
		return nil
	}
	return handles[h-1]
}

// deleteHandle forgets h; the caller holds mu.
func deleteHandle(h C.uintptr_t) {
	handles[h-1] = nil
	freeHdls = append(freeHdls, h)
}

func obj[T any](h C.uintptr_t) (T, bool) {
	v, ok := handleValue(h).(T)
	return v, ok
}

//export goClose
func goClose(h C.uintptr_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	if h == 0 {
		return 0
	}
	switch v := handleValue(h).(type) {
	case *endpoint:
		if v.lmBusy() != nil {
			return -C.FI_EBUSY
		}
		v.close()
	case *cq:
		if len(v.eps) > 0 {
			return -C.FI_EBUSY
		}
		v.w.close()
	case *av:
		if v.users > 0 {
			return -C.FI_EBUSY
		}
	case *cntr:
		if len(v.eps) > 0 {
			return -C.FI_EBUSY
		}
		v.w.close()
	case nil:
		return -C.FI_EINVAL
	}
	deleteHandle(h)
	return 0
}

//export goAvOpen
func goAvOpen(typ C.int) C.uintptr_t {
	mu.Lock()
	defer mu.Unlock()
	return newHandle(&av{typ: int(typ), byNode: map[uint16]uint64{}})
}

//export goAvInsert
func goAvInsert(h C.uintptr_t, addr unsafe.Pointer, count C.size_t, out *C.fi_addr_t, flags C.uint64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	a, ok := obj[*av](h)
	if !ok {
		return -C.FI_EINVAL
	}
	if count > 0 && addr == nil {
		return -C.FI_EINVAL
	}
	src := unsafe.Slice((*byte)(addr), int(count)*addrLen)
	var outs []C.fi_addr_t
	if out != nil {
		outs = unsafe.Slice(out, int(count))
	}
	n := 0
	for i := 0; i < int(count); i++ {
		fa, err := a.insert(src[i*addrLen : (i+1)*addrLen])
		if err != nil {
			logf("fi_av_insert: address %d: %v", i, err)
			fa = notAvail
		} else {
			n++
		}
		if outs != nil {
			outs[i] = C.fi_addr_t(fa)
		}
	}
	return C.int(n)
}

//export goAvRemove
func goAvRemove(h C.uintptr_t, fa *C.fi_addr_t, count C.size_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	a, ok := obj[*av](h)
	if !ok || (count > 0 && fa == nil) {
		return -C.FI_EINVAL
	}
	for _, x := range unsafe.Slice(fa, int(count)) {
		if err := a.remove(uint64(x)); err != nil {
			return -C.FI_EINVAL
		}
	}
	return 0
}

//export goAvLookup
func goAvLookup(h C.uintptr_t, fa C.fi_addr_t, addr unsafe.Pointer, addrlen *C.size_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	a, ok := obj[*av](h)
	if !ok || addrlen == nil {
		return -C.FI_EINVAL
	}
	e, ok := a.get(uint64(fa))
	if !ok {
		return -C.FI_EINVAL
	}
	n := min(int(*addrlen), addrLen)
	if addr != nil {
		copy(unsafe.Slice((*byte)(addr), n), e.raw[:n])
	}
	*addrlen = addrLen
	return 0
}

//export goCqRead
func goCqRead(h C.uintptr_t, out *C.struct_fi_cq_tagged_entry, count C.size_t, src *C.fi_addr_t, timeoutMs C.longlong) C.ssize_t {
	mu.Lock()
	defer mu.Unlock()
	q, ok := obj[*cq](h)
	if !ok {
		return -C.FI_EINVAL
	}
	if q.w.armed {
		q.w.disarm() // read after a wait: the descriptor's next poll blocks
	}
	n, err := q.read(int(count), int64(timeoutMs), func(i int, e *cqEntry) {
		o := (*[1 << 20]C.struct_fi_cq_tagged_entry)(unsafe.Pointer(out))[i : i+1 : i+1]
		o[0].op_context = e.ctx
		o[0].flags = C.uint64_t(e.flags)
		o[0].len = C.size_t(e.len)
		o[0].buf = e.buf
		o[0].data = C.uint64_t(e.data)
		o[0].tag = C.uint64_t(e.tag)
		if src != nil {
			unsafe.Slice(src, i+1)[i] = C.fi_addr_t(e.src)
		}
	})
	if err != 0 {
		return C.ssize_t(err)
	}
	return C.ssize_t(n)
}

//export goCqReadErr
func goCqReadErr(h C.uintptr_t, buf *C.struct_fi_cq_err_entry) C.ssize_t {
	mu.Lock()
	defer mu.Unlock()
	q, ok := obj[*cq](h)
	if !ok || buf == nil {
		return -C.FI_EINVAL
	}
	q.w.disarm()
	if len(q.errs) == 0 {
		return -C.FI_EAGAIN
	}
	e := q.errs[0]
	q.errs = q.errs[1:]
	buf.op_context = e.ctx
	buf.flags = C.uint64_t(e.flags)
	buf.len = C.size_t(e.len)
	buf.buf = e.buf
	buf.data = C.uint64_t(e.data)
	buf.tag = C.uint64_t(e.tag)
	buf.olen = C.size_t(e.olen)
	buf.err = C.int(e.err)
	buf.prov_errno = C.int(e.provErr)
	buf.err_data_size = 0
	return 1
}

var strErrs = map[C.int]*C.char{}

//export goStrErr
func goStrErr(e C.int) *C.char {
	mu.Lock()
	defer mu.Unlock()
	if s, ok := strErrs[e]; ok {
		return s
	}
	s := C.CString(provErrString(int(e)))
	strErrs[e] = s
	return s
}

//export goCntrRead
func goCntrRead(h C.uintptr_t, which C.int) C.uint64_t {
	mu.Lock()
	defer mu.Unlock()
	c, ok := obj[*cntr](h)
	if !ok {
		return 0
	}
	c.w.disarm()
	c.progress()
	c.seenVal, c.seenErrs = c.val, c.errs // fi_trywait's "moved since read"
	if which == 1 {
		return C.uint64_t(c.errs)
	}
	return C.uint64_t(c.val)
}

//export goCntrSet
func goCntrSet(h C.uintptr_t, which C.int, v C.uint64_t, add C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	c, ok := obj[*cntr](h)
	if !ok {
		return -C.FI_EINVAL
	}
	p := &c.val
	if which == 1 {
		p = &c.errs
	}
	if add != 0 {
		*p += uint64(v)
	} else {
		*p = uint64(v)
	}
	return 0
}

//export goCntrWait
func goCntrWait(h C.uintptr_t, threshold C.uint64_t, timeoutMs C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	c, ok := obj[*cntr](h)
	if !ok {
		return -C.FI_EINVAL
	}
	return C.int(c.wait(uint64(threshold), int64(timeoutMs)))
}

//export goEpOpen
func goEpOpen(ce *C.struct_dn_ep, h *C.uintptr_t, caps, txFlags, rxFlags C.uint64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, err := openEndpoint(uint64(caps), uint64(txFlags), uint64(rxFlags))
	if err != nil {
		logf("fi_endpoint: %v", err)
		if errors.Is(err, errNoNode) {
			return -C.FI_EADDRINUSE
		}
		return -C.FI_EIO
	}
	e.c = unsafe.Pointer(ce)
	*h = newHandle(e)
	return 0
}

//export goEpBind
func goEpBind(eh, oh C.uintptr_t, flags C.uint64_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](eh)
	o := handleValue(oh)
	if !ok || o == nil {
		return -C.FI_EINVAL
	}
	return C.int(e.bind(o, uint64(flags)))
}

//export goEpEnable
func goEpEnable(h C.uintptr_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok {
		return -C.FI_EINVAL
	}
	return C.int(e.enable())
}

//export goEpGetname
func goEpGetname(h C.uintptr_t, addr unsafe.Pointer, addrlen *C.size_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok || addrlen == nil {
		return -C.FI_EINVAL
	}
	have := int(*addrlen)
	*addrlen = addrLen
	if have < addrLen || addr == nil {
		return -C.FI_ETOOSMALL
	}
	copy(unsafe.Slice((*byte)(addr), addrLen), e.addr[:])
	return 0
}

//export goEpOpsFlags
func goEpOpsFlags(h C.uintptr_t, set C.int, arg unsafe.Pointer) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok || arg == nil {
		return -C.FI_EINVAL
	}
	f := (*uint64)(arg)
	p := &e.txFlags
	if *f&fRecv != 0 {
		p = &e.rxFlags
	}
	if set != 0 {
		*p = *f &^ (fTransmit | fRecv)
	} else {
		*f = *f&(fTransmit|fRecv) | *p
	}
	return 0
}

// goEpMinMultiRecv reads (set 0) or sets the endpoint's
// FI_OPT_MIN_MULTI_RECV, the size_t at v, for fi_getopt and fi_setopt
// (prov.c checks level, name and length).
//
//export goEpMinMultiRecv
func goEpMinMultiRecv(h C.uintptr_t, set C.int, v unsafe.Pointer) C.int {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok {
		return -C.FI_EINVAL
	}
	p := (*C.size_t)(v)
	if set == 0 {
		*p = C.size_t(e.minMultiRecv)
		return 0
	}
	// any size: one above a buffer's releases it after its first message
	e.minMultiRecv = int(min(uint64(*p), 1<<62))
	return 0
}

//export goEpCancel
func goEpCancel(h C.uintptr_t, ctx unsafe.Pointer) C.ssize_t {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok {
		return -C.FI_EINVAL
	}
	return C.ssize_t(e.cancel(ctx))
}

//export goRecv
func goRecv(h C.uintptr_t, buf unsafe.Pointer, n C.size_t, src C.fi_addr_t, tag, ignore C.uint64_t, ctx unsafe.Pointer, flags C.uint64_t) C.ssize_t {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok {
		return -C.FI_EINVAL
	}
	e.takeQueued() // those queued in C first: posting order is matching order
	r := e.newRecv()
	*r = recvOp{buf: buf, size: int(n), src: uint64(src), tag: uint64(tag), ignore: uint64(ignore), ctx: ctx, flags: uint64(flags)}
	return C.ssize_t(e.recv(r))
}

//export goSend
func goSend(h C.uintptr_t, buf unsafe.Pointer, n C.size_t, dst C.fi_addr_t, tag, data C.uint64_t, ctx unsafe.Pointer, flags C.uint64_t) C.ssize_t {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok {
		return -C.FI_EINVAL
	}
	return C.ssize_t(e.send(buf, int(n), uint64(dst), uint64(tag), uint64(data), ctx, uint64(flags)))
}

//export goRMA
func goRMA(h C.uintptr_t, write C.int, buf unsafe.Pointer, n C.size_t, peer C.fi_addr_t, addr, key, data C.uint64_t, ctx unsafe.Pointer, flags C.uint64_t) C.ssize_t {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok {
		return -C.FI_EINVAL
	}
	return C.ssize_t(e.rma(write != 0, buf, int(n), uint64(peer), uint64(addr), uint64(key), uint64(data), ctx, uint64(flags)))
}

//export goAtomic
func goAtomic(h C.uintptr_t, op C.int, operand, compare C.uint64_t, result unsafe.Pointer, dst C.fi_addr_t, addr, key C.uint64_t, ctx unsafe.Pointer) C.ssize_t {
	mu.Lock()
	defer mu.Unlock()
	e, ok := obj[*endpoint](h)
	if !ok {
		return -C.FI_EINVAL
	}
	return C.ssize_t(e.atomic(int(op), uint64(operand), uint64(compare), result, uint64(dst), uint64(addr), uint64(key), ctx))
}

//export dimmnet_nop
func dimmnet_nop() C.int { return 0 }

//export dimmnet_goroutines
func dimmnet_goroutines() C.int { return C.int(runtime.NumGoroutine()) }

// param reads one of the FI_DIMMNET_* variables through libfabric (which
// also takes them from the environment), "" when unset. Before
// fi_prov_ini has declared them (the package's Go tests, which drive the
// endpoint without libfabric loading the provider) it reads the
// environment itself, as libfabric would.
func param(name string) string {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	v := C.dn_param_str(cs)
	if v == nil {
		return os.Getenv("FI_DIMMNET_" + strings.ToUpper(name))
	}
	return C.GoString(v)
}
