package vdev

// The engine: when it may sleep, and which ports it parks.

import (
	"sync/atomic"
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
	d, e := engineOnHub(t, nil)
	asleep := func() bool { return d.r.Load64(uapi.RegDevSleep) != 0 }
	waitUntil(t, "an idle engine asleep", asleep)
	e.kick() // wake it, and hold the device as a post's pass would
	for !d.running.acquire() {
	}
	held := true
	defer func() { // a failed wait below must not leave the device held
		if held {
			d.running.release()
		}
	}()
	waitUntil(t, "the kicked engine awake", func() bool { return !asleep() })
	slept := d.r.Load64(uapi.CtrSleeps.Off())
	time.Sleep(20 * time.Millisecond) // hundreds of its 50 µs spins
	after := d.r.Load64(uapi.CtrSleeps.Off())
	held = false
	d.running.release()
	if after != slept {
		t.Fatalf("the engine slept %d times while another goroutine held its device", after-slept)
	}
}

// parkPort records what the device last told its port about parking.
type parkPort struct {
	link.Port
	parked atomic.Bool
}

func (p *parkPort) Park(sleeping bool) { p.parked.Store(sleeping) }

// A port is parked (peers in other processes signal it) only while its
// engine sleeps and no driver's thread runs the device: a driving thread
// polls the port itself, and each signal would cost a sender a system
// call. A driver that leaves a sleeping engine parks the port for it.
//
// The port says whether a frame waits (parkPeekPort): over one that
// cannot, the engine never sleeps, and the first wait below passed only
// when its 1 ms looks happened to fall in an idle pass's moment between
// parking and finding it could not sleep (it failed 2 runs in 12).
func TestDrivenDevicePortNotParked(t *testing.T) {
	var port *parkPeekPort
	d, _ := engineOnHub(t, func(p link.Port) link.Port {
		port = &parkPeekPort{parkPort: parkPort{Port: p}, peek: p.(link.Peeker)}
		return port
	})
	asleep := func() bool { return d.r.Load64(uapi.RegDevSleep) != 0 }

	waitUntil(t, "an idle engine asleep with its port parked", func() bool { return asleep() && port.parked.Load() })

	d.Drive(true)
	if port.parked.Load() {
		t.Fatal("a driven device's port stays parked: senders signal a device its driver polls")
	}
	// The engine wakes on its watch while the device is driven and falls
	// asleep again: it must leave the driven device's port unparked.
	slept := d.r.Load64(uapi.CtrSleeps.Off())
	waitUntil(t, "the engine asleep again while the device is driven", func() bool {
		return asleep() && d.r.Load64(uapi.CtrSleeps.Off()) > slept
	})
	if port.parked.Load() {
		t.Fatal("the engine parked the port of a device a driver runs")
	}

	d.Drive(false)
	if asleep() && !port.parked.Load() {
		t.Fatal("the driver left a sleeping engine's port unparked: nobody would wake for a frame")
	}
}

// engineOnHub is one device (node 1) on an in-memory hub, its port the
// one wrap makes of the hub's (nil: the hub's), run by an engine of its
// own; the test's cleanup stops both.
func engineOnHub(t *testing.T, wrap func(link.Port) link.Port) (*Device, *Engine) {
	t.Helper()
	hub := link.NewHub(4096, 64)
	d, err := New(Config{Node: 1, RegionSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	var p link.Port
	if p, err = hub.Attach(d.MAC()); err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		p = wrap(p)
	}
	d.AttachPort(p)
	e, err := NewEngine(d)
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	t.Cleanup(e.Stop)
	return d, e
}

// waitUntil polls cond every millisecond; 30 s without it fails the test
// as hung (a guard, not a timing: a correct run takes a fraction of it).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); !cond(); time.Sleep(time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("hang guard: still not %s", what)
		}
	}
}

// parkPeekPort is a parkPort that can say whether a frame waits, so its
// engine really sleeps (without, it cannot tell and never does).
type parkPeekPort struct {
	parkPort
	peek link.Peeker
}

func (p *parkPeekPort) Pending() bool { return p.peek.Pending() }

// A wait's end (Pause) leaves the port unparked only while the engine
// looks within its watch, and the engine parks it when it next sleeps;
// a Pause while the engine sleeps for long parks it as Drive(false) does,
// or a frame would wait for that whole sleep.
func TestPausedDevicePort(t *testing.T) {
	var port *parkPeekPort
	d, _ := engineOnHub(t, func(p link.Port) link.Port {
		port = &parkPeekPort{parkPort: parkPort{Port: p}, peek: p.(link.Peeker)}
		return port
	})
	asleep := func() bool { return d.r.Load64(uapi.RegDevSleep) != 0 }

	// Idle from the start, nobody drove: the engine's sleep is long.
	waitUntil(t, "an idle engine away with its port parked", func() bool { return asleep() && d.away.Load() && port.parked.Load() })
	d.Drive(true)
	if port.parked.Load() {
		t.Fatal("a driven device's port stays parked")
	}
	d.Pause()
	if d.away.Load() && !port.parked.Load() {
		t.Fatal("a pause while the engine sleeps for long left the port unparked: a frame would wait for that sleep")
	}

	// Driven across an engine sleep: the engine's next sleep is its watch.
	d.Drive(true)
	slept := d.r.Load64(uapi.CtrSleeps.Off())
	waitUntil(t, "the engine asleep on its watch while the device is driven", func() bool {
		return asleep() && d.r.Load64(uapi.CtrSleeps.Off()) > slept && !d.away.Load()
	})
	d.Pause()
	if d.away.Load() {
		t.Skip("the engine went away between the look and the pause (a loaded machine): nothing to judge")
	}
	if port.parked.Load() {
		t.Fatal("a pause while the engine watches parked the port: senders pay for it on every message")
	}
	waitUntil(t, "the engine parking the paused device's port when it next sleeps", func() bool { return asleep() && port.parked.Load() })
}
