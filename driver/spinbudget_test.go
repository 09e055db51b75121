package driver

import "testing"

// The spin before a sleep follows the recent waits: twice them while a
// spin can catch the answer, within [spinNs, maxSpinNs], and none once
// waits average more than half the longest spin (a guest under emulation,
// a peer without a core), so the core goes to whoever will answer.
func TestSpinBudgetFollowsWaits(t *testing.T) {
	d := &Driver{spinFixed: -1}
	for _, c := range []struct{ avg, want int64 }{
		{0, spinNs},
		{10_000, spinNs},
		{100_000, 200_000},
		{maxSpinNs / 2, maxSpinNs},
		{maxSpinNs/2 + 1, 0},
		{5 * maxSpinNs, 0},
	} {
		d.avgWait = c.avg
		if got := d.spinBudget(); got != c.want {
			t.Errorf("average wait %d ns: spin %d ns, want %d", c.avg, got, c.want)
		}
	}
	d.spinFixed = 7
	if got := d.spinBudget(); got != 7 {
		t.Errorf("DIMMNET_SPIN_NS's budget: spin %d ns, want 7", got)
	}
}

// One very long wait does not stop the spinning for long: a wait counts
// as at most 2 ms, so a few short ones bring the spin back.
func TestLongWaitForgottenSoon(t *testing.T) {
	d := &Driver{spinFixed: -1, avgWait: 10_000}
	d.learnWait(5_000_000_000) // a rank five seconds late
	if d.avgWait > 2*maxSpinNs {
		t.Fatalf("average wait %d ns after one 5 s wait, want at most %d", d.avgWait, 2*maxSpinNs)
	}
	n := 0
	for ; d.spinBudget() == 0; n++ {
		d.learnWait(5_000)
	}
	if n > 4 {
		t.Errorf("%d short waits before spinning again, want at most 4", n)
	}
}
