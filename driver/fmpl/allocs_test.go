package fmpl_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/dimmnet/dimmnet/driver/fmpl"
)

// No allocation on the message path (the paper's point against MPI's
// queues): a thousand 8-byte and 4 KiB ping-pongs on link-memory buffers
// allocate, in the whole process, devices and links included, well under
// one object per message.
var allocRanks = map[string]rank{
	"allocs": {run: func(w *fmpl.World) error {
		peer := 1 - w.Rank()
		sb, _ := w.Alloc(4096)
		rb, _ := w.Alloc(4096)
		round := func(n int) error {
			if w.Rank() == 0 {
				if err := w.Send(sb[:n], peer, 1, fmpl.CommWorld); err != nil {
					return err
				}
				_, err := w.Recv(rb[:n], peer, 1, fmpl.CommWorld)
				return err
			}
			if _, err := w.Recv(rb[:n], peer, 1, fmpl.CommWorld); err != nil {
				return err
			}
			return w.Send(sb[:n], peer, 1, fmpl.CommWorld)
		}
		for _, n := range []int{8, 4096} {
			for i := 0; i < 100; i++ { // warm up: slices grow to their steady size
				if err := round(n); err != nil {
					return err
				}
			}
			const k = 1000
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for i := 0; i < k; i++ {
				if err := round(n); err != nil {
					return err
				}
			}
			runtime.ReadMemStats(&after)
			if per := float64(after.Mallocs-before.Mallocs) / (2 * k); per > 0.2 && !raceEnabled {
				return fmt.Errorf("%d-byte messages: %.2f allocations per message", n, per)
			}
		}
		return nil
	}},
}

func TestNoAllocationPerMessage(t *testing.T) { mustContain(t, runRanks(t, 2, "allocs"), "ok") }
