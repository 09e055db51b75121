package vdev_test

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// shmPair is two checked devices of their own "processes" (each with its
// engine) on the shared-memory link, and their drivers.
func shmPair(t *testing.T, cfg vdev.Config) (a, b *driver.Driver, devs [2]*vdev.Device) {
	t.Helper()
	dir := t.TempDir()
	cfg.Check = true
	var drv [2]*driver.Driver
	for i, node := range []uint16{1, 2} {
		l, err := vdev.NewLocalShm(cfg, dir, 0, node)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		d, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		drv[i], devs[i] = d, l.Devices[0]
	}
	return drv[0], drv[1], devs
}

// receive consumes n PUSH statuses on b (waiting as a rank does) on a
// goroutine of its own and returns where its outcome arrives; the test's
// cleanup stops it before the devices close.
func receive(t *testing.T, b *driver.Driver, n int) <-chan error {
	done := make(chan error, 1)
	var stop atomic.Bool
	finished := make(chan struct{})
	t.Cleanup(func() { stop.Store(true); <-finished })
	go func() {
		defer close(finished)
		start := time.Now()
		for got := 0; got < n; {
			if stop.Load() || time.Since(start) > 30*time.Second { // hang guard
				done <- fmt.Errorf("%d of %d PUSHes arrived", got, n)
				return
			}
			s, err := b.Wait(int64(100 * time.Millisecond))
			if errors.Is(err, driver.ErrTimeout) {
				continue
			}
			if err != nil {
				done <- err
				return
			}
			if s.Type == uapi.StPUSH {
				got++
			}
		}
		done <- nil
	}()
	return done
}

// A post's pass sends only what the window allows and receives nothing;
// a driver that posts and then neither waits nor polls leaves the rest to
// its device's engine, which the acknowledgements' frames wake (and the
// pass itself, for packets the window has room for): every PUSH arrives,
// and the checker finds no command published to a sleeping engine without
// a doorbell.
func TestPostsWithoutWaitingAllArrive(t *testing.T) {
	a, b, devs := shmPair(t, vdev.Config{RegionSize: 4 << 20})
	const n = 600
	done := receive(t, b, n+1)
	for i := range n {
		if _, err := a.Push(2, uint64(16*i), uint64(16*i), 16, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Push(2, 0, 0, 64<<10, 0, 0); err != nil { // more packets than one pass sends
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("receiver: %v", err)
	}
	for i, d := range devs {
		if v := uapi.Region(d.Region()).Counter(uapi.CtrViolations); v != 0 {
			t.Fatalf("node %d: %d violations: %v", i+1, v, uapi.Region(d.Region()).ReadViolations())
		}
	}
}

// A driver that runs its device alone (Drive) and only posts, retrying a
// full queue without waiting, still moves: the queue is full because the
// acknowledgements that complete its commands were not taken in (a
// post's pass does not receive), and Post runs a full pass before it
// reports ErrQueueFull. Handing the device back sends the rest.
func TestPostOnFullQueueTakesInAcks(t *testing.T) {
	a, b, _ := shmPair(t, vdev.Config{RegionSize: 4 << 20, CmdEntries: 16, MaxInflight: 4, Window: 4})
	const n = 500
	done := receive(t, b, n)
	a.Drive(true)
	start := time.Now()
	for i := range n {
		for tries := 0; ; tries++ {
			_, err := a.Push(2, uint64(16*(i%64)), uint64(16*(i%64)), 16, 0, 0)
			if err == nil {
				break
			}
			if !errors.Is(err, driver.ErrQueueFull) {
				t.Fatal(err)
			}
			if time.Since(start) > 30*time.Second { // hang guard: without the full pass it stalls for good
				t.Fatalf("post %d: the queue stayed full over %d tries", i, tries)
			}
			runtime.Gosched()
		}
		a.Skip(a.StatusTail() - a.StatusHead()) // no statuses are signalled; keep the ring clear anyway
	}
	a.Drive(false) // the engine sends what the last posts left
	if err := <-done; err != nil {
		t.Fatalf("receiver: %v", err)
	}
}
