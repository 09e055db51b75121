//go:build dimmnet_ofi

package main

import (
	"testing"
	"unsafe"
)

// pair is two endpoints of this process on the shared-memory link, each
// with its own device, AV and CQ, each knowing the other: the Go side of
// what two fi_pingpong processes set up, driven without libfabric so a
// benchmark sees allocations and profiles the provider's own path.
type pair struct {
	e   [2]*endpoint
	q   [2]*cq
	dst [2]uint64 // e[i]'s fi_addr_t of the other
}

func openPair(tb testing.TB) *pair {
	tb.Helper()
	tb.Setenv("FI_DIMMNET_DIR", tb.TempDir())
	tb.Setenv("FI_DIMMNET_REGION_MB", "16")
	mu.Lock()
	defer mu.Unlock()
	p := &pair{}
	for i := range p.e {
		e, err := openEndpoint(fMsg|fTagged, 0, 0)
		if err != nil {
			tb.Fatal(err)
		}
		q, a := &cq{}, &av{byNode: map[uint16]uint64{}}
		if e.bind(a, 0) != 0 || e.bind(q, fTransmit|fRecv) != 0 || e.enable() != 0 {
			tb.Fatal("bind or enable failed")
		}
		p.e[i], p.q[i] = e, q
	}
	for i, e := range p.e {
		fa, err := e.av.insert(p.e[1-i].addr[:])
		if err != nil {
			tb.Fatal(err)
		}
		p.dst[i] = fa
	}
	tb.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range p.e {
			e.close()
		}
	})
	return p
}

// take reads q until one completion comes, as fi_pingpong's loop on
// fi_cq_read does, and returns it.
func (p *pair) take(tb testing.TB, i int) cqEntry {
	var got cqEntry
	for {
		mu.Lock()
		n, err := p.q[i].read(1, -1, func(_ int, e *cqEntry) { got = *e })
		mu.Unlock()
		if n == 1 {
			return got
		}
		if err != eAgain {
			tb.Fatalf("endpoint %d: cq read: %d", i, err)
		}
	}
}

// BenchmarkInjectPingPong is fi_pingpong's 8-byte loop on the provider's
// Go side, one round trip per op: fi_inject, fi_cq_read until the answer,
// fi_recv re-posted, on each endpoint in turn. The two devices run on the
// benchmark's goroutine, so ns/op is both sides' work with no waiting;
// allocs/op is what the steady path leaves to the garbage collector.
func BenchmarkInjectPingPong(b *testing.B) {
	p := openPair(b)
	var msg, rbuf [2][64]byte
	var ctx [2][32]byte // the caller's fi_context
	post := func(i int) {
		mu.Lock()
		defer mu.Unlock()
		if r := p.e[i].recv(&recvOp{buf: unsafe.Pointer(&rbuf[i]), size: len(rbuf[i]), src: addrUnspec, ctx: unsafe.Pointer(&ctx[i]), flags: dnDefault}); r != 0 {
			b.Fatalf("recv: %d", r)
		}
	}
	send := func(i int) {
		mu.Lock()
		defer mu.Unlock()
		if r := p.e[i].send(unsafe.Pointer(&msg[i]), 8, p.dst[i], 0, 0, nil, fInject); r != 0 {
			b.Fatalf("inject: %d", r)
		}
	}
	post(0)
	post(1)
	step := func() {
		for i := range 2 {
			send(i)
			got := p.take(b, 1-i)
			if got.ctx != unsafe.Pointer(&ctx[1-i]) || got.len != 8 {
				b.Fatalf("completion %+v", got)
			}
			post(1 - i)
		}
	}
	for range 1000 {
		step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		step()
	}
}
