package vdev

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/transport"
)

// takenBeside is a receiver's port whose every frame taken runs each
// first: the sender's device passes and the clock moves while the
// receiver's pass is still taking the stream, as on two cores.
type takenBeside struct {
	link.Port
	each func()
}

func (p *takenBeside) Recv() []byte {
	f := p.Port.Recv()
	if f != nil {
		p.each()
	}
	return f
}

// Lossless keeps the hub's word: the medium is the same.
func (p *takenBeside) Lossless() bool { return true }

// A receiver's pass takes frames until its port is empty, and a sender
// that keeps the port filled keeps that pass going. The ACKs of a stream
// (every AckPolicy.Every packets) must leave as the frames are taken, not
// once the pass ends: under Open MPI's 1 MiB bandwidth phase on the
// shared-memory link a pass that placed 64 KiB packets at 50-450 µs each
// (first touches of link memory on a loaded host) took a whole window,
// 5-30 ms, and its sender's 5 ms timer ran out on packets that had all
// arrived: 9-12 TIMEOUTS and about 150 duplicate resends per run. Here
// each frame takes 100 µs while the sender runs beside: a window of 64
// takes 6.4 ms, past the lossless floor (transport.LosslessRTO).
func TestStreamAckedWhileReceiverTakesIt(t *testing.T) {
	pp := newPostPair(t, 64)
	pp.b.AttachPort(&takenBeside{Port: pp.b.port, each: func() {
		pp.now += 100_000
		pp.full(pp.a)
	}})
	for _, d := range []*Device{pp.a, pp.b} {
		if !d.tcfg.Lossless || d.tcfg.RTOFloor != transport.LosslessRTO {
			t.Fatalf("node %d: lossless %v, floor %d: want the lossless medium's timers", d.node, d.tcfg.Lossless, d.tcfg.RTOFloor)
		}
	}
	const packets = 192
	n := packets * pp.a.maxPayload
	if uint64(n) > pp.a.g.LinkMemSize {
		t.Fatalf("a %d-byte message does not fit link memory (%d)", n, pp.a.g.LinkMemSize)
	}
	pp.push(pp.a, n)
	for range 64 {
		pp.full(pp.a) // the first window leaves (a pass sends a share of it)
	}
	if got := pp.a.peers[2].tx.Unacked(); got != 64 {
		t.Fatalf("%d packets in flight after the first pass, want the window (64)", got)
	}
	for range 16 {
		if counter(pp.b, uapi.CtrRxPkts) >= packets {
			break
		}
		pp.full(pp.b) // takes what the sender keeps sending
		pp.now += 10_000
		pp.full(pp.a)
	}
	if got := counter(pp.b, uapi.CtrRxPkts); got < packets {
		t.Fatalf("receiver took %d packets, want %d", got, packets)
	}
	for _, c := range []uapi.Counter{uapi.CtrTimeouts, uapi.CtrRetransmits, uapi.CtrRetxTimeout} {
		if got := counter(pp.a, c); got != 0 {
			t.Errorf("sender %v = %d: its timer ran out while the receiver was taking the stream", c, got)
		}
	}
	if got := counter(pp.b, uapi.CtrDuplicates); got != 0 {
		t.Errorf("receiver saw %d duplicates of packets it had taken", got)
	}
	if got := counter(pp.a, uapi.CtrAcksRx); got < packets/uint64(pp.b.ackPolicy.Every)/2 {
		t.Errorf("sender got %d ACKs for %d packets: the stream was acknowledged only after the passes that took it", got, packets)
	}
}

