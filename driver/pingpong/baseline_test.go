package pingpong

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/vdev/link/impair"
)

// A faulty record gets the lossless record of the same mode, condition and
// size, whatever the order, and the ratios are faulty over lossless.
func TestAddBaselinePairsLikeRecords(t *testing.T) {
	faulty := []Result{
		{Mode: ModePush, Condition: CondLinkMem, Size: 8, RTTHalfUs: 6, RTTHalfP50Us: 3, MBps: 8.0 / 6, Iters: 10, Verified: 22},
		{Mode: ModeIPush, Condition: CondHostCopy, Size: 8, RTTHalfUs: 10, RTTHalfP50Us: 5, MBps: 0.8, Iters: 10},
	}
	lossless := []Result{
		{Mode: ModeIPush, Condition: CondHostCopy, Size: 8, RTTHalfUs: 2.5, RTTHalfP50Us: 2, MBps: 3.2, Iters: 10, Recovery: Recovery{Retransmits: 1}},
		{Mode: ModePush, Condition: CondLinkMem, Size: 8, RTTHalfUs: 2, RTTHalfP50Us: 1.5, MBps: 4, Iters: 10, Verified: 22},
		{Mode: ModePush, Condition: CondLinkMem, Size: 16, RTTHalfUs: 99, RTTHalfP50Us: 99, MBps: 99, Iters: 10},
	}
	if err := AddBaseline(faulty, lossless); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		base  Lossless
		ratio Ratio
	}{
		{Lossless{RTTHalfUs: 2, RTTHalfP50Us: 1.5, MBps: 4, Iters: 10, Verified: 22}, Ratio{RTTHalf: 3, RTTHalfP50: 2, MBps: 1.0 / 3}},
		{Lossless{RTTHalfUs: 2.5, RTTHalfP50Us: 2, MBps: 3.2, Iters: 10, Retransmits: 1}, Ratio{RTTHalf: 4, RTTHalfP50: 2.5, MBps: 0.25}},
	}
	for i, w := range want {
		r := faulty[i]
		if r.Lossless == nil || *r.Lossless != w.base {
			t.Fatalf("record %d: lossless %+v, want %+v", i, r.Lossless, w.base)
		}
		if r.Ratio == nil || !near(r.Ratio.RTTHalf, w.ratio.RTTHalf) || !near(r.Ratio.RTTHalfP50, w.ratio.RTTHalfP50) || !near(r.Ratio.MBps, w.ratio.MBps) {
			t.Fatalf("record %d: ratio %+v, want %+v", i, r.Ratio, w.ratio)
		}
	}
	// a measurement the baseline lacks is an error, not a ratio against nothing
	missing := []Result{{Mode: ModeIPush, Condition: CondLinkMem, Size: 8}}
	if err := AddBaseline(missing, lossless); err == nil || !strings.Contains(err.Error(), "ipush linkmem 8") {
		t.Fatalf("err = %v, want one naming ipush linkmem 8", err)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12*math.Max(1, math.Abs(b)) }

// A lossy run beside its lossless baseline, on the same medium: the ratio
// table has a row per size and a cell per (mode, condition), and the
// faults cost retransmissions the baseline did without.
func TestLossRatioOfRealRuns(t *testing.T) {
	fc, err := impair.Parse("loss=0.05,dup=0.02,reorder=0.05,seed=3")
	if err != nil {
		t.Fatal(err)
	}
	run := func(fc impair.Config) []Result {
		a, b, _ := verifiedPair(t, 1024, 512, fc)
		var res []Result
		for _, size := range []int{8, 1024} {
			for _, c := range combos {
				r, err := Run(a, b, c[0], c[1], size, 2, 20)
				if err != nil {
					t.Fatalf("%s %s %d: %v", c[0], c[1], size, err)
				}
				res = append(res, r)
			}
		}
		return res
	}
	lossless, faulty := run(impair.Config{}), run(fc)
	for i := range faulty {
		faulty[i].Fault = fc.String()
	}
	if err := AddBaseline(faulty, lossless); err != nil {
		t.Fatal(err)
	}
	var retx uint64
	for _, r := range faulty {
		retx += r.Retransmits
		if r.Lossless.Verified != 2*22 || r.Verified != 2*22 {
			t.Fatalf("%+v: verified %d, baseline %d, want 44 each", r, r.Verified, r.Lossless.Verified)
		}
		if !near(r.Ratio.RTTHalf, r.RTTHalfUs/r.Lossless.RTTHalfUs) || !near(r.Ratio.MBps, r.MBps/r.Lossless.MBps) {
			t.Fatalf("%+v: ratio %+v", r, *r.Ratio)
		}
	}
	if retx == 0 {
		t.Fatal("the faulty run retransmitted nothing: the faults did not bite")
	}
	var out bytes.Buffer
	PrintLossRatio(&out, faulty)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], "faulty (loss=0.05,dup=0.02,reorder=0.05,seed=3) / lossless") ||
		!strings.HasPrefix(strings.TrimSpace(lines[2]), "8 B") || !strings.HasPrefix(strings.TrimSpace(lines[3]), "1 KiB") ||
		strings.Count(lines[3], "x (") != 4 {
		t.Fatalf("ratio table:\n%s", out.String())
	}
}
