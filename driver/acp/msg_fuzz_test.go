package acp

import (
	"bytes"
	"testing"
)

// FuzzDecodeDelegation: a delegation message from a peer never panics
// the decoder, and whatever it accepts encodes back to the same bytes.
func FuzzDecodeDelegation(f *testing.F) {
	for _, m := range []msg{
		{typ: msgCopy, parent: 2, handle: 7, dst: 1 << 40, src: 2 << 40, a: 4096, epoch: 1},
		{typ: msgAtomic, op: aopCAS, width: 8, parent: 1, handle: 3, a: 5, b: 6, epoch: 2},
		{typ: msgPut, width: 4, dst: 9, a: 0xffffffff, epoch: 1},
		{typ: msgEnd, op: endAlign, handle: 99, epoch: 1},
		{typ: msgHello, seq: 3, layout: 0x1234, epoch: 1},
		{typ: msgSync, seq: 8, epoch: 1},
		{typ: msgRelease, seq: 8, epoch: 1},
		{typ: msgHelloOK, epoch: 3},
		{typ: msgLanded, parent: 2, handle: 11, epoch: 1},
	} {
		var b [msgSize]byte
		m.encode(b[:])
		f.Add(b[:])
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMsg(b)
		if err != nil {
			return
		}
		var out [msgSize]byte
		m.encode(out[:])
		if !bytes.Equal(out[:], b) {
			t.Fatalf("decoded %+v re-encodes to %x, not %x", m, out, b)
		}
	})
}

// TestSplitNeverMakesNullValid: GA_NULL is rank 0's segment 0, which no
// registration gets, for every rank count of the paper's tables.
func TestSplitNeverMakesNullValid(t *testing.T) {
	for _, p := range []int{1, 2, 64, 1024, 1 << 20} {
		s, err := NewSplit(p, 1, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		if r, col, seg, off := s.Parts(GANull); r != 0 || col != 0 || seg != 0 || off != 0 {
			t.Fatalf("%d ranks: GA_NULL is rank %d color %d segment %d offset %d", p, r, col, seg, off)
		}
		g := s.GA(p-1, 0, 1<<s.SegBits-1, 1<<s.OffBits-1)
		if r, _, seg, off := s.Parts(g); r != p-1 || seg != 1<<s.SegBits-1 || off != 1<<s.OffBits-1 {
			t.Fatalf("%d ranks: %#x parts back as rank %d segment %d offset %d", p, uint64(g), r, seg, off)
		}
	}
}
