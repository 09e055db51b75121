//go:build dimmnet_ofi

package main

/*
#include "prov.h"
*/
import "C"

import (
	"errors"
	"unsafe"

	"github.com/dimmnet/dimmnet/driver"
	"golang.org/x/sys/unix"
)

// Wait objects (FI_WAIT_FD), as libfabric's manual-progress providers
// offer them: a CQ or counter opened with wait_obj FI_WAIT_FD or
// FI_WAIT_UNSPEC owns an eventfd (fi_control FI_GETWAIT), which every
// device of an endpoint bound to it signals along with its interrupt.
// fi_trywait runs progress and answers -FI_EAGAIN if something waits to be
// read; otherwise it hands each endpoint's device back to its engine
// (which serves the peers while the caller sleeps) and arms the device's
// interrupt (DRV_WAIT), so the next status it publishes, a peer's frame
// landing while nobody calls into the provider, makes the descriptor
// readable. Reading the object disarms it and drains the descriptor.

// waitObj is a CQ's or counter's descriptor and its armed state.
type waitObj struct {
	fd    int         // eventfd; -1: opened without a wait object
	armed bool        // fi_trywait armed it: the next status or entry signals fd
	eps   []*endpoint // endpoints whose device interrupts were armed for it
}

// errNoWaitFD names a wait object the medium cannot give (pci: the
// device is the daemon's, whose interrupt reaches the guest's VFIO
// eventfd only).
var errNoWaitFD = errors.New("FI_WAIT_FD: the pci medium's device interrupts only its own descriptor")

// openWait makes the descriptor a wait object kind asks for: FI_WAIT_FD
// and FI_WAIT_UNSPEC get one; FI_WAIT_NONE none; the others (wait sets,
// mutex/cond, yield) are refused with -FI_ENOSYS.
func openWait(kind C.int) (waitObj, int) {
	w := waitObj{fd: -1}
	switch kind {
	case C.FI_WAIT_NONE:
		return w, 0
	case C.FI_WAIT_UNSPEC, C.FI_WAIT_FD:
	default:
		return w, eNoSys
	}
	if param("link") == "pci" {
		if kind == C.FI_WAIT_FD {
			logf("fi_cq_open: %v", errNoWaitFD)
			return w, eNoSys
		}
		return w, 0 // UNSPEC: fi_cq_sread sleeps inside the provider
	}
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		logf("wait object: %v", err)
		return w, -C.FI_EMFILE
	}
	w.fd = fd
	return w, 0
}

// signal makes the descriptor readable.
func (w *waitObj) signal() {
	var one = [8]byte{1}
	unix.Write(w.fd, one[:])
}

// drain empties the descriptor, so the caller's next poll blocks.
func (w *waitObj) drain() {
	var b [8]byte
	for {
		if n, _ := unix.Read(w.fd, b[:]); n != 8 {
			return
		}
	}
}

// disarm undoes fi_trywait's arming once the caller reads: the devices
// stop interrupting for it and the descriptor is drained. The caller
// holds mu.
func (w *waitObj) disarm() {
	if !w.armed {
		return
	}
	w.armed = false
	for _, e := range w.eps {
		if !e.closed {
			e.d.DisarmInterrupt()
		}
	}
	clear(w.eps)
	w.eps = w.eps[:0]
	w.drain()
}

// arm arms every endpoint's device for w; false (nothing left armed)
// when a device already has a status waiting.
func (w *waitObj) arm(eps []*endpoint) bool {
	if w.armed {
		return true
	}
	for _, e := range eps {
		if !e.armWait() {
			w.armed = true // so disarm undoes those armed so far
			w.disarm()
			return false
		}
		w.eps = append(w.eps, e)
	}
	w.armed = true
	return true
}

func (w *waitObj) close() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// armWait hands the device to its engine and arms its interrupt; false
// if a status already waits (the caller reads instead).
func (e *endpoint) armWait() bool {
	if e.closed {
		return true // nothing more will come
	}
	if e.driving {
		if e.releaser != nil {
			e.releaser.Stop()
		}
		e.d.Drive(false)
		e.driving = false
	}
	return e.d.ArmInterrupt()
}

