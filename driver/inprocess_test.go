package driver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// An in-process driver's doorbell is a call and its interrupt a channel:
// posting to a sleeping engine rings it (the doorbell counter moves), and a
// driver waiting on the interrupt is woken by the device's signal, well
// before its long timeout would have. With run to completion (the
// default) the posting thread sends the command itself: no doorbell.
func TestInProcessDeviceDoorbellAndInterrupt(t *testing.T) {
	t.Run("run-to-completion", func(t *testing.T) { doorbellAndInterrupt(t, true) })
	t.Run("doorbell", func(t *testing.T) {
		t.Setenv("DIMMNET_RUN_TO_COMPLETION", "0")
		doorbellAndInterrupt(t, false)
	})
}

func doorbellAndInterrupt(t *testing.T, rtc bool) {
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tb := driver.InProcessDevice(l.Devices[1])
	a, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := driver.Open(tb)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	end := time.Now().Add(10 * time.Second)
	for a.Region().Load64(uapi.RegDevSleep) == 0 {
		if time.Now().After(end) {
			t.Fatal("the idle engine never slept")
		}
		time.Sleep(time.Millisecond)
	}
	bells, irqs := a.Counter(uapi.CtrDoorbells), b.Region().Load64(uapi.RegInterrupts)

	// b announces that it sleeps, as Wait does before blocking.
	b.Region().Store64(uapi.RegDrvWait, 1)
	woke := make(chan error, 1)
	go func() { woke <- tb.WaitIRQ(60_000) }()
	a.CopyIn(0, []byte("wake up!"))
	if _, err := a.Push(2, 0, 0, 8, 0, 0); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatalf("WaitIRQ: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the interrupt never reached the waiting driver")
	}
	b.Region().Store64(uapi.RegDrvWait, 0)
	st, err := b.Wait(5e9)
	if err != nil || st.Type != uapi.StPUSH || string(b.LinkMem()[:8]) != "wake up!" {
		t.Fatalf("status %v, %v; bytes %q", st, err, b.LinkMem()[:8])
	}
	if got := a.Counter(uapi.CtrDoorbells); !rtc && got <= bells {
		t.Fatalf("doorbell counter %d, was %d: the post did not ring the sleeping engine", got, bells)
	} else if rtc && got != bells {
		t.Fatalf("doorbell counter %d, was %d: the posting thread should have sent the command itself", got, bells)
	}
	if got := b.Region().Load64(uapi.RegInterrupts); got <= irqs {
		t.Fatalf("interrupt counter %d, was %d", got, irqs)
	}
}

// Closing the transport wakes a waiter with ErrDeviceStopped, as closing
// an eventfd does, and later waits fail the same way at once.
func TestInProcessDeviceCloseWakesWaiter(t *testing.T) {
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tr := driver.InProcessDevice(l.Devices[0])
	woke := make(chan error, 1)
	go func() { woke <- tr.WaitIRQ(0) }() // 0: no timeout
	time.Sleep(10 * time.Millisecond)
	tr.Close()
	select {
	case err := <-woke:
		if !errors.Is(err, driver.ErrDeviceStopped) {
			t.Fatalf("WaitIRQ after Close: %v, want ErrDeviceStopped", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not wake the waiter")
	}
	if err := tr.WaitIRQ(60_000); !errors.Is(err, driver.ErrDeviceStopped) {
		t.Fatalf("WaitIRQ on a closed transport: %v", err)
	}
	if err := tr.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