// A driver that drives its device and then makes no pass (its thread off
// its core on a loaded host, or in a long call of its library: copying a
// 1 MiB rendezvous body into link memory took 4.5 ms per call under Open
// MPI) leaves the device to nobody: the engine stands down for a driven
// device, and its watch, which wakes every watchNs while a driver
// drives, looked only at undriven ones. A peer's packet waited for the
// driver's return, and the ACK the driver's passes held for a reply
// (transport.AckHoldPasses) with it: past the sender's 5 ms timer. The
// watch runs the pass such a driver does not.
func TestWatchServesDeviceWhoseDriverIsAway(t *testing.T) {
	devs := hubDevices(t, []uint16{1, 2}, nil)
	a, b := devs[0], devs[1]
	for _, d := range devs {
		e, err := NewEngine(d)
		if err != nil {
			t.Fatal(err)
		}
		e.Start()
		t.Cleanup(e.Stop)
	}
	b.Drive(true) // and never a pass: its driver is away
	t.Cleanup(func() { b.Drive(false) })
	a.Drive(true) // the test's thread drives the sender
	t.Cleanup(func() { a.Drive(false) })
	post(a, 0, uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, SrcProc: uapi.GPID(1, 0), Length: 8, Flags: uapi.FlagSignal, Cookie: 7})
	waitUntil(t, "the PUSH's status", func() bool {
		a.Poll()
		return counter(a, uapi.CtrStatusWritten) > 0
	})
	if s := a.r.ReadStatus(a.g.StatqOff); s.Type != uapi.StDone || s.Cookie != 7 {
		t.Fatalf("the sender's status is %v, want the PUSH's DONE: the receiver's device was left to nobody while its driver was away", s)
	}
	if got := counter(b, uapi.CtrRxPkts); got != 1 {
		t.Fatalf("receiver took %d packets, want 1", got)
	}
}

// noisyPort hands its device a foreign frame on every other receive: an
// engine serving it is never idle, and never sleeps.
type noisyPort struct {
	link.Port
	n atomic.Uint64
}

func (p *noisyPort) Recv() []byte {
	if p.n.Add(1)%2 == 0 {
		return nil
	}
	return make([]byte, 20)
}

func (p *noisyPort) Lossless() bool { return true }

// The watch also looks when the engine never sleeps: another device it
// serves keeps it busy, and the driven device whose driver is away
// still gets its passes.
func TestWatchServesAwayDeviceBesideBusyOne(t *testing.T) {
	devs := hubDevices(t, []uint16{1, 2, 3}, func(n uint16, p link.Port) link.Port {
		if n == 3 {
			return &noisyPort{Port: p}
		}
		return p
	})
	a, b, c := devs[0], devs[1], devs[2]
	ea, err := NewEngine(a)
	if err != nil {
		t.Fatal(err)
	}
	ebc, err := NewEngine(b, c) // b beside a busy device
	if err != nil {
		t.Fatal(err)
	}
	ea.Start()
	t.Cleanup(ea.Stop)
	ebc.Start()
	t.Cleanup(ebc.Stop)
	b.Drive(true) // its driver is away
	t.Cleanup(func() { b.Drive(false) })
	a.Drive(true)
	t.Cleanup(func() { a.Drive(false) })
	post(a, 0, uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, SrcProc: uapi.GPID(1, 0), Length: 8, Flags: uapi.FlagSignal, Cookie: 7})
	for start := time.Now(); counter(a, uapi.CtrStatusWritten) == 0; {
		a.Poll()
		if time.Since(start) > 10*time.Second {
			t.Fatalf("no DONE after 10 s: b took %d packets, a %d timeouts, c %d foreign frames; the watch never served b",
				counter(b, uapi.CtrRxPkts), counter(a, uapi.CtrTimeouts), counter(c, uapi.CtrRxForeign))
		}
	}
	if s := a.r.ReadStatus(a.g.StatqOff); s.Type != uapi.StDone || s.Cookie != 7 {
		t.Fatalf("a's status %v, want the PUSH's DONE", s)
	}
}

// hubDevices makes a device for each node on one in-memory hub, its port
// the one wrap makes of the hub's (wrap nil: the hub's), closed when the
// test ends.
func hubDevices(t *testing.T, nodes []uint16, wrap func(n uint16, p link.Port) link.Port) []*Device {
	t.Helper()
	hub := link.NewHub(4096, 64)
	devs := make([]*Device, len(nodes))
	for i, n := range nodes {
		d, err := New(Config{Node: n, RegionSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		p, err := hub.Attach(d.MAC())
		if err != nil {
			t.Fatal(err)
		}
		if wrap != nil {
			p = wrap(n, p)
		}
		d.AttachPort(p)
		devs[i] = d
	}
	return devs
}
