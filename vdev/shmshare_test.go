package vdev_test

// The shared-memory link's one-copy path end to end: PUSHes whose payload
// the receiver copies straight out of the sender's link memory arrive
// intact, many in flight, and exactly once over a lossy link.

import (
	"bytes"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// referrer is the shared-memory port's count of frames sent by reference.
type referrer interface{ Referred() uint64 }

// bigDevices builds nodes 1 and 2 with 64 MiB regions: room for a window
// of 1 MiB messages on both sides.
func bigDevices(t *testing.T) []*vdev.Device {
	t.Helper()
	var devs []*vdev.Device
	for _, n := range []uint16{1, 2} {
		d, err := vdev.New(vdev.Config{Node: n, RegionSize: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		devs = append(devs, d)
	}
	return devs
}

// pushBatch posts count PUSHes of size bytes from node 1 to node 2 without
// waiting (each from its own place, with its own bytes, to its own
// place), then takes every status on both sides and checks each message
// arrived once, whole, where it was sent. It returns the statuses the
// receiver saw.
func pushBatch(t *testing.T, p *pair, size, count int, salt byte) {
	t.Helper()
	a, b := p.drv[0], p.drv[1]
	stride := (size+4095)&^4095 + 72 // each message starts at another place in a page
	remoteBase := 32 << 20
	if count*stride > remoteBase || remoteBase+count*stride > len(b.LinkMem()) {
		t.Fatalf("%d messages of %d bytes do not fit", count, size)
	}
	want := make([][]byte, count)
	for i := range count {
		m := make([]byte, size)
		for j := range m {
			m[j] = byte(j*31+j>>11) ^ byte(i) ^ salt
		}
		want[i] = m
		a.CopyIn(uint64(i*stride), m)
		if _, err := a.Push(2, uint64(i*stride), uint64(remoteBase+i*stride), uint32(size), uapi.FlagSignal, uint64(i)); err != nil {
			t.Fatalf("post %d of %d bytes: %v", i, size, err)
		}
	}
	got := make([]int, count)
	for range count {
		s, err := b.Wait(e2eWait)
		if err != nil {
			t.Fatalf("%d-byte messages: receiver: %v", size, err)
		}
		i := (int(s.Addr) - remoteBase) / stride
		if s.Type != uapi.StPUSH || s.Length != uint32(size) || s.SrcNode != 1 || i < 0 || i >= count || int(s.Addr) != remoteBase+i*stride {
			t.Fatalf("%d-byte messages: receiver status %v", size, s)
		}
		got[i]++
	}
	for i, n := range got {
		if n != 1 {
			t.Fatalf("%d-byte message %d arrived %d times", size, i, n)
		}
		if at := remoteBase + i*stride; !bytes.Equal(b.LinkMem()[at:at+size], want[i]) {
			t.Fatalf("%d-byte message %d arrived with different bytes", size, i)
		}
	}
	for range count {
		if s, err := a.Wait(e2eWait); err != nil || s.Type != uapi.StDone {
			t.Fatalf("%d-byte messages: sender completion %v, %v", size, s, err)
		}
	}
}

// noMore checks that no status shows up on either side for a while: a
// duplicate would.
func (p *pair) noMore(t *testing.T) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	for i, d := range p.drv {
		if s, ok := d.Poll(); ok {
			t.Fatalf("node %d: a status after all were taken: %v", i+1, s)
		}
	}
}

// Messages around the size from which payloads cross by reference, and
// of one and several packets, many in flight, arrive intact and once;
// from ShmRefMin on the receiver copied them out of the sender's link
// memory (the port counts frames sent by reference).
func TestShmOneCopyPushesArriveIntact(t *testing.T) {
	devs := bigDevices(t)
	ports := shmPorts(t, devs, 64<<10+wire.FrameOverhead)
	p := start(t, devs, ports)
	ref := ports[0].(referrer)
	pushBatch(t, p, 8, 4, 0) // the ports have met and mapped each other's memory by its end
	for _, size := range []int{8, link.ShmRefMin - 8, link.ShmRefMin - 1, link.ShmRefMin, link.ShmRefMin + 1, 5000,
		64<<10 - 8, 64 << 10, 64<<10 + 8, 1 << 20} {
		before := ref.Referred()
		count := 48
		if size > 64<<10 {
			count = 12
		}
		pushBatch(t, p, size, count, byte(size))
		referred := ref.Referred() - before
		switch {
		case size < link.ShmRefMin && referred != 0:
			t.Fatalf("%d-byte messages: %d frames sent by reference, below the threshold", size, referred)
		case size >= link.ShmRefMin && referred == 0:
			t.Fatalf("%d-byte messages: none sent by reference", size)
		}
	}
	p.noMore(t)
	if n := p.drv[1].Counter(uapi.CtrLinkRxDropped); n != 0 {
		t.Fatalf("LINK_RX_DROPPED %d", n)
	}
}

// Over a lossy shared-memory link (frames and ACKs dropped, duplicated,
// reordered and corrupted on receive) messages sent by reference still
// arrive exactly once and intact: a lost referring frame is resent
// carried, and the payload it referred to stayed put until its ACK.
func TestShmOneCopyLossyExactlyOnce(t *testing.T) {
	devs := bigDevices(t)
	shm := shmPorts(t, devs, 64<<10+wire.FrameOverhead)
	var ports []link.Port
	for i, s := range shm {
		ports = append(ports, impair.Wrap(s, impair.Config{Loss: 0.05, Dup: 0.02, Reorder: 0.02, Corrupt: 0.01, Seed: int64(11 + i)}))
	}
	p := start(t, devs, ports)
	pushBatch(t, p, 8, 4, 0)
	for round, size := range []int{64 << 10, link.ShmRefMin, 1 << 20, 200 << 10} {
		pushBatch(t, p, size, 12, byte(round))
	}
	p.noMore(t)
	a := p.drv[0]
	if shm[0].(referrer).Referred() == 0 {
		t.Fatal("no frame was sent by reference")
	}
	if a.Counter(uapi.CtrRetransmits) == 0 {
		t.Fatal("no retransmission: the link lost nothing, the test proves nothing")
	}
	t.Logf("sent by reference %d, retransmits %d, CRC failures %d, duplicates %d", shm[0].(referrer).Referred(),
		a.Counter(uapi.CtrRetransmits), p.drv[1].Counter(uapi.CtrCRCFail), p.drv[1].Counter(uapi.CtrDuplicates))
}
