package vdev_test

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// scribbler lends payloads in place as the shared-memory port does, and
// overwrites what it lent as soon as it is given back, as a sender
// reusing the slot would: a device that reads a payload after Done sees
// garbage.
type scribbler struct {
	link.Port
	in      link.InPlaceReceiver
	scratch []byte
	lent    []byte
}

func (s *scribbler) RecvInPlace(n int) (head, rest []byte) {
	head, rest = s.in.RecvInPlace(n)
	s.lent = append(s.scratch[:0], rest...)
	return head, s.lent
}

func (s *scribbler) Done() {
	s.in.Done()
	for i := range s.lent {
		s.lent[i] = 0xee
	}
	s.lent = nil
}

// On a port that lends payloads in place (the shared-memory link), a
// frame held because the receiver's IPUSH ring is full keeps its payload
// after the memory it arrived in is given back: six 1 KiB messages into a
// 4 KiB ring not drained, traffic the other way meanwhile, then the ring
// freed; every message arrives intact and in order.
func TestShmInPlaceHold(t *testing.T) {
	devs := newDevices(t)
	ports := shmPorts(t, devs, 9000)
	for _, p := range ports {
		if _, ok := p.(link.InPlaceReceiver); !ok {
			t.Fatal("the shared-memory port does not lend payloads in place")
		}
	}
	ports[1] = &scribbler{Port: ports[1], in: ports[1].(link.InPlaceReceiver), scratch: make([]byte, 0, 9000)}
	pr := start(t, devs, ports)
	a, b := pr.drv[0], pr.drv[1]
	b.SetRingFullMode(uapi.RingFullHold)
	ring, err := b.SetRing(0, 1<<20, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	var msgs [][]byte
	for i := 0; i < 6; i++ {
		data := bytes.Repeat([]byte{byte(40 + i), byte(i)}, 512)
		a.CopyIn(uint64(i)<<12, data)
		msgs = append(msgs, data)
		if _, err := a.Post(&uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagSignal, DstNode: 2, DstProc: uapi.GPID(2, 0),
			SrcProc: a.GPID(), Length: 1024, LocalAddr: uint64(i) << 12, Imm: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	next := func(want uapi.StatusType) uapi.Status {
		t.Helper()
		for {
			s, err := b.Wait(e2eWait)
			if err != nil {
				t.Fatal(err)
			}
			if s.Type == want {
				return s
			}
			if s.Type != uapi.StRingFull {
				t.Fatalf("status %v, want type %v", s, want)
			}
		}
	}
	var end uint64
	for i := 0; i < 4; i++ {
		s := next(uapi.StIPUSHMsg)
		if s.Imm != uint64(i) || !bytes.Equal(ring.Data(&s), msgs[i]) {
			t.Fatalf("message %d: status %v", i, s)
		}
		end = s.End
	}
	// The fifth is held. Traffic the other way goes through the rings
	// meanwhile, and the sender retransmits the held packet into new slots.
	for i := 0; i < 300; i++ {
		if _, err := b.Push(1, 0, 0, 8, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ring.ReleaseTo(end); err != nil {
		t.Fatal(err)
	}
	for i := 4; i < 6; i++ {
		s := next(uapi.StIPUSHMsg)
		if s.Imm != uint64(i) || !bytes.Equal(ring.Data(&s), msgs[i]) {
			t.Fatalf("message %d after the hold: status %v, intact %v", i, s, bytes.Equal(ring.Data(&s), msgs[i]))
		}
		if err := ring.ReleaseTo(s.End); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.Counter(uapi.CtrHolds); n != 1 {
		t.Errorf("HOLDS = %d, want 1", n)
	}
}
