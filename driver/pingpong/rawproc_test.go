package pingpong

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/internal/subproc"
)

// The raw baselines run this test binary again as their other ends.
func TestMain(m *testing.M) {
	subproc.Main()
	os.Exit(m.Run())
}

func finitePositive(x float64) bool { return x > 0 && !math.IsInf(x, 0) && !math.IsNaN(x) }

// Every raw baseline comes back as a record of its own with positive,
// finite figures, and a device's ratios to them are finite.
func TestRawBaselinesAllConditions(t *testing.T) {
	var seen []string
	raw, err := RawBaselines(50*time.Millisecond, true, func(s string) { seen = append(seen, s) })
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != len(RawConditions) || len(seen) != len(RawConditions) {
		t.Fatalf("%d records, %d progress lines; want %d each", len(raw), len(seen), len(RawConditions))
	}
	for i, r := range raw {
		if r.Mode != ModeRaw || r.Condition != RawConditions[i] || r.Size != 8 || r.Iters < 1 {
			t.Errorf("record %d: %+v", i, r)
		}
		if !finitePositive(r.RTTHalfUs) || !finitePositive(r.RTTHalfP50Us) || !finitePositive(r.MBps) {
			t.Errorf("%s: RTT/2 mean %v median %v, MB/s %v", r.Condition, r.RTTHalfUs, r.RTTHalfP50Us, r.MBps)
		}
		if max := rawBounds[r.Condition].max; r.Iters > max {
			t.Errorf("%s: %d round trips, bound %d", r.Condition, r.Iters, max)
		}
	}
	a, b := pair(t, 8)
	var device []Result
	for _, mode := range []string{ModePush, ModeIPush} {
		r, err := Run(a, b, mode, CondLinkMem, 8, 10, 200)
		if err != nil {
			t.Fatal(err)
		}
		device = append(device, r)
	}
	q := RawRatios(device, raw)
	if want := 2 * (len(RawConditions) + 1); len(q) != want {
		t.Fatalf("%d ratios, want %d: %+v", len(q), want, q)
	}
	for _, x := range q {
		if !finitePositive(x.P50) || !finitePositive(x.Mean) {
			t.Errorf("ratio %+v", x)
		}
	}
	var out bytes.Buffer
	PrintRaw(&out, device, raw)
	for _, want := range append([]string{"hand-off limit", "UDP loopback"}, RawConditions...) {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printed table lacks %q:\n%s", want, out.String())
		}
	}
}

// The hand-off limit is the smallest hand-off median, whichever wait won.
func TestHandoffLimitIsSmallestHandoffMedian(t *testing.T) {
	raw := []Result{
		{Mode: ModeRaw, Condition: CondWord, RTTHalfP50Us: 0.5},
		{Mode: ModeRaw, Condition: CondHandoffSpin, RTTHalfP50Us: 3000},
		{Mode: ModeRaw, Condition: CondHandoffYield, RTTHalfP50Us: 12},
		{Mode: ModeRaw, Condition: CondHandoffEventfd, RTTHalfP50Us: 9},
		{Mode: ModeRaw, Condition: CondUDP, RTTHalfP50Us: 8},
	}
	l, ok := HandoffLimit(raw)
	if !ok || l.Condition != CondHandoffEventfd {
		t.Fatalf("limit %+v ok %v, want handoff_eventfd", l, ok)
	}
	if _, ok := HandoffLimit(raw[:1]); ok {
		t.Fatal("a limit without hand-off records")
	}
}

func TestRawBaselineUnknown(t *testing.T) {
	if _, err := RawBaseline("telepathy", time.Millisecond, false); !errors.Is(err, ErrUnknownRaw) {
		t.Fatalf("err %v, want ErrUnknownRaw", err)
	}
}

// A child that dies in the middle fails the baseline at once, and no
// child outlives the call.
func TestRawChildDeathFailsAndReaps(t *testing.T) {
	var pids []int
	testHookStarted = func(f *family) {
		for _, c := range f.kids {
			pids = append(pids, c.Process.Pid)
		}
		f.kids[0].Process.Kill()
	}
	defer func() { testHookStarted = nil }()
	start := time.Now()
	_, err := RawBaseline(CondHandoffEventfd, 10*time.Second, false)
	if !errors.Is(err, ErrRawChild) {
		t.Fatalf("err %v, want ErrRawChild", err)
	}
	t.Log(err)
	if el := time.Since(start); el > 9*time.Second {
		t.Errorf("took %v: the dead child was not noticed before the budget ran out", el)
	}
	if len(pids) != 2 {
		t.Fatalf("%d children, want 2 (relay and B)", len(pids))
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("child %d still there (kill 0: %v)", pid, err)
		}
	}
}

// Each raw baseline's RTT/2, median and mean, as metrics of one run.
func BenchmarkRawBaselines(b *testing.B) {
	for _, c := range RawConditions {
		b.Run(c, func(b *testing.B) {
			var r Result
			for range b.N {
				var err error
				if r, err = RawBaseline(c, 200*time.Millisecond, true); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(r.RTTHalfP50Us, "rtt_half_p50_us")
			b.ReportMetric(r.RTTHalfUs, "rtt_half_us")
			b.ReportMetric(float64(r.Iters), "round_trips")
		})
	}
}
