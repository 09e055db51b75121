package pingpong

import (
	"errors"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// A fixed count is kept exactly; a time budget picks a count within its
// bounds from the warm-up's pace, and both sides agree on it (a responder
// serving a different count would leave the initiator waiting or a reply
// unread for the next measurement).
func TestRunForChoosesCountByTime(t *testing.T) {
	hub := link.NewHub(vdev.DefaultHubPayload+wire.FrameOverhead, 256)
	a, b := portPairVerify(t, 64, true, func(d *vdev.Device) (link.Port, error) { return hub.Attach(d.MAC()) })
	r, err := RunFor(a, b, ModePush, CondLinkMem, 8, Count(3, 17))
	if err != nil || r.Iters != 17 {
		t.Fatalf("fixed count: %d round trips, %v; want 17", r.Iters, err)
	}
	for _, mode := range []string{ModePush, ModeIPush} {
		for _, cond := range []string{CondLinkMem, CondHostCopy} {
			bud := Budget{Warm: 20, Time: 20 * time.Millisecond, Min: 5, Max: 5000}
			r, err := RunFor(a, b, mode, cond, 64, bud)
			if err != nil {
				t.Fatal(err)
			}
			if r.Iters < bud.Min || r.Iters > bud.Max {
				t.Fatalf("%s %s: %d round trips, outside [%d, %d]", mode, cond, r.Iters, bud.Min, bud.Max)
			}
			if want := bud.Warm + r.Iters; r.Verified != 2*want {
				t.Fatalf("%s %s: %d verified, want %d (both sides, warm-up included)", mode, cond, r.Verified, 2*want)
			}
		}
	}
	// the next measurement finds nothing left over
	if r, err := Run(a, b, ModeIPush, CondHostCopy, 8, 2, 10); err != nil || r.Iters != 10 {
		t.Fatalf("after timed runs: %d, %v", r.Iters, err)
	}
}

func TestBudgetBounds(t *testing.T) {
	warm := []int64{1e9, 1000, 1000, 1000} // a slow first round trip is left out
	if n, _ := (Budget{Time: time.Millisecond, Min: 1, Max: 1 << 20}).iters(warm); n != 1000 {
		t.Errorf("1 ms at 1 µs a round trip: %d, want 1000", n)
	}
	if n, _ := (Budget{Time: time.Second, Min: 1, Max: 300}).iters(warm); n != 300 {
		t.Errorf("capped: %d, want 300", n)
	}
	if n, _ := (Budget{Time: time.Nanosecond, Min: 7, Max: 300}).iters(warm); n != 7 {
		t.Errorf("floored: %d, want 7", n)
	}
	if _, err := (Budget{}).iters(nil); !errors.Is(err, ErrNoRoundTrips) {
		t.Errorf("empty budget: %v, want ErrNoRoundTrips", err)
	}
}

func TestPacerSharesWhatIsLeft(t *testing.T) {
	p := NewPacer(time.Second, 4)
	if d := p.Next(); d <= 0 || d > 250*time.Millisecond {
		t.Fatalf("first share %v, want (0, 250ms]", d)
	}
	p = NewPacer(0, 4)
	if d := p.Next(); d != time.Millisecond {
		t.Fatalf("a run out of time still gives %v, want 1ms", d)
	}
}
