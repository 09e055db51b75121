package vdev

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// queuingPort is a hub port that claims a transmit queue (link.Backlogger)
// whose state the test sets: the device must not time out a packet its
// port still holds, and must time one out from when it left.
type queuingPort struct {
	link.Port
	queued   atomic.Int64
	lastSent atomic.Int64
}

func (p *queuingPort) Backlog([6]byte) (int, int64) {
	return int(p.queued.Load()), p.lastSent.Load()
}

func TestQueuedPacketIsNotTimedOut(t *testing.T) {
	hub := link.NewHub(1024+wire.FrameOverhead, 256)
	var a *Device
	var qp *queuingPort
	for _, n := range []uint16{1, 2} {
		d, err := New(Config{Node: n, RegionSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		p, _ := hub.Attach(d.MAC())
		if n == 1 {
			qp = &queuingPort{Port: p} // not Lossless: the 100 us timeout applies
			d.AttachPort(qp)
			a = d
		} else {
			d.AttachPort(p) // node 2 never runs: nothing is ever ACKed
		}
	}
	r := &ackRig{a: a, cmds: map[*Device]uint64{}}
	counts := func() (uint64, uint64) {
		return a.r.Counter(uapi.CtrTimeouts), a.r.Counter(uapi.CtrRetransmits)
	}
	qp.queued.Store(1)
	r.push(a, 8, 1)
	r.step(a)
	for range 5 { // many timeouts' worth while the port holds the packet
		time.Sleep(2 * time.Millisecond)
		r.step(a)
	}
	if to, re := counts(); to != 0 || re != 0 {
		t.Fatalf("while queued: %d timeouts, %d retransmits; want none", to, re)
	}
	qp.queued.Store(0)
	qp.lastSent.Store(monotime.Now()) // it left, and is never ACKed: lost
	time.Sleep(2 * time.Millisecond)
	r.step(a)
	if to, re := counts(); to != 1 || re != 1 {
		t.Fatalf("after it left: %d timeouts, %d retransmits; want 1 and 1", to, re)
	}
	// The resend left late (dated a second ahead, so no scheduling delay
	// here makes it look old): its timeout counts from then.
	qp.lastSent.Store(monotime.Now() + int64(time.Second))
	time.Sleep(5 * time.Millisecond) // beyond the doubled timeout
	r.step(a)
	if to, re := counts(); to != 1 || re != 1 {
		t.Fatalf("resend just left: %d timeouts, %d retransmits; want still 1 and 1", to, re)
	}
}
