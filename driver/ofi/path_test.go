//go:build dimmnet_ofi

package main

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/uapi"
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
	return openPairRegion(tb, 16)
}

// openPairRegion is openPair with regions of mb MiB each.
func openPairRegion(tb testing.TB, mb int) *pair {
	tb.Helper()
	tb.Setenv("FI_DIMMNET_DIR", tb.TempDir())
	tb.Setenv("FI_DIMMNET_REGION_MB", strconv.Itoa(mb))
	mu.Lock()
	defer mu.Unlock()
	p := &pair{}
	for i := range p.e {
		e, err := openEndpoint(fMsg|fTagged, 0, 0)
		if err != nil {
			tb.Fatal(err)
		}
		q, a := &cq{w: waitObj{fd: -1}}, &av{byNode: map[uint16]uint64{}} // no wait object, as FI_WAIT_NONE opens it
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
	for {
		if got, ok := p.readOne(tb, i); ok {
			return got
		}
	}
}

// readOne is one non-blocking read of endpoint i's CQ: the completion,
// if one came. Any error but -FI_EAGAIN fails the test.
func (p *pair) readOne(tb testing.TB, i int) (cqEntry, bool) {
	var got cqEntry
	mu.Lock()
	n, err := p.q[i].read(1, -1, func(_ int, e *cqEntry) { got = *e })
	mu.Unlock()
	if n != 1 && err != eAgain {
		tb.Fatalf("endpoint %d: cq read: %d", i, err)
	}
	return got, n == 1
}

// injectLoop is fi_pingpong's 8-byte loop on the provider's Go side:
// fi_inject, fi_cq_read until the answer, fi_recv re-posted, on each
// endpoint in turn; step is one round trip, and checks that each answer
// completed the receive posted for it with its 8 bytes.
type injectLoop struct {
	tb   testing.TB
	p    *pair
	msg  [2][64]byte
	rbuf [2][64]byte
	ctx  [2][32]byte // the caller's fi_context
}

func newInjectLoop(tb testing.TB) *injectLoop {
	l := &injectLoop{tb: tb, p: openPair(tb)}
	l.post(0)
	l.post(1)
	return l
}

func (l *injectLoop) post(i int) {
	mu.Lock()
	defer mu.Unlock()
	r := l.p.e[i].newRecv() // as goRecv does
	*r = recvOp{buf: unsafe.Pointer(&l.rbuf[i]), size: len(l.rbuf[i]), src: addrUnspec, ctx: unsafe.Pointer(&l.ctx[i]), flags: dnDefault}
	if ret := l.p.e[i].recv(r); ret != 0 {
		l.tb.Fatalf("recv: %d", ret)
	}
}

func (l *injectLoop) send(i int) {
	mu.Lock()
	defer mu.Unlock()
	if r := l.p.e[i].send(unsafe.Pointer(&l.msg[i]), 8, l.p.dst[i], 0, 0, nil, injectCall); r != 0 {
		l.tb.Fatalf("inject: %d", r)
	}
}

func (l *injectLoop) step() {
	for i := range 2 {
		l.msg[i][0]++
		l.send(i)
		got := l.p.take(l.tb, 1-i)
		if got.ctx != unsafe.Pointer(&l.ctx[1-i]) || got.len != 8 || l.rbuf[1-i][0] != l.msg[i][0] {
			l.tb.Fatalf("endpoint %d: completion %+v, first byte %d, sent %d", 1-i, got, l.rbuf[1-i][0], l.msg[i][0])
		}
		l.post(1 - i)
	}
}

// TestEagerMessagesArriveWhole: an eager message's short header leaves
// its length to the packet's, so every size around the header's and the
// frame's cache lines reaches the receive posted for it byte for byte,
// with its remote CQ data.
func TestEagerMessagesArriveWhole(t *testing.T) {
	p := openPair(t)
	src, dst := make([]byte, 4096), make([]byte, 4096)
	var ctx [32]byte
	for _, n := range []int{0, 1, 8, 15, 16, 17, 42, 48, 100, 4096} {
		for i := range src {
			src[i] = byte(i*7 + n)
		}
		clear(dst)
		data := uint64(0xfeed_0000 + n)
		mu.Lock()
		r := p.e[1].newRecv()
		*r = recvOp{buf: unsafe.Pointer(&dst[0]), size: len(dst), src: addrUnspec, ctx: unsafe.Pointer(&ctx), flags: dnDefault}
		ret := p.e[1].recv(r)
		if ret == 0 {
			ret = p.e[0].send(unsafe.Pointer(&src[0]), n, p.dst[0], 0, data, nil, injectCall|fCQData)
		}
		mu.Unlock()
		if ret != 0 {
			t.Fatalf("%d bytes: recv or inject: %d", n, ret)
		}
		got := p.take(t, 1)
		if got.ctx != unsafe.Pointer(&ctx) || got.len != n || got.data != data || got.flags&fCQData == 0 {
			t.Fatalf("%d bytes: completion %+v, want len %d and data %#x", n, got, n, data)
		}
		if !bytes.Equal(dst[:n], src[:n]) || n < len(dst) && dst[n] != 0 {
			t.Fatalf("%d bytes: the body arrived changed (or overran)", n)
		}
	}
}

// TestAddressOfAnotherVersionRefused: a peer of a build that speaks
// another version of the endpoints' protocol would misread our messages
// and we its: fi_av_insert refuses its address, naming why.
func TestAddressOfAnotherVersionRefused(t *testing.T) {
	p := openPair(t)
	b := p.e[1].addr
	b[2] = addrVersion - 1
	mu.Lock()
	_, err := p.e[0].av.insert(b[:])
	mu.Unlock()
	if !errors.Is(err, errOtherVer) {
		t.Fatalf("insert of a version-%d address: %v, want %v", b[2], err, errOtherVer)
	}
}

// TestInjectPathAllocs: a small message costs the provider no garbage
// once its free lists are warm (a collection's assists and workers stall
// the caller's thread, which a ping-pong's mean pays many times over).
func TestInjectPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates")
	}
	l := newInjectLoop(t)
	for range 100 {
		l.step()
	}
	if a := testing.AllocsPerRun(1000, l.step); a != 0 {
		t.Errorf("%v allocations per round trip, want 0", a)
	}
}

