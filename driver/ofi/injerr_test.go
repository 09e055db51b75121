//go:build dimmnet_ofi

package main

import (
	"testing"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/uapi"
)

// TestFailedInjectReported: injects to a peer whose endpoint closed fail
// in the sender's device (UNREACHABLE), and each comes back as one error
// entry with no context, the op's flags and length, the error and the
// device's errno, tag and data 0, whichever way the inject went: posted
// unsignalled (no counter bound), signalled for a bound counter (which
// counts each as an error), or as a rendezvous offer (a body over the
// eager limit, which only a link with a small MTU gives an inject: the
// limit is lowered here). Every staging and body the failed injects held
// is given back to the arena.
func TestFailedInjectReported(t *testing.T) {
	type inj struct {
		n     int
		tag   uint64
		data  uint64
		flags uint64 // the call's, beside injectCall
		want  uint64 // the entry's
	}
	for _, way := range []string{"unsignalled", "counter", "rendezvous"} {
		t.Run(way, func(t *testing.T) {
			p := openPair(t)
			e := p.e[0]
			injs := []inj{
				{n: 8, want: fSend | fMsg},
				{n: 100, tag: 7, flags: fTagged, want: fSend | fTagged},
				{n: 16, data: 0xdada, flags: fCQData, want: fSend | fMsg},
				{n: injectMax, tag: 9, data: 0xdada, flags: fTagged | fCQData, want: fSend | fTagged},
			}
			var c *cntr
			mu.Lock()
			switch way {
			case "counter":
				c = &cntr{w: waitObj{fd: -1}}
				if r := e.bind(c, fSend); r != 0 {
					mu.Unlock()
					t.Fatalf("bind a counter: %d", r)
				}
			case "rendezvous":
				e.eagerMax = 1024
				injs = []inj{
					{n: 2048, want: fSend | fMsg},
					{n: injectMax, tag: 9, data: 0xdada, flags: fTagged | fCQData, want: fSend | fTagged},
				}
			}
			before := e.arena.inUse
			p.e[1].close() // its device is gone: every command to it fails
			buf := make([]byte, injectMax)
			for k, in := range injs {
				if r := e.send(unsafe.Pointer(&buf[0]), in.n, p.dst[0], in.tag, in.data, nil, injectCall|in.flags); r != 0 {
					mu.Unlock()
					t.Fatalf("inject %d of %d bytes: %d", k, in.n, r)
				}
			}
			mu.Unlock()
			deadline := time.Now().Add(30 * time.Second)
			for {
				mu.Lock()
				e.progress()
				got := len(p.q[0].errs)
				mu.Unlock()
				if got >= len(injs) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d error entries 30 s after %d injects to a closed peer failed", got, len(injs))
				}
				time.Sleep(time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(p.q[0].errs) != len(injs) || len(p.q[0].entries) != 0 {
				t.Fatalf("%d error entries and %d completions for %d failed injects", len(p.q[0].errs), len(p.q[0].entries), len(injs))
			}
			for k, in := range injs {
				got := p.q[0].errs[k]
				want := cqEntry{flags: in.want, len: in.n, err: errUnreach, provErr: int(uapi.EUnreachable), src: notAvail}
				if got != want {
					t.Errorf("inject %d (%d bytes, flags %#x): error entry %+v, want %+v", k, in.n, in.flags, got, want)
				}
			}
			if c != nil && (c.errs != uint64(len(injs)) || c.val != 0) {
				t.Errorf("counter: %d completions, %d errors; want 0 and %d", c.val, c.errs, len(injs))
			}
			if e.inj.held != 0 || e.arena.inUse != before || len(e.ops) != 0 || len(e.rdv) != 0 {
				t.Errorf("after the failures: %d inject stagings held, arena %d bytes in use (%d before), %d ops, %d rendezvous sends kept",
					e.inj.held, e.arena.inUse, before, len(e.ops), len(e.rdv))
			}
		})
	}
}
