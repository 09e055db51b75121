package tests

import (
	"encoding/json"
	"math"
	"os/exec"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// pingpong --fault measures the same plan without faults in the same run:
// every record carries its lossless baseline and the faulty/lossless
// ratios, and verification is on by default (off with --verify=false).
func TestFaultRunCarriesLosslessBaseline(t *testing.T) {
	const spec = "loss=0.05,dup=0.02,reorder=0.05,seed=1"
	const iters, warm, runs = 20, 2, 8 * 4 // 8 B .. 1 KiB x PUSH/IPUSH x linkmem/hostcopy
	args := []string{"pingpong", "--fault", spec, "-q", "--max", "1024", "--iters", "20"}
	records := func(extra ...string) []pingpong.Result {
		t.Helper()
		out, err := exec.Command(dimmnet(t), append(append(args, "--json"), extra...)...).Output()
		if err != nil {
			t.Fatalf("pingpong %v: %v", extra, err)
		}
		var recs []pingpong.Result
		if err := json.Unmarshal(out, &recs); err != nil {
			t.Fatalf("json: %v\n%s", err, out)
		}
		if len(recs) != runs {
			t.Fatalf("%d records, want %d", len(recs), runs)
		}
		return recs
	}
	var retx uint64
	for _, r := range records() {
		b, q := r.Lossless, r.Ratio
		if r.Fault != spec || b == nil || q == nil {
			t.Fatalf("record %+v: want fault %q, a lossless baseline and ratios", r, spec)
		}
		if r.Verified != 2*(warm+iters) || b.Verified != 2*(warm+iters) || b.Iters != iters {
			t.Fatalf("record %+v, baseline %+v: want %d verified in each", r, *b, 2*(warm+iters))
		}
		for _, p := range [][3]float64{{q.RTTHalf, r.RTTHalfUs, b.RTTHalfUs}, {q.RTTHalfP50, r.RTTHalfP50Us, b.RTTHalfP50Us}, {q.MBps, r.MBps, b.MBps}} {
			if p[2] <= 0 || math.Abs(p[0]-p[1]/p[2]) > 1e-9*p[0] {
				t.Fatalf("record %+v: ratio %+v is not faulty/lossless", r, *q)
			}
		}
		retx += r.Retransmits
	}
	if retx == 0 {
		t.Fatal("no retransmits under faults")
	}
	for _, r := range records("--verify=false") {
		if r.Verified != 0 || r.Lossless == nil || r.Lossless.Verified != 0 {
			t.Fatalf("--verify=false: record %+v verified", r)
		}
	}
	// the table shows the baseline, the faulty run and the ratios
	out, err := exec.Command(dimmnet(t), args...).Output()
	if err != nil {
		t.Fatalf("pingpong: %v", err)
	}
	for _, want := range []string{"no faults (the baseline)", "faults " + spec, "faulty (" + spec + ") / lossless", "more in the lossless baseline"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
}