// BenchmarkInjectPingPong runs the loop one round trip per op. The two
// devices run on the benchmark's goroutine, so ns/op is both sides' work
// with no waiting; allocs/op is what the steady path leaves to the
// garbage collector.
func BenchmarkInjectPingPong(b *testing.B) {
	l := newInjectLoop(b)
	for range 1000 {
		l.step()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l.step()
	}
}

// TestUnsignalledInjectStagingFreed: injects go out without a DONE
// (inject.go), so their link-memory stagings are freed by a later
// signalled inject's DONE or a FENCE's: a long run of injects holds at
// most one queue's worth, and the fence gives every byte back.
func TestUnsignalledInjectStagingFreed(t *testing.T) {
	l := newInjectLoop(t)
	mu.Lock()
	before := [2]uint64{l.p.e[0].arena.inUse, l.p.e[1].arena.inUse}
	mu.Unlock()
	for range 1000 {
		l.step()
	}
	mu.Lock()
	for i, e := range l.p.e {
		if e.inj.held == 0 || e.inj.held > injSignalEvery {
			t.Errorf("endpoint %d holds %d inject stagings after 1000, want 1-%d", i, e.inj.held, injSignalEvery)
		}
		if grew := e.arena.inUse - before[i]; grew != uint64(e.inj.held)*granule {
			t.Errorf("endpoint %d: arena grew %d bytes for %d held stagings", i, grew, e.inj.held)
		}
		e.injectFence()
	}
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		held := l.p.e[0].inj.held + l.p.e[1].inj.held
		if held > 0 {
			l.p.e[0].progress()
			l.p.e[1].progress()
		}
		mu.Unlock()
		if held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d inject stagings still held 10 s after the fences", held)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, e := range l.p.e {
		if e.arena.inUse != before[i] {
			t.Errorf("endpoint %d: arena holds %d bytes after the fence, %d before the injects", i, e.arena.inUse, before[i])
		}
		if e.inj.fence != 0 {
			t.Errorf("endpoint %d: fence still pending", i)
		}
	}
}

// TestInjectStreamSignalsOneIn64: a burst of injects asks the device for
// one DONE in injSignalEvery, however late the DONEs come back, and every
// message arrives.
func TestInjectStreamSignalsOneIn64(t *testing.T) {
	p := openPair(t)
	const n = 10 * injSignalEvery
	var msg [8]byte
	mu.Lock()
	before := p.e[0].d.Counter(uapi.CtrStatusWritten)
	for i := 0; i < n; {
		msg[0] = byte(i)
		switch r := p.e[0].send(unsafe.Pointer(&msg), len(msg), p.dst[0], 0, 0, nil, injectCall); r {
		case 0:
			i++
		case eAgain:
			p.e[0].progress()
		default:
			mu.Unlock()
			t.Fatalf("inject %d: %d", i, r)
		}
	}
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		p.e[0].progress()
		p.e[1].progress()
		held, got := p.e[0].inj.held, len(p.e[1].unexp[0])
		mu.Unlock()
		if held < injSignalEvery && got == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after %d injects: %d stagings held, %d messages arrived", n, held, got)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if st := p.e[0].d.Counter(uapi.CtrStatusWritten) - before; st != n/injSignalEvery {
		t.Errorf("the sender's device wrote %d statuses for %d injects, want %d", st, n, n/injSignalEvery)
	}
	for i, m := range p.e[1].unexp[0] {
		if m.n != len(msg) || m.body[0] != byte(i) {
			t.Fatalf("message %d: %d bytes, first %d", i, m.n, m.body[0])
		}
	}
}

