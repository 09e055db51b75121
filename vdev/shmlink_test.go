package vdev_test

import (
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// shmPorts puts each device on the shared-memory medium of one fresh
// rendezvous directory (its ports close with their devices).
func shmPorts(t *testing.T, devs []*vdev.Device, mtu int) []link.Port {
	t.Helper()
	dir := t.TempDir()
	var ports []link.Port
	for _, d := range devs {
		p, err := link.ListenShm(dir, d.Node(), mtu)
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
	}
	return ports
}

// Two devices on the shared-memory medium (the process boundary is tested
// in tests/; here both ends share one process and one engine) move 1 MiB
// intact, ping-pong, and resume after the engine slept.
func TestE2EShm(t *testing.T) {
	devs := newDevices(t)
	p := start(t, devs, shmPorts(t, devs, 64<<10+wire.FrameOverhead))
	p.push1MiB(t)
	t.Logf("8-byte round trip over shm: %v", p.roundTrip(t, 2000))
	p.wakeups(t)
}

// A peer whose port leaves the medium (its process exited) fails the
// commands sent to it at once, with UNREACHABLE, long before its
// retransmission timeouts (30 of at least 5 ms) would.
func TestShmPeerLeavesFailsCommandsAtOnce(t *testing.T) {
	devs := newDevices(t)
	ports := shmPorts(t, devs, 9000)
	// An engine each, as two processes have: node 2's stops, then its port
	// closes, as when its process exits.
	var engines []*vdev.Engine
	for i, d := range devs {
		d.AttachPort(ports[i])
		e, err := vdev.NewEngine(d)
		if err != nil {
			t.Fatal(err)
		}
		e.Start()
		t.Cleanup(e.Stop)
		engines = append(engines, e)
	}
	p := &pair{devs: devs}
	for _, d := range devs {
		drv, err := driver.Open(driver.InProcessDevice(d))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { drv.Close() })
		p.drv = append(p.drv, drv)
	}
	p.roundTrip(t, 10)
	engines[1].Stop()
	ports[1].Close() // node 2 leaves
	a := p.drv[0]
	timeouts := a.Counter(uapi.CtrTimeouts)
	if _, err := a.Push(2, 0, 0, 4<<20, 0, 7); err != nil {
		t.Fatal(err)
	}
	s, err := a.Wait(e2eWait)
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != uapi.StError || s.Err != uapi.EUnreachable {
		t.Fatalf("PUSH to a departed peer: status %v, want ERROR UNREACHABLE", s)
	}
	if n := a.Counter(uapi.CtrTimeouts) - timeouts; n >= 30 {
		t.Fatalf("the departure was found by %d timeouts, not by the link", n)
	}
}
