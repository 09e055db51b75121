package pingpong

import (
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/drivertest"
	"github.com/dimmnet/dimmnet/vdev"
)

// A ping-pong whose every ping finds the initiator's doorbell dead
// (driver.ErrNotRung) still runs: each ping is posted and leaves at the
// device's next look, every message of both directions arrives with the
// bytes its sender wrote for it, once, and the records count the pings
// as NotRung. The initiator took the error for a failure and stopped
// the run with its ping already on its way.
func TestPingPongNotRungStillVerifies(t *testing.T) {
	const warm, iters = 2, 6
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	bell := drivertest.NewBell(driver.InProcessDevice(l.Devices[0]))
	var s [2]*Side
	for i, att := range []driver.Attachment{bell, driver.InProcessDevice(l.Devices[1])} {
		d, err := driver.Open(att)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		s[i] = &Side{D: d, Peer: l.Devices[1-i].Node(), Verify: true}
	}
	a, b := s[0], s[1]
	if err := Setup(a, b, 4096); err != nil {
		t.Fatal(err)
	}
	// The initiator writes each ping just before it posts it: wait there
	// for its device to sleep, so the post rings (and finds the doorbell
	// dead).
	var asleepErr error
	a.tamper = func(string, int, []byte) {
		if err := drivertest.WaitAsleep(a.D, 10*time.Second); err != nil && asleepErr == nil {
			asleepErr = err
		}
	}
	bell.Kill(true)
	notRung := 0
	for _, c := range combos {
		r, err := Run(a, b, c[0], c[1], 4096, warm, iters)
		if err != nil {
			t.Fatalf("%s %s: %v", c[0], c[1], err)
		}
		if asleepErr != nil {
			t.Fatal(asleepErr)
		}
		// Each ping's post finds the device asleep, unless a frame or
		// its timer woke it just then: nearly all of them meet the dead
		// doorbell.
		if r.NotRung == 0 {
			t.Fatalf("%s %s: no ping posted not rung (%d failed kicks)", c[0], c[1], bell.Failed())
		}
		notRung += r.NotRung
		if r.Verified != 2*(warm+iters) {
			t.Fatalf("%s %s: %d messages verified, want %d", c[0], c[1], r.Verified, 2*(warm+iters))
		}
	}
	time.Sleep(200 * time.Millisecond) // two of the device's looks: a ping posted twice would be here
	for _, x := range s {
		if st, ok := x.D.Poll(); ok {
			t.Fatalf("node %d: a status no message owes: %v", x.D.Node(), st)
		}
	}
	if a.NotRung != notRung || uint64(notRung) > bell.Failed() {
		t.Fatalf("initiator counted %d pings not rung, its records %d, the doorbell failed %d times", a.NotRung, notRung, bell.Failed())
	}
	t.Logf("%d of %d pings posted not rung", notRung, len(combos)*(warm+iters))
}
