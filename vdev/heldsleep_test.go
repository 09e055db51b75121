package vdev

import (
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
)

// An engine about to sleep does not sleep past a device another goroutine
// holds (a driver's send-only post pass, which leaves received frames to
// others): its last look cannot see the port then, and a frame that came
// before the port was parked was sent without a signal, so the engine
// looks again rather than sleeping up to 100 ms with it unread.
func TestEngineDoesNotSleepPastHeldDevice(t *testing.T) {
	d, e := engineOnHub(t, nil)
	asleep := func() bool { return d.r.Load64(uapi.RegDevSleep) != 0 }
	waitUntil(t, "an idle engine asleep", asleep)
	e.kick() // wake it, and hold the device as a post's pass would
	for !d.running.CompareAndSwap(false, true) {
	}
	held := true
	defer func() { // a failed wait below must not leave the device held
		if held {
			d.running.Store(false)
		}
	}()
	waitUntil(t, "the kicked engine awake", func() bool { return !asleep() })
	slept := d.r.Load64(uapi.CtrSleeps.Off())
	time.Sleep(20 * time.Millisecond) // hundreds of its 50 µs spins
	after := d.r.Load64(uapi.CtrSleeps.Off())
	held = false
	d.running.Store(false)
	if after != slept {
		t.Fatalf("the engine slept %d times while another goroutine held its device", after-slept)
	}
}
