//go:build dimmnet_ofi

package main

import (
	"testing"
	"time"
	"unsafe"
)

// TestRefusedRMAReported: a request the target's provider refuses comes
// back as an ack naming the error, and over the wire that ack's body is
// empty, not nil: the read, write or atomic must complete with the error
// entry (and one error on its counter), not as a success with nothing
// moved, injected or not.
func TestRefusedRMAReported(t *testing.T) {
	p := openPair(t)
	e := p.e[0]
	mem := make([]byte, 4096)
	var old uint64
	buf := make([]byte, 64)
	var ctx [3][32]byte
	rd, wr := &cntr{w: waitObj{fd: -1}}, &cntr{w: waitObj{fd: -1}}
	const key, unknown = 0x5eed, 0x5eee
	mu.Lock()
	regions[key] = region{base: unsafe.Pointer(&mem[0]), n: uint64(len(mem))}
	defer delete(regions, key)
	if e.bind(rd, fRead) != 0 || e.bind(wr, fWrite) != 0 {
		mu.Unlock()
		t.Fatal("bind the counters")
	}
	r := []int{
		e.rma(false, unsafe.Pointer(&buf[0]), 64, p.dst[0], 4096-32, key, 0, unsafe.Pointer(&ctx[0]), 0),
		e.atomic(opSum, 1, 0, unsafe.Pointer(&old), p.dst[0], 0, unknown, unsafe.Pointer(&ctx[1])),
		e.rma(true, unsafe.Pointer(&buf[0]), 8, p.dst[0], 0, unknown, 0, nil, injectCall),
	}
	mu.Unlock()
	for k, ret := range r {
		if ret != 0 {
			t.Fatalf("request %d: %d", k, ret)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		p.e[1].progress()
		e.progress()
		errs, entries := len(p.q[0].errs), len(p.q[0].entries)
		mu.Unlock()
		if errs+entries >= len(r) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d error entries and %d completions 30 s after %d refused requests", errs, entries, len(r))
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []cqEntry{
		{ctx: unsafe.Pointer(&ctx[0]), flags: fRMA | fRead, len: 64, err: C_FI_EACCES, src: notAvail},
		{ctx: unsafe.Pointer(&ctx[1]), flags: fAtomic | fRead, len: 8, err: C_FI_EKEYREJECTED, src: notAvail}, // a fetching atomic
		{flags: fRMA | fWrite, len: 8, err: C_FI_EKEYREJECTED, src: notAvail},
	}
	if len(p.q[0].entries) != 0 || len(p.q[0].errs) != len(want) {
		t.Fatalf("%d completions and %d error entries for %d refused requests", len(p.q[0].entries), len(p.q[0].errs), len(want))
	}
	for k, w := range want {
		if got := p.q[0].errs[k]; got != w {
			t.Errorf("request %d: error entry %+v, want %+v", k, got, w)
		}
	}
	if rd.val != 0 || rd.errs != 2 || wr.val != 0 || wr.errs != 1 {
		t.Errorf("read counter %d/%d errors, write counter %d/%d errors; want 0/2 and 0/1", rd.val, rd.errs, wr.val, wr.errs)
	}
}
