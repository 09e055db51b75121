package vdev_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

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
