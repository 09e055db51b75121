//go:build dimmnet_ofi

package main

import (
	"bytes"
	"testing"
	"time"
	"unsafe"
)

// postMultiRecv posts buf on endpoint i as fi_recvmsg(FI_MULTI_RECV)
// does, with completions asked for or not.
func (p *pair) postMultiRecv(tb testing.TB, i int, buf []byte, ctx unsafe.Pointer, completion bool) {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	r := p.e[i].newRecv()
	*r = recvOp{buf: unsafe.Pointer(&buf[0]), size: len(buf), src: addrUnspec, ctx: ctx, flags: fMultiRecv}
	if completion {
		r.flags |= fCompletion
	}
	if ret := p.e[i].recv(r); ret != 0 {
		tb.Fatalf("recv FI_MULTI_RECV: %d", ret)
	}
}

// sendMsg sends msg from endpoint i to the other and waits for its
// completion when wait is set.
func (p *pair) sendMsg(tb testing.TB, i int, msg []byte, wait bool) {
	tb.Helper()
	mu.Lock()
	ret := p.e[i].send(unsafe.Pointer(&msg[0]), len(msg), p.dst[i], 0, 0, nil, 0)
	mu.Unlock()
	if ret != 0 {
		tb.Fatalf("send of %d bytes: %d", len(msg), ret)
	}
	if wait {
		if got := p.take(tb, i); got.flags&fSend == 0 {
			tb.Fatalf("send completion flags %#x", got.flags)
		}
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13) + seed
	}
	return b
}

// TestMultiRecvReleasedUnderSelectiveCompletion: fi_msg(3) has the
// release written even when the receive's other completions are
// suppressed (FI_SELECTIVE_COMPLETION, no FI_COMPLETION): the messages
// land, packed, with no entry of their own, and the one entry is the
// release, flags FI_MULTI_RECV alone.
func TestMultiRecvReleasedUnderSelectiveCompletion(t *testing.T) {
	p := openPair(t)
	mu.Lock()
	p.e[1].rxSel = true
	p.e[1].minMultiRecv = 600
	mu.Unlock()
	buf := make([]byte, 1024)
	var ctx [32]byte
	p.postMultiRecv(t, 1, buf, unsafe.Pointer(&ctx), false)
	msgs := [][]byte{pattern(200, 1), pattern(200, 2), pattern(200, 3)} // 424 bytes left after the third: under 600
	for _, m := range msgs {
		p.sendMsg(t, 0, m, true)
	}
	got := p.take(t, 1)
	if got.ctx != unsafe.Pointer(&ctx) || got.flags != fMultiRecv || got.len != 0 || got.buf != nil {
		t.Fatalf("entry %+v, want the release: ctx %p, flags FI_MULTI_RECV alone", got, &ctx)
	}
	if want := bytes.Join(msgs, nil); !bytes.Equal(buf[:600], want) {
		t.Fatal("the three messages are not packed back to back at the buffer's start")
	}
	for range 100 {
		if e, ok := p.readOne(t, 1); ok {
			t.Fatalf("an entry after the release: %+v", e)
		}
	}
}

