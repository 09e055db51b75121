package perf

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// Print writes the records as one table, latency figures and stream
// figures side by side, with the load average the run saw.
func Print(w io.Writer, recs []Record) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\tlib\tmedium\top\tcond\tsize\twindow\tp50 µs\tp99 µs\tp99.9 µs\tmean µs\tmin µs\tmax µs\tstdev µs\tMB/s\tmsgs/s\t")
	f := func(v float64) string {
		if v == 0 {
			return "-"
		}
		if v >= 100 {
			return fmt.Sprintf("%.0f", v)
		}
		return fmt.Sprintf("%.3f", v)
	}
	for _, r := range recs {
		win := "-"
		if r.Window > 0 {
			win = fmt.Sprint(r.Window)
		}
		cond := r.Cond
		if cond == "" {
			cond = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Pattern, r.Lib, r.Medium, r.Op, cond,
			pingpong.SizeName(r.Size), win, f(r.P50Us), f(r.P99Us), f(r.P999Us), f(r.MeanUs), f(r.MinUs), f(r.MaxUs), f(r.StdevUs), f(r.MBps), f(r.MsgsPerS))
	}
	tw.Flush()
	if len(recs) > 0 {
		in := recs[len(recs)-1].Info
		fmt.Fprintf(w, "load average %.2f %.2f %.2f, %d cores, %s, ABI %d, revision %.12s\n", in.Load[0], in.Load[1], in.Load[2], in.Cores, in.CPUModel, in.ABI, in.Revision)
		for _, r := range recs {
			if r.Lib == LibDimmnet && r.Window > 0 {
				fmt.Fprintf(w, "device windows: bw and rate keep %d commands in flight (MAX_INFLIGHT %d); the transport keeps at most %d packets unacknowledged per peer\n",
					r.Window, r.MaxInflight, r.TransportWindow)
				break
			}
		}
	}
}

// Target is one of issue 34's targets judged on one run's records.
type Target struct {
	Name  string
	Value float64 // the ratio the target bounds
	Bound string  // e.g. "<= 0.5x"
	Met   bool
	// Judged is false where the target holds only on a quiet machine
	// (load under 1) and this one was not: the figure is reported.
	Judged bool
	From   string // the figures the ratio came from
}

// find is the first record matching the fields given (zero: any).
func find(recs []Record, pattern, lib, medium, op string, size int) (Record, bool) {
	for _, r := range recs {
		if r.Pattern == pattern && r.Lib == lib && (medium == "" || r.Medium == medium) && (op == "" || r.Op == op) && (size == 0 || r.Size == size) &&
			(r.Cond == "" || r.Cond == pingpong.CondLinkMem) {
			return r, true
		}
	}
	return Record{}, false
}

// Targets judges the records of one `perf targets` run against the
// issue's targets that one run can judge (the shm-against-the-old-build
// target needs two builds, interleaved: see docs/design.md).
func Targets(recs []Record) []Target {
	var ts []Target
	add := func(name, bound string, num, den float64, ok func(float64) bool, from string, judged bool) {
		if num == 0 || den == 0 {
			return
		}
		v := num / den
		ts = append(ts, Target{Name: name, Value: v, Bound: bound, Met: ok(v), Judged: judged, From: from})
	}
	le := func(b float64) func(float64) bool { return func(v float64) bool { return v <= b } }
	ge := func(b float64) func(float64) bool { return func(v float64) bool { return v >= b } }
	shm, _ := find(recs, PatternLat, LibDimmnet, "shm", "push", 8)
	vader, _ := find(recs, PatternLat, LibOMPIVader, "", "", 8)
	word, _ := find(recs, PatternLat, LibRaw, "word", "", 8)
	add("shm 8 B PUSH RTT/2 / vader one-way (goal)", "<= 1.0x", shm.P50Us, vader.P50Us, le(1), fmt.Sprintf("%.3f / %.3f µs", shm.P50Us, vader.P50Us), true)
	add("shm 8 B PUSH RTT/2 / raw word ping-pong (the floor)", "report", shm.P50Us, word.P50Us, func(float64) bool { return true }, fmt.Sprintf("%.3f / %.3f µs", shm.P50Us, word.P50Us), true)
	rs, _ := find(recs, PatternRate, LibDimmnet, "shm", "push", 8)
	rv, _ := find(recs, PatternRate, LibOMPIVader, "", "", 8)
	add("shm 8 B message rate (window 64) / vader", ">= 0.5x", rs.MsgsPerS, rv.MsgsPerS, ge(0.5), fmt.Sprintf("%.0f / %.0f msgs/s", rs.MsgsPerS, rv.MsgsPerS), true)
	for _, size := range []int{64 << 10, 1 << 20} {
		bs, _ := find(recs, PatternBW, LibDimmnet, "shm", "push", size)
		bv, _ := find(recs, PatternBW, LibOMPIVader, "", "", size)
		add(fmt.Sprintf("shm %s bandwidth (window 64) / vader", pingpong.SizeName(size)), ">= 1.0x", bs.MBps, bv.MBps, ge(1), fmt.Sprintf("%.0f / %.0f MB/s", bs.MBps, bv.MBps), true)
	}
	add("shm 8 B PUSH p99 / median", "<= 2x (load < 1)", shm.P99Us, shm.P50Us, le(2), fmt.Sprintf("%.3f / %.3f µs, load %.2f", shm.P99Us, shm.P50Us, shm.Load[0]), shm.Load[0] < 1)
	udp, _ := find(recs, PatternLat, LibDimmnet, "udp", "push", 8)
	rawUDP, _ := find(recs, PatternLat, LibRaw, "udp", "", 8)
	add("udp 8 B PUSH RTT/2 / raw UDP ping-pong", "<= 1.15x", udp.P50Us, rawUDP.P50Us, le(1.15), fmt.Sprintf("%.3f / %.3f µs", udp.P50Us, rawUDP.P50Us), true)
	mem, _ := find(recs, PatternLat, LibDimmnet, "mem", "push", 8)
	add("in-process 8 B PUSH RTT/2 / raw word ping-pong", "report", mem.P50Us, word.P50Us, func(float64) bool { return true }, fmt.Sprintf("%.3f / %.3f µs", mem.P50Us, word.P50Us), true)
	return ts
}

// PrintTargets writes the targets' table.
func PrintTargets(w io.Writer, ts []Target) {
	fmt.Fprintln(w, "\nissue 34's targets, this run (medians; ratios of same-run figures)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range ts {
		verdict := "met"
		switch {
		case t.Bound == "report":
			verdict = ""
		case !t.Judged:
			verdict = "not judged (load)"
		case !t.Met:
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "%s\t%.2fx\t%s\t%s\t%s\n", t.Name, t.Value, t.Bound, verdict, t.From)
	}
	tw.Flush()
}
