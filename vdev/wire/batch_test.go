package wire

import (
	"bytes"
	"errors"
	"testing"
)

// batchPayload builds a PUSHB payload of the given sub-messages.
func batchPayload(subs []Sub, data [][]byte) []byte {
	var p []byte
	for i := range subs {
		p = AppendSub(p, &subs[i], data[i])
	}
	return p
}

func TestBatchRoundTrip(t *testing.T) {
	subs := []Sub{
		{Addr: 64, Imm: 7, MsgID: 1, Len: 8, SrcProc: 32},
		{Addr: 4096, Imm: 1 << 63, MsgID: 2, Len: 3, SrcProc: 33, Flags: FlagSignal},
		{Addr: 1<<40 + 8, MsgID: 1<<32 - 1, Len: 17, SrcProc: 34},
	}
	data := [][]byte{[]byte("abcdefgh"), []byte("xyz"), bytes.Repeat([]byte{0xAB}, 17)}
	p := batchPayload(subs, data)
	if want := SubSize(8) + SubSize(3) + SubSize(17); len(p) != want || want != 40+40+56 {
		t.Fatalf("payload %d bytes, want %d (136)", len(p), want)
	}
	h := &Header{Type: TypePushBatch, Flags: FlagFirst | FlagLast, MsgLen: 3}
	if err := CheckBatch(h, p); err != nil {
		t.Fatalf("CheckBatch: %v", err)
	}
	rest := p
	for i := range subs {
		s, d, r, err := NextSub(rest)
		if err != nil || s != subs[i] || !bytes.Equal(d, data[i]) {
			t.Fatalf("sub %d: %+v %q %v, want %+v %q", i, s, d, err, subs[i], data[i])
		}
		rest = r
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
	// The padding is zeros: a reused buffer's old bytes do not leak.
	dirty := bytes.Repeat([]byte{0xFF}, 64)[:0]
	q := AppendSub(dirty, &subs[1], data[1])
	if !bytes.Equal(q, p[SubSize(8):SubSize(8)+SubSize(3)]) {
		t.Fatalf("sub-message built in a dirty buffer differs: %x", q)
	}
}

func TestCheckBatchRejects(t *testing.T) {
	one := batchPayload([]Sub{{Addr: 64, MsgID: 1, Len: 8}}, [][]byte{make([]byte, 8)})
	two := append(append([]byte(nil), one...), one...)
	zeroLen := append([]byte(nil), one...)
	zeroLen[20] = 0
	badFlags := append([]byte(nil), one...)
	badFlags[28] = byte(FlagLast)
	reserved := append([]byte(nil), one...)
	reserved[31] = 1
	long := append([]byte(nil), one...)
	long[20] = 9 // 9 bytes padded to 16: runs past the payload
	whole := FlagFirst | FlagLast
	valid := Header{Type: TypePushBatch, Flags: whole | FlagSignal | FlagSeq | FlagAckValid, MsgLen: 1}
	if err := CheckBatch(&valid, one); err != nil {
		t.Fatalf("the cases' valid frame: CheckBatch %v", err)
	}
	for _, c := range []struct {
		why     string
		edit    func(h *Header)
		payload []byte
	}{
		{"count 0", func(h *Header) { h.MsgLen = 0 }, nil},
		{"count above MaxSubs", func(h *Header) { h.MsgLen = MaxSubs + 1 }, one},
		{"fewer sub-messages than the count", func(h *Header) { h.MsgLen = 2 }, one},
		{"bytes after the last sub-message", nil, two},
		{"a sub-header cut short", nil, one[:SubLen-1]},
		{"data cut short", nil, one[:SubLen+4]},
		{"length 0", nil, zeroLen},
		{"flags other than Signal", nil, badFlags},
		{"a reserved sub-header field set", nil, reserved},
		{"data and padding past the payload", nil, long},
		{"an offset", func(h *Header) { h.Offset = 8 }, one},
		{"an address", func(h *Header) { h.Addr = 64 }, one},
		{"an immediate", func(h *Header) { h.Imm = 1 }, one},
		{"a message id", func(h *Header) { h.MsgID = 1 }, one},
		{"a destination process", func(h *Header) { h.DstProc = 1 }, one},
		{"First missing", func(h *Header) { h.Flags &^= FlagFirst }, one},
		{"Last missing", func(h *Header) { h.Flags &^= FlagLast }, one},
		{"PktStatus", func(h *Header) { h.Flags |= FlagPktStatus }, one},
		{"DirectAMT", func(h *Header) { h.Flags |= FlagDirectAMT }, one},
		{"Tagged", func(h *Header) { h.Flags |= FlagTagged }, one},
		{"Unordered", func(h *Header) { h.Flags |= FlagUnordered }, one},
	} {
		h := valid
		if c.edit != nil {
			c.edit(&h)
		}
		if err := CheckBatch(&h, c.payload); !errors.Is(err, ErrBatch) {
			t.Errorf("%s: CheckBatch %v, want ErrBatch", c.why, err)
		}
	}
}

// FuzzCheckBatch: CheckBatch never panics, fails only with ErrBatch, and
// what it passes NextSub walks exactly, each sub-message's data inside
// the payload.
func FuzzCheckBatch(f *testing.F) {
	f.Add(uint32(1), batchPayload([]Sub{{Addr: 64, MsgID: 1, Len: 8}}, [][]byte{make([]byte, 8)}))
	f.Add(uint32(2), batchPayload([]Sub{{Len: 1}, {Len: 9, Flags: FlagSignal}}, [][]byte{{1}, make([]byte, 9)}))
	f.Add(uint32(3), []byte{})
	f.Fuzz(func(t *testing.T, count uint32, payload []byte) {
		h := &Header{Type: TypePushBatch, Flags: FlagFirst | FlagLast, MsgLen: count}
		err := CheckBatch(h, payload)
		if err != nil {
			if !errors.Is(err, ErrBatch) {
				t.Fatalf("non-sentinel error %v", err)
			}
			return
		}
		rest, total := payload, 0
		for range count {
			s, d, r, err := NextSub(rest)
			if err != nil || len(d) != int(s.Len) || s.Len == 0 {
				t.Fatalf("NextSub after a passing CheckBatch: %+v %d %v", s, len(d), err)
			}
			total += SubSize(s.Len)
			rest = r
		}
		if len(rest) != 0 || total != len(payload) {
			t.Fatalf("%d bytes left, %d walked of %d", len(rest), total, len(payload))
		}
	})
}