// TestMultiRecvReleaseWaitsForPull: a rendezvous message's place is
// taken when it matches and filled when its PULL completes, so an eager
// message after it that leaves the buffer under the minimum may complete
// first; the release is carried by whichever of them completes last,
// never before every message in the buffer has landed.
func TestMultiRecvReleaseWaitsForPull(t *testing.T) {
	p := openPair(t)
	buf := make([]byte, 64<<10)
	var ctx [32]byte
	rdv, eager := pattern(40000, 5), pattern(10000, 6) // 15,536 bytes left: under the default 16 KiB
	p.sendMsg(t, 0, rdv, false)
	p.sendMsg(t, 0, eager, true) // acknowledged: both are in the receiver's ring
	p.postMultiRecv(t, 1, buf, unsafe.Pointer(&ctx), true)
	base := unsafe.Pointer(&buf[0])
	var seen [2]bool
	for k := range 2 {
		got := p.take(t, 1)
		if got.ctx != unsafe.Pointer(&ctx) || got.err != 0 {
			t.Fatalf("entry %+v", got)
		}
		var i int
		switch got.buf {
		case base:
			i = 0
		case unsafe.Add(base, len(rdv)):
			i = 1
		default:
			t.Fatalf("completion at %p, not a message's place (buffer at %p)", got.buf, base)
		}
		if seen[i] || got.len != [2]int{len(rdv), len(eager)}[i] {
			t.Fatalf("completion %+v: twice, or the wrong length", got)
		}
		seen[i] = true
		want := fRecv | fMsg
		if k == 1 {
			want |= fMultiRecv // the last to complete releases the buffer
		}
		if got.flags != want {
			t.Fatalf("completion %d (message %d) flags %#x, want %#x", k, i, got.flags, want)
		}
	}
	if !bytes.Equal(buf[:len(rdv)], rdv) || !bytes.Equal(buf[len(rdv):len(rdv)+len(eager)], eager) {
		t.Fatal("the buffer does not hold both messages back to back")
	}
	p.take(t, 0) // the rendezvous send completed on its FIN
}

// A cancel of a buffer that took messages whose completions are still
// unread releases it behind them: error entries are read first, so a
// release carried by the FI_ECANCELED entry would hand the buffer back
// while two completions still point into it.
func TestMultiRecvCancelReleasesAfterData(t *testing.T) {
	p := openPair(t)
	buf := make([]byte, 64<<10)
	var ctx [32]byte
	p.postMultiRecv(t, 1, buf, unsafe.Pointer(&ctx), true)
	p.sendMsg(t, 0, pattern(100, 1), true)
	p.sendMsg(t, 0, pattern(100, 2), true)
	for dl := time.Now().Add(10 * time.Second); ; {
		mu.Lock()
		p.e[1].progress()
		n := len(p.q[1].entries) - p.q[1].head
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(dl) {
			t.Fatal("the two messages did not land")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if r := p.e[1].cancel(unsafe.Pointer(&ctx)); r != 0 {
		t.Fatalf("cancel: %d", r)
	}
	if len(p.q[1].errs) != 1 || p.q[1].errs[0].err != errCancel || p.q[1].errs[0].flags&fMultiRecv != 0 {
		t.Fatalf("error entries %+v, want one FI_ECANCELED without FI_MULTI_RECV", p.q[1].errs)
	}
	data := p.q[1].entries[p.q[1].head:]
	if len(data) != 3 || data[0].flags&fMultiRecv != 0 || data[1].flags&fMultiRecv != 0 || data[2].flags != fMultiRecv {
		t.Fatalf("entries %+v, want the two messages' completions, then the release alone", data)
	}
}

// Closing an endpoint while a PULL goes into a multi-receive buffer
// releases the buffer: no PULL completes after the close, so the
// completion that was to carry the release never comes.
func TestMultiRecvCloseReleasesDuringPull(t *testing.T) {
	for try := 0; try < 20; try++ {
		p := openPair(t)
		buf := make([]byte, 64<<10)
		var ctx [32]byte
		p.postMultiRecv(t, 1, buf, unsafe.Pointer(&ctx), true)
		p.sendMsg(t, 0, pattern(40000, 3), false)
		started := false
		for dl := time.Now().Add(5 * time.Second); !started && time.Now().Before(dl); {
			mu.Lock()
			p.e[1].progress()
			if len(p.e[1].pulls) > 0 || len(p.e[1].waiting) > 0 {
				started = true
				p.e[1].close()
			}
			mu.Unlock()
		}
		if !started {
			continue // the PULL completed within one progress: try again
		}
		mu.Lock()
		released := false
		for _, e := range p.q[1].errs {
			released = released || e.flags&fMultiRecv != 0
		}
		for _, e := range p.q[1].entries[p.q[1].head:] {
			released = released || e.flags&fMultiRecv != 0
		}
		mu.Unlock()
		if !released {
			t.Fatal("closed with a PULL going into the buffer: no FI_MULTI_RECV release written")
		}
		return
	}
	t.Skip("no try caught a PULL in flight")
}
