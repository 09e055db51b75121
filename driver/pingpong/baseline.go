package pingpong

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Lossless is a faulty record's baseline: the same mode, condition, size
// and iterations measured without faults.
type Lossless struct {
	RTTHalfUs    float64 `json:"rtt_half_us"`
	RTTHalfP50Us float64 `json:"rtt_half_p50_us"`
	MBps         float64 `json:"mbps"`
	Iters        int     `json:"iters"`
	Verified     int     `json:"verified"`
	// Retransmits shows whether the baseline was really lossless: a
	// kernel-backed medium can drop frames without being told to.
	Retransmits uint64 `json:"retransmits"`
}

// Ratio is faulty over lossless, so 1 means the faults cost nothing: above
// 1 for the RTT/2 figures is slower, below 1 for MB/s is less bandwidth.
type Ratio struct {
	RTTHalf    float64 `json:"rtt_half"`     // mean RTT/2
	RTTHalfP50 float64 `json:"rtt_half_p50"` // median RTT/2
	MBps       float64 `json:"mbps"`
}

type measurement struct {
	mode, cond string
	size       int
}

// AddBaseline sets Lossless and Ratio of every record in faulty from the
// record of the same mode, condition and size in lossless, and fails if
// one has no counterpart: a ratio is only meaningful between like runs.
func AddBaseline(faulty, lossless []Result) error {
	return pairUp(faulty, lossless, "lossless", func(r *Result, b *Lossless, q *Ratio) { r.Lossless, r.Ratio = b, q })
}

// AddKeyBaseline sets Unkeyed and KeyRatio of every record in keyed from
// the record of the same mode, condition and size in unkeyed: what
// authenticating every frame costs, read off the record.
func AddKeyBaseline(keyed, unkeyed []Result) error {
	return pairUp(keyed, unkeyed, "unkeyed", func(r *Result, b *Lossless, q *Ratio) { r.Unkeyed, r.KeyRatio = b, q })
}

// pairUp sets each record of res beside its like in base.
func pairUp(res, base []Result, what string, set func(r *Result, b *Lossless, q *Ratio)) error {
	like := make(map[measurement]Result, len(base))
	for _, r := range base {
		like[measurement{r.Mode, r.Condition, r.Size}] = r
	}
	for i := range res {
		r := &res[i]
		b, ok := like[measurement{r.Mode, r.Condition, r.Size}]
		if !ok {
			return fmt.Errorf("pingpong: no %s baseline for %s %s %d bytes", what, r.Mode, r.Condition, r.Size)
		}
		set(r, &Lossless{RTTHalfUs: b.RTTHalfUs, RTTHalfP50Us: b.RTTHalfP50Us, MBps: b.MBps, Iters: b.Iters,
			Verified: b.Verified, Retransmits: b.Retransmits},
			&Ratio{RTTHalf: r.RTTHalfUs / b.RTTHalfUs, RTTHalfP50: r.RTTHalfP50Us / b.RTTHalfP50Us, MBps: r.MBps / b.MBps})
	}
	return nil
}

// PrintLossRatio prints, per size and (mode, condition), what the faults
// cost: faulty over lossless for RTT/2 mean, median and MB/s, from records
// AddBaseline filled. Records without a baseline are left out.
func PrintLossRatio(w io.Writer, res []Result) {
	fault := ""
	for _, r := range res {
		if r.Fault != "" {
			fault = " (" + r.Fault + ")"
			break
		}
	}
	printRatios(w, res, "faulty"+fault+" / lossless", func(r Result) *Ratio { return r.Ratio })
}

// PrintKeyRatio prints what authentication costs: keyed over unkeyed, as
// PrintLossRatio does for faults, from records AddKeyBaseline filled.
func PrintKeyRatio(w io.Writer, res []Result) {
	printRatios(w, res, "keyed / unkeyed", func(r Result) *Ratio { return r.KeyRatio })
}

func printRatios(w io.Writer, res []Result, title string, ratio func(Result) *Ratio) {
	m := map[measurement]*Ratio{}
	var sizes []int
	for _, r := range res {
		q := ratio(r)
		if q == nil {
			continue
		}
		if len(sizes) == 0 || sizes[len(sizes)-1] != r.Size {
			sizes = append(sizes, r.Size)
		}
		m[measurement{r.Mode, r.Condition, r.Size}] = q
	}
	if len(sizes) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%s, same medium, same run: RTT/2 mean x (median x) and MB/s x\n", title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tPUSH linkmem\tIPUSH linkmem\tPUSH hostcopy\tIPUSH hostcopy\t")
	for _, s := range sizes {
		fmt.Fprintf(tw, "%s\t", SizeName(s))
		for _, c := range [][2]string{{ModePush, CondLinkMem}, {ModeIPush, CondLinkMem}, {ModePush, CondHostCopy}, {ModeIPush, CondHostCopy}} {
			if q := m[measurement{c[0], c[1], s}]; q != nil {
				fmt.Fprintf(tw, "%.2fx (%.2fx) %.2fx\t", q.RTTHalf, q.RTTHalfP50, q.MBps)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// SizeName is a message size as the tables print it (8 B, 4 KiB, 1 MiB),
// so every table of a run names sizes alike.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