// watched are the descriptors each endpoint's device signals, with what
// undoes each; guarded by mu.
var watched = map[*endpoint]map[int]func(){}

// watch makes e's device signal w's descriptor with its interrupt.
func (e *endpoint) watch(w *waitObj) int {
	if w.fd < 0 {
		return 0
	}
	m := watched[e]
	if _, ok := m[w.fd]; ok {
		return 0
	}
	remove, err := e.d.AddInterruptFD(w.fd)
	if err != nil {
		logf("bind: %v", err)
		if errors.Is(err, driver.ErrNoInterruptFD) {
			return eNoSys
		}
		return eInval
	}
	if m == nil {
		m = map[int]func(){}
		watched[e] = m
	}
	m[w.fd] = remove
	return 0
}

// unwatchAll stops e's device signalling any wait object (e closes).
func (e *endpoint) unwatchAll() {
	for _, remove := range watched[e] {
		remove()
	}
	delete(watched, e)
}

// ready reports whether the CQ has something to read.
func (q *cq) ready() bool { return q.head < len(q.entries) || len(q.errs) > 0 }

// ready reports whether the counter moved since it was last read.
func (c *cntr) ready() bool { return c.val != c.seenVal || c.errs != c.seenErrs }

// tryWait is fi_trywait over the CQs and counters hs names.
func tryWait(hs []C.uintptr_t) int {
	for _, h := range hs {
		switch v := handleValue(h).(type) {
		case *cq:
			if v.w.fd < 0 {
				return eInval
			}
			v.w.disarm()
			v.progress()
		case *cntr:
			if v.w.fd < 0 {
				return eInval
			}
			v.w.disarm()
			v.progress()
		default:
			return eInval
		}
	}
	for _, h := range hs {
		switch v := handleValue(h).(type) {
		case *cq:
			if v.ready() {
				return eAgain
			}
		case *cntr:
			if v.ready() {
				return eAgain
			}
		}
	}
	for i, h := range hs {
		ok := true
		switch v := handleValue(h).(type) {
		case *cq:
			ok = v.w.arm(v.eps)
		case *cntr:
			ok = v.w.arm(v.eps)
		}
		if !ok {
			for _, h := range hs[:i] {
				if w := waitOf(h); w != nil {
					w.disarm()
				}
			}
			return eAgain
		}
	}
	return 0
}

// waitOf is the wait object of the CQ or counter h names, nil for others.
func waitOf(h C.uintptr_t) *waitObj {
	switch v := handleValue(h).(type) {
	case *cq:
		return &v.w
	case *cntr:
		return &v.w
	}
	return nil
}

//export goTryWait
func goTryWait(hs *C.uintptr_t, n C.int) C.int {
	mu.Lock()
	defer mu.Unlock()
	return C.int(tryWait(unsafe.Slice(hs, int(n))))
}

//export goWaitFD
func goWaitFD(h C.uintptr_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	if w := waitOf(h); w != nil {
		return C.int(w.fd)
	}
	return -1
}

//export goCqOpen
func goCqOpen(wait C.int, h *C.uintptr_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	w, err := openWait(wait)
	if err != 0 {
		return C.int(err)
	}
	*h = newHandle(&cq{w: w})
	return 0
}

//export goCntrOpen
func goCntrOpen(wait C.int, h *C.uintptr_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	w, err := openWait(wait)
	if err != 0 {
		return C.int(err)
	}
	*h = newHandle(&cntr{w: w})
	return 0
}

//export goCqSignal
func goCqSignal(h C.uintptr_t) C.int {
	mu.Lock()
	defer mu.Unlock()
	q, ok := obj[*cq](h)
	if !ok {
		return -C.FI_EINVAL
	}
	q.signalled = true // a reader in fi_cq_sread looks between its sleeps
	if q.w.fd >= 0 {
		q.w.signal() // and one in poll wakes
	}
	return 0
}
