package vdev_test

import (
	"testing"

	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// BenchmarkPollIdle is one Device.Poll pass with nothing to do, on the
// shared-memory link with one peer met: what a driver's wait loop pays on
// every turn between a frame's arrival and its notice.
func BenchmarkPollIdle(b *testing.B) {
	dir := b.TempDir()
	var devs []*vdev.Device
	var ports []link.Port
	for _, n := range []uint16{1, 2} {
		d, err := vdev.New(vdev.Config{Node: n})
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		p, err := link.ListenShm(dir, n, 64<<10+wire.FrameOverhead)
		if err != nil {
			b.Fatal(err)
		}
		d.AttachPort(p)
		devs = append(devs, d)
		ports = append(ports, p)
	}
	// Meet the peer, so Recv has a ring to look at.
	f := wire.AppendFrame(nil, wire.NodeMAC(2), wire.NodeMAC(1), &wire.Header{}, nil)
	if err := ports[0].Send(f); err != nil {
		b.Fatal(err)
	}
	for devs[1].Poll() {
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		devs[1].Poll()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/pass")
}
