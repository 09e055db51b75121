//go:build dimmnet_ofi

package main

import (
	"testing"
	"time"
	"unsafe"
)

// TestInjectQueueStaysBoundedInAStream: a sender that keeps injecting
// while both sides progress always has injects newer than the last DONE,
// so its peer's queue never empties; the entries the DONEs freed must
// still be dropped, or the queue grows by one per inject for ever.
func TestInjectQueueStaysBoundedInAStream(t *testing.T) {
	p := openPair(t)
	var msg [8]byte
	const n = 50_000
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < n; {
		switch r := p.e[0].send(unsafe.Pointer(&msg), len(msg), p.dst[0], 0, 0, nil, injectCall); r {
		case 0:
			i++
		case eAgain:
		default:
			t.Fatalf("inject %d: %d", i, r)
		}
		if i%5 == 0 {
			p.e[0].progress()
			p.e[1].progress()
			p.e[1].unexp[0] = p.e[1].unexp[0][:0]
		}
	}
	q := p.e[0].inj.qs[0]
	held := len(q.ents) - q.head
	if len(q.ents) > 4*injSignalEvery+held {
		t.Fatalf("after %d injects the queue's slice holds %d entries (%d freed ones before its head) for %d held", n, len(q.ents), q.head, held)
	}
}

// awaitSend reads endpoint 0's CQ, progressing endpoint 1, until a
// completion comes (a rendezvous send's, on the receiver's FIN).
func (p *pair) awaitSend(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, ok := p.readOne(t, 0); ok {
			return
		}
		mu.Lock()
		p.e[1].progress()
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatal("no send completion")
		}
	}
}

// TestRendezvousReceiveFreesHeldInjects: inject stagings held (waiting
// for a later DONE to their peer) in the middle of the arena leave room in
// all but not in one piece; a rendezvous receive that needs the room must
// get it by the FENCE that frees them, not wait for an inject that may
// never come.
func TestRendezvousReceiveFreesHeldInjects(t *testing.T) {
	p := openPair(t)
	f0, _ := p.e[0].arena.room()
	half := int(f0 / 2)
	big := make([]byte, f0)
	rbuf := make([]byte, f0)
	var sctx, rctx [32]byte
	var msg [8]byte
	mu.Lock()
	r := p.e[1].newRecv()
	*r = recvOp{buf: unsafe.Pointer(&rbuf[0]), size: half, src: addrUnspec, ctx: unsafe.Pointer(&rctx), flags: dnDefault}
	if ret := p.e[1].recv(r); ret != 0 {
		t.Fatal(ret)
	}
	if ret := p.e[0].send(unsafe.Pointer(&big[0]), half, p.dst[0], 0, 0, unsafe.Pointer(&sctx), dnDefault); ret != 0 {
		t.Fatal("rendezvous send", ret)
	}
	for range 8 { // injects staged right after the body
		if ret := p.e[0].send(unsafe.Pointer(&msg), 8, p.dst[0], 0, 0, nil, injectCall); ret != 0 {
			t.Fatal("inject", ret)
		}
	}
	mu.Unlock()
	p.take(t, 1)   // the rendezvous arrived
	p.awaitSend(t) // the FIN frees the body
	mu.Lock()
	if p.e[0].inj.held == 0 {
		mu.Unlock()
		t.Skip("no inject staging held: the arena is not split, nothing to test")
	}
	want := int(f0 * 3 / 4)
	r = p.e[0].newRecv()
	*r = recvOp{buf: unsafe.Pointer(&rbuf[0]), size: want, src: addrUnspec, ctx: unsafe.Pointer(&rctx), flags: dnDefault}
	if ret := p.e[0].recv(r); ret != 0 {
		t.Fatal(ret)
	}
	if ret := p.e[1].send(unsafe.Pointer(&big[0]), want, p.dst[1], 0, 0, unsafe.Pointer(&sctx), dnDefault); ret != 0 {
		t.Fatal("rendezvous send 2", ret)
	}
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := p.readOne(t, 0); ok {
			return
		}
		mu.Lock()
		p.e[1].progress()
		waiting := len(p.e[0].waiting)
		mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("a %d-byte rendezvous receive never completed (%d pulls waiting for room)", want, waiting)
		}
	}
}

// TestLinkMemAllocFreesHeldInjects: the caller's link-memory buffer, as
// a rendezvous receive's bounce, gets the room that held inject stagings
// split, by the FENCE that frees them, rather than failing with no room.
func TestLinkMemAllocFreesHeldInjects(t *testing.T) {
	p := openPairRegion(t, 64) // a reserve (17 MiB) well below half the arena
	e := p.e[0]
	const body = 16 << 20 // the largest message
	var sctx, rctx [32]byte
	var msg [8]byte
	big := make([]byte, body)
	rbuf := make([]byte, body)
	mu.Lock()
	f0, _ := e.arena.room()
	// A buffer first, then the body, then the injects' stagings: freed,
	// the buffer and the body leave the stagings in the arena's middle.
	first, err := e.lmAlloc(f0/2-body-lmRoom-4096, 0)
	r := p.e[1].newRecv()
	*r = recvOp{buf: unsafe.Pointer(&rbuf[0]), size: body, src: addrUnspec, ctx: unsafe.Pointer(&rctx), flags: dnDefault}
	ret := p.e[1].recv(r)
	if err == nil && ret == 0 {
		ret = e.send(unsafe.Pointer(&big[0]), body, p.dst[0], 0, 0, unsafe.Pointer(&sctx), dnDefault)
	}
	for k := 0; k < 8 && err == nil && ret == 0; k++ {
		ret = e.send(unsafe.Pointer(&msg), 8, p.dst[0], 0, 0, nil, injectCall)
	}
	mu.Unlock()
	if err != nil || ret != 0 {
		t.Fatalf("set up: alloc %v, recv, send or inject %d", err, ret)
	}
	p.take(t, 1)
	p.awaitSend(t) // the FIN frees the body
	mu.Lock()
	err = e.lmFree(first)
	free, largest := e.arena.room()
	held := e.inj.held
	size := free - e.lmReserve() - lmRoom - 4096
	var b unsafe.Pointer
	if err == nil && held > 0 && size > largest {
		b, err = e.lmAlloc(size, 0)
	}
	left := e.inj.held
	if b != nil {
		e.lmFree(b)
	}
	mu.Unlock()
	switch {
	case held == 0:
		t.Skip("no inject staging held: the arena is not split, nothing to test")
	case size <= largest:
		t.Skipf("the split leaves a piece of %d for %d bytes: nothing to test", largest, size)
	case err != nil:
		t.Fatalf("alloc %d bytes (%d free, largest piece %d, %d stagings held): %v", size, free, largest, held, err)
	case left != 0:
		t.Errorf("%d inject stagings still held after the FENCE", left)
	}
}
