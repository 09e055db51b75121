package pingpong

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/dimmnet/dimmnet/internal/provenance"
)

// Step is one measurement of a run; both processes of a two-process run
// walk the same plan, so they agree on sizes and warm-ups without
// talking, and the initiator tells the responder each timed count.
type Step struct {
	Mode, Cond string
	Size       int
	Budget     Budget
	// runTime, when set, is the whole run's time (the same in every
	// Step), which paces the timed counts (see pacer).
	RunTime time.Duration
}

// maxWarm bounds a measurement's warm-up: the counts a fast path wants
// (thousands) take a second on a slow one.
const maxWarm = 200

// NewPlan is the run's measurements: iters timed round trips each if
// iters > 0, else counted by time to take runTime in all if it is set,
// else the fixed counts Iters gives (a plan walked by two sides
// that cannot talk, such as two lab guests).
func NewPlan(maxSize, iters int, runTime time.Duration) []Step {
	var pl []Step
	combos := [][2]string{{ModePush, CondLinkMem}, {ModeIPush, CondLinkMem},
		{ModePush, CondHostCopy}, {ModeIPush, CondHostCopy}}
	for _, size := range Sizes(maxSize) {
		for _, c := range combos {
			warm, it := Iters(size)
			st := Step{c[0], c[1], size, Count(warm, it), 0}
			switch {
			case iters > 0: // a chosen count: warm up in proportion
				st.Budget = Count(max(iters/10, 2), iters)
			case runTime > 0: // counted by time, never more than the fixed count
				st.Budget, st.RunTime = Budget{Warm: min(warm, maxWarm), Min: min(20, it), Max: it}, runTime
			}
			pl = append(pl, st)
		}
	}
	return pl
}

// Pace returns each Step's budget in turn, its time an even share of
// what is left of the run's, counted from the first Step.
func Pace(pl []Step) func(Step) Budget {
	var p *Pacer
	return func(st Step) Budget {
		if st.RunTime <= 0 {
			return st.Budget
		}
		if p == nil {
			p = NewPacer(st.RunTime, len(pl))
		}
		b := st.Budget
		b.Time = p.Next()
		return b
	}
}

// PrintRatio shows how much the two-process path costs over the in-process one.
func PrintRatio(w io.Writer, proc, local []Result) {
	fmt.Fprintln(w, "\ntwo processes / in-process, RTT/2 (mean; median in parentheses)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tPUSH linkmem\tIPUSH linkmem\tPUSH hostcopy\tIPUSH hostcopy\t")
	for i := 0; i+3 < len(proc) && i+3 < len(local); i += 4 {
		fmt.Fprintf(tw, "%s\t", SizeName(proc[i].Size))
		for j := i; j < i+4; j++ {
			fmt.Fprintf(tw, "%.2fx (%.2fx)\t", proc[j].RTTHalfUs/local[j].RTTHalfUs, proc[j].RTTHalfP50Us/local[j].RTTHalfP50Us)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// PrintBaseline sets the smallest and largest rows beside the raw floor
// measured in the same run: a 64-bit word bounced between two goroutines
// through shared memory, and a plain memcpy.
func PrintBaseline(w io.Writer, res []Result, raw, cp float64) {
	fmt.Fprintf(w, "\nraw baseline, same run: word ping-pong RTT/2 %.3f µs; memcpy %.0f MB/s\n", raw, cp)
	small, big := res[0].Size, res[len(res)-1].Size
	for _, r := range res {
		if r.Condition != CondLinkMem {
			continue
		}
		switch r.Size {
		case small:
			fmt.Fprintf(w, "  %-5s %s %s: RTT/2 mean %.2f µs = %.1fx the raw word ping-pong; median %.2f µs = %.1fx\n",
				r.Mode, SizeName(r.Size), r.Condition, r.RTTHalfUs, r.RTTHalfUs/raw, r.RTTHalfP50Us, r.RTTHalfP50Us/raw)
		case big:
			fmt.Fprintf(w, "  %-5s %s %s: %.0f MB/s = %.2fx memcpy\n", r.Mode, SizeName(r.Size), r.Condition, r.MBps, r.MBps/cp)
		}
	}
}

// PrintTable prints one row per size with RTT/2 and MB/s for each
// (mode, condition) pair, the paper's Figure 8 in numbers.
func PrintTable(w io.Writer, what string, res []Result) {
	type key struct {
		mode, cond string
		size       int
	}
	m := map[key]Result{}
	var sizes []int
	for _, r := range res {
		if _, seen := m[key{ModePush, CondLinkMem, r.Size}]; !seen && r.Mode == ModePush && r.Condition == CondLinkMem {
			sizes = append(sizes, r.Size)
		}
		m[key{r.Mode, r.Condition, r.Size}] = r
	}
	fmt.Fprintf(w, "dimmnet ping-pong, %s: RTT/2 in µs and bandwidth (size / RTT/2) in MB/s\n", what)
	fmt.Fprintln(w, "linkmem = Table 5 conditions (1)/(2): data left in link memory; hostcopy = conditions (3)/(4): status read and payload copied to host memory")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tPUSH linkmem µs\tMB/s\tIPUSH linkmem µs\tMB/s\tPUSH hostcopy µs\tMB/s\tIPUSH hostcopy µs\tMB/s\t")
	for _, s := range sizes {
		fmt.Fprintf(tw, "%s\t", SizeName(s))
		for _, c := range [][2]string{{"push", "linkmem"}, {"ipush", "linkmem"}, {"push", "hostcopy"}, {"ipush", "hostcopy"}} {
			r := m[key{c[0], c[1], s}]
			fmt.Fprintf(tw, "%.2f\t%.1f\t", r.RTTHalfUs, r.MBps)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "DIMMnet-2 hardware (paper): min RTT/2 1.74 (PUSH) / 1.78 (IPUSH) µs linkmem, 3.84 / 3.89 µs hostcopy; max 644 / 643 MB/s linkmem, 242 / 241 MB/s hostcopy")
}

// VerifiedIn sums the records' verified counts.
func VerifiedIn(res []Result) int {
	n := 0
	for _, r := range res {
		n += r.Verified
	}
	return n
}

func WriteJSON(w io.Writer, v any, medium ...string) error {
	e := provenance.NewEncoder(w) // every record says what made it, and under what load
	if len(medium) > 0 {
		e.Info.Medium = medium[0]
	}
	e.SetIndent("", "  ")
	return e.Encode(v)
}
