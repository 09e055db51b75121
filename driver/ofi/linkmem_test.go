//go:build dimmnet_ofi

package main

import (
	"bytes"
	"errors"
	"testing"
	"time"
	"unsafe"
)

// takeBoth progresses both endpoints until endpoint i's CQ holds a
// completion: a rendezvous needs the sender's device to serve the PULL.
func (p *pair) takeBoth(tb testing.TB, i int) cqEntry {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second) // a hang guard, not a timing
	for time.Now().Before(deadline) {
		mu.Lock()
		p.e[1-i].progress()
		mu.Unlock()
		if got, ok := p.readOne(tb, i); ok {
			return got
		}
	}
	tb.Fatalf("endpoint %d: no completion within 30 s", i)
	return cqEntry{}
}

// TestLinkMemAllocator: the allocator's rules on the Go side, under the
// race detector: named errors for bad input, buffers aligned and inside
// link memory, a range is a link buffer only wholly inside one, and an
// endpoint holding buffers refuses to close.
func TestLinkMemAllocator(t *testing.T) {
	p := openPair(t)
	mu.Lock()
	defer mu.Unlock()
	e := p.e[0]
	if _, err := e.lmAlloc(0, 0); !errors.Is(err, errLmZero) {
		t.Errorf("alloc 0: %v, want %v", err, errLmZero)
	}
	if _, err := e.lmAlloc(64, 48); !errors.Is(err, errLmBadAlign) {
		t.Errorf("alloc aligned 48: %v, want %v", err, errLmBadAlign)
	}
	if _, err := e.lmAlloc(1<<40, 0); !errors.Is(err, errLmNoRoom) {
		t.Errorf("alloc 1 TiB: %v, want %v", err, errLmNoRoom)
	}
	avail := e.lmAvail()
	if _, err := e.lmAlloc(avail+64, 0); !errors.Is(err, errLmNoRoom) {
		t.Errorf("alloc avail+64 (%d): %v, want %v", avail+64, err, errLmNoRoom)
	}
	a, err := e.lmAlloc(4096, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.lmAlloc(100, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if uintptr(a)%64 != 0 || uintptr(b)%4096 != 0 {
		t.Errorf("buffers at %p and %p: want 64- and 4096-aligned", a, b)
	}
	if _, _, ok := e.linkBuf(a, 4096); !ok {
		t.Error("a whole buffer is not link memory")
	}
	if _, _, ok := e.linkBuf(unsafe.Add(a, 4000), 200); ok {
		t.Error("a range straddling a buffer's end counts as link memory")
	}
	if _, _, ok := e.linkBuf(unsafe.Pointer(&e.lm[len(e.lm)-64]), 128); ok {
		t.Error("a range straddling the end of link memory counts as link memory")
	}
	var ordinary [64]byte
	if _, _, ok := e.linkBuf(unsafe.Pointer(&ordinary), 64); ok {
		t.Error("ordinary memory counts as link memory")
	}
	if err := e.lmFree(unsafe.Add(a, 64)); !errors.Is(err, errLmNotOurs) {
		t.Errorf("free inside a buffer: %v, want %v", err, errLmNotOurs)
	}
	if err := e.lmFree(unsafe.Pointer(&ordinary)); !errors.Is(err, errLmNotOurs) {
		t.Errorf("free of ordinary memory: %v, want %v", err, errLmNotOurs)
	}
	if err := e.lmBusy(); !errors.Is(err, errLmInUse) {
		t.Errorf("an endpoint holding buffers: %v, want %v", err, errLmInUse)
	}
	for _, x := range []unsafe.Pointer{a, b} {
		if err := e.lmFree(x); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.lmFree(a); !errors.Is(err, errLmNotOurs) {
		t.Errorf("double free: %v, want %v", err, errLmNotOurs)
	}
	if e.lmBusy() != nil || e.linkBufs.held != 0 || e.lmAvail() != avail {
		t.Errorf("after freeing all: held %d, avail %d (was %d)", e.linkBufs.held, e.lmAvail(), avail)
	}
}

// TestLinkMemSendRecv: eager and rendezvous messages between link
// buffers of two endpoints arrive intact with no bounce copy on either
// side, and the same from ordinary memory is copied.
func TestLinkMemSendRecv(t *testing.T) {
	p := openPair(t)
	mu.Lock()
	src, err1 := p.e[0].lmAlloc(1<<20, 0)
	dst, err2 := p.e[1].lmAlloc(1<<20, 0)
	mu.Unlock()
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	ordSrc, ordDst := make([]byte, 1<<20), make([]byte, 1<<20)
	var ctx [2][32]byte
	for _, c := range []struct {
		n        int
		link, zc bool
	}{{8, true, true}, {4096, true, true}, {65536, true, true}, {1 << 20, true, true}, {8, false, false}, {65536, false, false}} {
		s, d := unsafe.Pointer(&ordSrc[0]), unsafe.Pointer(&ordDst[0])
		if c.link {
			s, d = src, dst
		}
		in, out := unsafe.Slice((*byte)(s), c.n), unsafe.Slice((*byte)(d), c.n)
		for i := range in {
			in[i] = byte(i*31 + c.n)
		}
		clear(out)
		mu.Lock()
		before := [2]lmCounts{p.e[0].linkBufs.counts, p.e[1].linkBufs.counts}
		r := p.e[1].newRecv()
		*r = recvOp{buf: d, size: c.n, src: addrUnspec, ctx: unsafe.Pointer(&ctx[1]), flags: dnDefault}
		if ret := p.e[1].recv(r); ret != 0 {
			t.Fatalf("recv: %d", ret)
		}
		if ret := p.e[0].send(s, c.n, p.dst[0], 0, 0, unsafe.Pointer(&ctx[0]), 0); ret != 0 {
			t.Fatalf("send %d: %d", c.n, ret)
		}
		mu.Unlock()
		if got := p.takeBoth(t, 1); got.ctx != unsafe.Pointer(&ctx[1]) || got.len != c.n {
			t.Fatalf("%d bytes: receive completion %+v", c.n, got)
		}
		if got := p.takeBoth(t, 0); got.ctx != unsafe.Pointer(&ctx[0]) {
			t.Fatalf("%d bytes: send completion %+v", c.n, got)
		}
		if !bytes.Equal(in, out) {
			t.Fatalf("%d bytes (link %v): payload differs", c.n, c.link)
		}
		mu.Lock()
		tx, rx := p.e[0].linkBufs.counts, p.e[1].linkBufs.counts
		mu.Unlock()
		zcSends, copied := tx.ZeroCopySends-before[0].ZeroCopySends, tx.CopiedSends-before[0].CopiedSends
		zcPulls, copiedPulls := rx.ZeroCopyPulls-before[1].ZeroCopyPulls, rx.CopiedPulls-before[1].CopiedPulls
		rdv := c.n > p.e[0].eagerMax
		switch {
		case c.zc && (zcSends != 1 || copied != 0):
			t.Errorf("%d bytes from a link buffer: %d sent with no copy, %d copied", c.n, zcSends, copied)
		case !c.zc && (zcSends != 0 || copied != 1):
			t.Errorf("%d bytes from ordinary memory: %d sent with no copy, %d copied", c.n, zcSends, copied)
		case rdv && c.zc && (zcPulls != 1 || copiedPulls != 0):
			t.Errorf("%d bytes into a link buffer: %d pulled straight, %d through a bounce", c.n, zcPulls, copiedPulls)
		case rdv && !c.zc && (zcPulls != 0 || copiedPulls != 1):
			t.Errorf("%d bytes into ordinary memory: %d pulled straight, %d through a bounce", c.n, zcPulls, copiedPulls)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if err := p.e[0].lmFree(src); err != nil {
		t.Error(err)
	}
	if err := p.e[1].lmFree(dst); err != nil {
		t.Error(err)
	}
}