// TestReceiveRingSize: FI_DIMMNET_RING_KB sizes each endpoint's receive
// ring within its bounds (anything else is the default), and a ring much
// smaller than what is sent at once still carries every eager message
// whole and in order: the receiver copies what no receive takes out of
// the ring, and a full ring holds the sender's frame until there is room.
func TestReceiveRingSize(t *testing.T) {
	for v, want := range map[string]uint64{"": ringKiBDefault, "7": ringKiBDefault, "8192": ringKiBDefault, "1048576": ringKiBDefault, "64": 64, "1024": 1024} {
		t.Setenv("FI_DIMMNET_RING_KB", v)
		p := openPair(t) // a 16 MiB region: at most a 4 MiB ring
		for _, e := range p.e {
			if e.ringBytes != want<<10 || e.arenaBytes() != uint64(len(e.lm))-want<<10 {
				t.Fatalf("FI_DIMMNET_RING_KB=%q: ring %d bytes, arena %d of %d, want a %d KiB ring", v, e.ringBytes, e.arenaBytes(), len(e.lm), want)
			}
		}
	}

	t.Setenv("FI_DIMMNET_RING_KB", "64")
	p := openPair(t)
	n := p.e[0].eagerMax
	const msgs = 32 // 16 times the ring at 16 KiB each
	src := make([][]byte, msgs)
	ctx := make([][32]byte, msgs)
	for k := range src {
		src[k] = bytes.Repeat([]byte{byte(k + 1)}, n)
		mu.Lock()
		ret := p.e[0].send(unsafe.Pointer(&src[k][0]), n, p.dst[0], 0, 0, unsafe.Pointer(&ctx[k]), 0)
		mu.Unlock()
		if ret != 0 {
			t.Fatalf("send %d of %d bytes: %d", k, n, ret)
		}
	}
	// No receive is posted: the receiver's progress keeps every message
	// as unexpected, and each send completes once its frame is placed.
	deadline := time.Now().Add(10 * time.Second)
	for done := 0; done < msgs; {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d sends completed", done, msgs)
		}
		p.readOne(t, 1)
		if got, ok := p.readOne(t, 0); ok {
			if got.ctx != unsafe.Pointer(&ctx[done]) {
				t.Fatalf("send completion %d: context %p, want %p", done, got.ctx, &ctx[done])
			}
			done++
		}
	}
	if h := p.e[1].d.Counter(uapi.CtrRingFullHolds) + p.e[1].d.Counter(uapi.CtrRingFullNACKs); h == 0 {
		t.Fatal("the ring never filled: the stream did not test a full ring")
	}
	dst := make([]byte, n+1)
	var rctx [32]byte
	for k := range msgs {
		clear(dst)
		mu.Lock()
		r := p.e[1].newRecv()
		*r = recvOp{buf: unsafe.Pointer(&dst[0]), size: len(dst), src: addrUnspec, ctx: unsafe.Pointer(&rctx), flags: dnDefault}
		ret := p.e[1].recv(r)
		mu.Unlock()
		if ret != 0 {
			t.Fatalf("recv %d: %d", k, ret)
		}
		got := p.take(t, 1)
		if got.len != n || !bytes.Equal(dst[:n], src[k]) {
			t.Fatalf("message %d: %d bytes, first %d, want %d bytes of %d", k, got.len, dst[0], n, k+1)
		}
	}
}

// TestSendmsgInjectCompletes: FI_INJECT as fi_sendmsg's flag only lets
// the caller reuse the buffer at once; unlike fi_inject, the send still
// completes with its context, and one to an address never inserted
// completes with an error entry instead of failing the call.
func TestSendmsgInjectCompletes(t *testing.T) {
	p := openPair(t)
	msg := []byte("reusable")
	var sctx, rctx [32]byte
	rbuf := make([]byte, 64)
	mu.Lock()
	r := p.e[1].newRecv()
	*r = recvOp{buf: unsafe.Pointer(&rbuf[0]), size: len(rbuf), src: addrUnspec, ctx: unsafe.Pointer(&rctx), flags: dnDefault}
	ret := p.e[1].recv(r)
	if ret == 0 {
		ret = p.e[0].send(unsafe.Pointer(&msg[0]), len(msg), p.dst[0], 0, 0, unsafe.Pointer(&sctx), fInject|fCompletion)
	}
	mu.Unlock()
	if ret != 0 {
		t.Fatalf("recv or sendmsg(FI_INJECT): %d", ret)
	}
	copy(msg, "scribble") // the caller's right once the call returned
	if got := p.take(t, 1); got.len != 8 || string(rbuf[:8]) != "reusable" {
		t.Fatalf("received %q (%d bytes), want %q", rbuf[:got.len], got.len, "reusable")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got, ok := p.readOne(t, 0); ok {
			if got.ctx != unsafe.Pointer(&sctx) || got.flags&fSend == 0 {
				t.Fatalf("send completion %+v, want the send's context", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sendmsg(FI_INJECT) never completed")
		}
	}
	mu.Lock()
	ret = p.e[0].send(unsafe.Pointer(&msg[0]), len(msg), 12345, 0, 0, unsafe.Pointer(&sctx), fInject)
	errs := len(p.q[0].errs)
	mu.Unlock()
	if ret != 0 || errs != 1 {
		t.Fatalf("sendmsg(FI_INJECT) to an address never inserted: returned %d with %d error entries, want 0 and 1", ret, errs)
	}
}
