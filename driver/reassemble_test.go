package driver

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
)

// Packets of two messages from two senders, interleaved and with one
// message's packets out of offset order, come back whole.
func TestReassemblerInterleaved(t *testing.T) {
	m1 := bytes.Repeat([]byte("ab"), 600) // 1200 B
	m2 := bytes.Repeat([]byte("xyz"), 300)
	type pkt struct {
		proc uint32
		off  int
		data []byte
		last bool
	}
	pkts := []pkt{
		{1, 0, m1[:500], false},
		{2, 500, m2[500:], true}, // last packet before the first one
		{1, 500, m1[500:1000], false},
		{2, 0, m2[:500], false},
		{1, 1000, m1[1000:], true},
	}
	ra := NewReassembler()
	var got []*Message
	for _, p := range pkts {
		s := uapi.Status{Type: uapi.StIPUSHPkt, SrcNode: 3, SrcProc: p.proc, MsgID: 9, Offset: uint32(p.off), Length: uint32(len(p.data))}
		if p.last {
			s.Flags = uapi.StFlagLast
		}
		if m, done := ra.Add(&s, p.data); done {
			got = append(got, m)
		}
	}
	if len(got) != 2 || ra.Pending() != 0 {
		t.Fatalf("%d messages done, %d pending", len(got), ra.Pending())
	}
	for _, m := range got {
		want := m1
		if m.SrcProc == 2 {
			want = m2
		}
		if !bytes.Equal(m.Data, want) {
			t.Fatalf("message from %d corrupted", m.SrcProc)
		}
	}
}
