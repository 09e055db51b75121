package driver_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// A post whose doorbell cannot be rung (its descriptor is gone, as when
// the daemon that handed it over died) is still posted: Post says
// ErrNotRung with the command's index, and the device, which looks at
// its queue at least every 100 ms while it sleeps, runs it. A caller
// that took the error for "not posted" freed what the device then read.
func TestPostNotRungStillRuns(t *testing.T) {
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := driver.Open(driver.InProcess(l.Devices[0].Region(), -1, -1)) // no doorbell, no interrupt
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := driver.Open(driver.InProcessDevice(l.Devices[1]))
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
	msg := []byte("notrung!")
	a.CopyIn(0, msg)
	idx, err := a.Push(2, 0, 64, uint32(len(msg)), uapi.FlagSignal, 7)
	if !errors.Is(err, driver.ErrNotRung) {
		t.Fatalf("Push with a dead doorbell: %v, want ErrNotRung", err)
	}
	for {
		if s, ok := a.Poll(); ok {
			if s.Type != uapi.StDone || s.CmdIndex() != idx || s.Cookie != 7 {
				t.Fatalf("status %v, want the DONE of command %d", s, idx)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatal("the command posted without a doorbell never completed")
		}
		time.Sleep(time.Millisecond)
	}
	if got := b.LinkMem()[64 : 64+len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("receiver holds %q, want %q", got, msg)
	}
}
