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
		{typ: msgData, parent: 1, handle: 12, dst: 3 << 40, src: 0x0807060504030201, a: 11, b: 0x0b0a09, epoch: 1},
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

// TestDecodeDataStrict: a DATA message must carry 1 to 16 bytes and zeros
// past them; anything else is a peer's protocol error, never stored.
func TestDecodeDataStrict(t *testing.T) {
	enc := func(m msg) []byte {
		var b [msgSize]byte
		m.encode(b[:])
		return b[:]
	}
	good := msg{typ: msgData, parent: 1, handle: 2, dst: 3, epoch: 1}
	good.inline([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	m, err := decodeMsg(enc(good))
	var b [inlineMax]byte
	if got := m.inlined(&b); err != nil || !bytes.Equal(got, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("9 inline bytes: %v, %x", err, got)
	}
	for name, bad := range map[string]func(m *msg){
		"size 0":              func(m *msg) { m.a = 0 },
		"size 17":             func(m *msg) { m.a = 17 },
		"byte 9 past size 9":  func(m *msg) { m.b |= 0xff << 8 },
		"byte 7 past size 7":  func(m *msg) { m.a = 7 },
		"op":                  func(m *msg) { m.op = 1 },
		"width":               func(m *msg) { m.width = 8 },
		"second field past 8": func(m *msg) { m.a = 8 },
	} {
		m := good
		bad(&m)
		if _, err := decodeMsg(enc(m)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
