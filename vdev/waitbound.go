package vdev

import (
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/transport"
)

// recentLossNs is how recent the second-to-last resend by a sender's
// timer must be (transport.Book.LostTwiceSince) for the device's port
// waits to keep to the timers' deadlines: at 1% loss and 20-60 µs round
// trips a loss comes every few milliseconds, so a lossy link keeps them,
// while a clean one (whose rare timer resends are mostly an answer that
// came late) waits as before.
const recentLossNs = 20_000_000

// boundedWaiter is the port's FrameWaiter with every wait cut short at
// the device's next retransmission deadline (transport.Book.Soonest)
// while losses recur. A driver's thread blocks on the port in slices
// of a millisecond, which the kernel's SO_RCVTIMEO rounds up to its tick
// (4 ms at HZ=250): a lost packet's tail-loss probe, due 50-150 µs after
// it left, went only when the slice ended, so each loss at 1% cost 4-10
// ms (UDP 8-byte RTT/2 p99 6-8 ms at loss=0.01). A UDP port ends a
// wait shorter than its tick within a millisecond (link's preciseNs and
// wakeMinNs), but the timer that takes slowed every wake-up on this VM
// (8-byte RTT/2 median 8-14 -> 14-18 µs when armed at every wait), so a
// clean link's waits are not bounded: its first losses are found a tick
// late, the next ones within the millisecond.
type boundedWaiter struct {
	link.FrameWaiter
	book *transport.Book
	d    *Device
}

// WaitFrame waits as the port does, at most until the soonest deadline
// while losses recur (not on a test's virtual clock: its deadlines
// are not the monotonic clock's).
func (w *boundedWaiter) WaitFrame(timeoutNs int64) bool {
	if at, lost := w.book.Soonest(), w.book.LostTwiceSince(); at != 0 && lost != 0 && w.d.clock == nil {
		if now := monotime.Now(); now-lost < recentLossNs {
			timeoutNs = min(timeoutNs, max(at-now, 0))
		}
	}
	return w.FrameWaiter.WaitFrame(timeoutNs)
}

// boundWaiter wraps the port's waiter (nil: none).
func (d *Device) boundWaiter(w link.FrameWaiter) link.FrameWaiter {
	if w == nil {
		return nil
	}
	return &boundedWaiter{FrameWaiter: w, book: &d.book, d: d}
}
