package vdev

import (
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// An engine about to sleep does not sleep past a device another goroutine
// holds (a driver's send-only post pass, which leaves received frames to
// others): its last look cannot see the port then, and a frame that came
// before the port was parked was sent without a signal, so the engine
// looks again rather than sleeping up to 100 ms with it unread.
func TestEngineDoesNotSleepPastHeldDevice(t *testing.T) {
	hub := link.NewHub(4096, 64)
	d, err := New(Config{Node: 1, RegionSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	hp, err := hub.Attach(d.MAC())
	if err != nil {
		t.Fatal(err)
	}
	d.AttachPort(hp)
	e, err := NewEngine(d)
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(e.Stop)

	for start := time.Now(); d.r.Load64(uapi.RegDevSleep) == 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatal("hang guard: an idle engine never fell asleep")
		}
	}
	e.kick() // wake it, and hold the device as a post's pass would
	for !d.running.CompareAndSwap(false, true) {
	}
	for start := time.Now(); d.r.Load64(uapi.RegDevSleep) != 0; time.Sleep(time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			d.running.Store(false)
			t.Fatal("hang guard: the kicked engine never woke")
		}
	}
	slept := d.r.Load64(uapi.CtrSleeps.Off())
	time.Sleep(20 * time.Millisecond) // hundreds of its 50 µs spins
	after := d.r.Load64(uapi.CtrSleeps.Off())
	d.running.Store(false)
	if after != slept {
		t.Fatalf("the engine slept %d times while another goroutine held its device", after-slept)
	}
}
