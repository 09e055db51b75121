package driver_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/drivertest"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// bellPair opens node 1 on a drivertest.Bell (it rings a sleeping engine
// instead of running the device) and node 2 plainly.
func bellPair(t *testing.T) (a *driver.Driver, bell *drivertest.Bell, b *driver.Driver) {
	t.Helper()
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	bell = drivertest.NewBell(driver.InProcessDevice(l.Devices[0]))
	if a, err = driver.Open(bell); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	if b, err = driver.Open(driver.InProcessDevice(l.Devices[1])); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, bell, b
}

// A Bell's dead doorbell is what Post reports as ErrNotRung, Posted says
// that command is posted, and it runs: its DONE comes, once, and its
// bytes land. With the bell alive again, posts ring it.
func TestBellNotRungStillPosted(t *testing.T) {
	a, bell, b := bellPair(t)
	msg := []byte("dead bell")
	a.CopyIn(0, msg)
	bell.Kill(true)
	if err := drivertest.WaitAsleep(a, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	idx, err := a.Push(2, 0, 128, uint32(len(msg)), uapi.FlagSignal, 9)
	if !errors.Is(err, driver.ErrNotRung) || !errors.Is(err, drivertest.ErrDeadDoorbell) || !driver.Posted(err) {
		t.Fatalf("Push with a dead doorbell: %v (Posted %v), want ErrNotRung wrapping ErrDeadDoorbell", err, driver.Posted(err))
	}
	if bell.Failed() != 1 {
		t.Fatalf("%d failed kicks, want 1", bell.Failed())
	}
	s, err := a.Wait(int64(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != uapi.StDone || s.CmdIndex() != idx || s.Cookie != 9 {
		t.Fatalf("status %v, want the DONE of command %d", s, idx)
	}
	if got := b.LinkMem()[128 : 128+len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("receiver holds %q, want %q", got, msg)
	}
	bell.Kill(false)
	if err := drivertest.WaitAsleep(a, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Push(2, 0, 128, uint32(len(msg)), uapi.FlagSignal, 10); err != nil {
		t.Fatalf("Push with the doorbell alive again: %v", err)
	}
	if s, err := a.Wait(int64(10 * time.Second)); err != nil || s.Type != uapi.StDone || s.Cookie != 10 {
		t.Fatalf("second push: %v %v", s, err)
	}
	if s, ok := a.Poll(); ok {
		t.Fatalf("a status no command owes: %v", s)
	}
	if driver.Posted(driver.ErrQueueFull) || !driver.Posted(nil) {
		t.Fatal("Posted: a full queue posts nothing, no error posts")
	}
}

// A device-head ring's release whose READ_DONE found the doorbell dead
// stands: ReleaseTo says ErrNotRung, the device moves the head at its
// next look, and a Flush after it posts no second READ_DONE (it did,
// taking the error for "not released").
func TestRingReleaseNotRungNotRepeated(t *testing.T) {
	b, bell, a := bellPair(t) // b, on the bell, is the ring's owner
	ring, err := b.SetRing(0, 1<<20, 1<<16, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), ring.Index()); err != nil {
		t.Fatal(err)
	}
	msg := []byte("ring it")
	a.CopyIn(0, msg)
	if _, err := a.IPush(b.Node(), b.GPID(), 0, uint32(len(msg)), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	s, err := b.Wait(int64(10 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if s.Type != uapi.StIPUSHMsg || !bytes.Equal(ring.Data(&s), msg) {
		t.Fatalf("status %v holding %q, want the IPUSH of %q", s, ring.Data(&s), msg)
	}
	bell.Kill(true)
	if err := drivertest.WaitAsleep(b, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := ring.ReleaseTo(s.End); !errors.Is(err, driver.ErrNotRung) {
		t.Fatalf("ReleaseTo with a dead doorbell: %v, want ErrNotRung", err)
	}
	tail := b.Region().Load64(uapi.RegCmdqTail)
	for end := time.Now().Add(10 * time.Second); ring.Head() != s.End; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("ring head %d, the posted READ_DONE said %d", ring.Head(), s.End)
		}
	}
	if err := b.Flush(); err != nil {
		t.Fatalf("Flush after the release: %v", err)
	}
	if err := ring.ReleaseTo(s.End); err != nil {
		t.Fatalf("ReleaseTo where the ring stands: %v", err)
	}
	if got := b.Region().Load64(uapi.RegCmdqTail); got != tail {
		t.Fatalf("%d commands posted after the release, want none (the READ_DONE again)", got-tail)
	}
}
