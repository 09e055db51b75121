package vdev_test

// Run to completion from a driver (drive.go, through package driver):
// posts that do not wait, and what a post and an idle poll cost.

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
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

// BenchmarkPostWithOutstanding is what one driver Post costs, its device
// pass included (run to completion), in bursts that leave 1, 64 or 600
// commands outstanding: FMPL's Table 2 posts 600 receive headers (16-byte
// PUSHes) back to back, and its target is a gap at 600 within 1.1x the gap
// at 1. Two devices of their own "processes" (each with its engine) on the
// shared-memory link, each run by its driver's thread: the poster's by its
// posts, the receiver's by a thread that waits for and consumes its
// statuses. Each burst is drained (a signalled FENCE) untimed; ns/post is
// the median burst's time per post.
func BenchmarkPostWithOutstanding(b *testing.B) {
	for _, n := range []int{1, 64, 600} {
		b.Run(fmt.Sprintf("outstanding=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			var drv [2]*driver.Driver
			for i, node := range []uint16{1, 2} {
				l, err := vdev.NewLocalShm(vdev.Config{RegionSize: 4 << 20}, dir, 0, node)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				d, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				drv[i] = d
			}
			a, rcv := drv[0], drv[1]
			// The receiver's driver waits for its PUSH statuses and consumes
			// them, running its device as a rank's waiting thread does.
			var stop atomic.Bool
			done := make(chan struct{})
			go func() {
				defer close(done)
				for !stop.Load() {
					rcv.Wait(int64(time.Millisecond))
				}
			}()
			defer func() { stop.Store(true); <-done }()
			descs := make([]uapi.Desc, n)
			for i := range descs {
				descs[i] = uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, SrcProc: a.GPID(), Length: 16,
					LocalAddr: uint64(16 * i), RemoteAddr: uint64(16 * i)}
			}
			fence := uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal, SrcProc: a.GPID()}
			bursts := make([]float64, 0, b.N)
			b.ResetTimer()
			for range b.N {
				// The posting thread runs its device alone while it posts
				// (its engine stands down), so each post pays for exactly
				// its own pass; the drain's wait hands it back.
				a.Drive(true)
				t0 := monotime.Now()
				for i := range descs {
					if _, err := a.Post(&descs[i]); err != nil {
						b.Fatal(err)
					}
				}
				bursts = append(bursts, float64(monotime.Now()-t0)/float64(n))
				a.Drive(false)
				if _, err := a.Post(&fence); err != nil {
					b.Fatal(err)
				}
				if s, err := a.Wait(0); err != nil || s.Type != uapi.StDone {
					b.Fatalf("fence: %+v, %v", s, err)
				}
			}
			slices.Sort(bursts)
			b.ReportMetric(bursts[len(bursts)/2], "ns/post")
		})
	}
}

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
