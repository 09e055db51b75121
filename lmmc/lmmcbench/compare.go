package lmmcbench

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/lmmc"
)

// Pair is one pattern and policy run twice in the same invocation: every
// node in this process (Bench) and every node a process of its own
// on a real medium (Procs), so their fault counts and times compare under
// the same load.
type Pair struct {
	InProcess BenchResult `json:"in_process"`
	Processes BenchResult `json:"processes"`
	Link      string      `json:"link"`
}

// Compare runs every pattern of Patterns under every policy ("paper"
// under LRU only), in one process and across processes over linkName.
// progress, if not nil, hears which run starts.
func Compare(ports, frames int, cfg BenchConfig, linkName string, progress func(string)) ([]Pair, error) {
	if progress == nil {
		progress = func(string) {}
	}
	var out []Pair
	for _, pat := range Patterns {
		pols := lmmc.Policies
		if pat == "paper" {
			pols = []string{"lru"}
		}
		for _, pol := range pols {
			progress(fmt.Sprintf("lmmc-bench: %s, %s, in one process", pat, pol))
			in, err := Bench(pol, pat, ports, frames, cfg)
			if err != nil {
				return out, fmt.Errorf("%s/%s in one process: %w", pat, pol, err)
			}
			progress(fmt.Sprintf("lmmc-bench: %s, %s, a process per node over %s", pat, pol, linkName))
			pcfg := cfg
			pcfg.Capture = nil
			pr, err := Procs(pol, pat, ports, frames, pcfg, linkName)
			if err != nil {
				return out, fmt.Errorf("%s/%s across processes over %s: %w", pat, pol, linkName, err)
			}
			out = append(out, Pair{InProcess: in, Processes: pr, Link: linkName})
		}
	}
	return out, nil
}

// WriteComparison prints the pairs: the policies' fault counts and write
// times in one process beside across processes, then the paper's
// figures (180/17/20 µs) beside both.
func WriteComparison(w io.Writer, pairs []Pair, load string) error {
	if len(pairs) == 0 {
		return nil
	}
	p0 := pairs[0].InProcess
	fmt.Fprintf(w, "LMMC remote paging: %d ports per connection over %d receive frames per node; nodes in one process beside a process per node over %s (%s)\n",
		p0.Ports, p0.Frames, pairs[0].Link, load)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\tpolicy\tnodes\twrites\tfaults (1 proc)\tfaults (procs)\tpages copied (1 proc)\t(procs)\tfaulting write µs median (1 proc)\t(procs)\tmisplaced\ttimeouts (1 proc)\t(procs)\t")
	var paper *Pair
	for i, p := range pairs {
		a, b := p.InProcess, p.Processes
		if a.Pattern == "paper" {
			paper = &pairs[i]
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%d\t%d\t%d\t\n", a.Pattern, a.Policy, a.Nodes, a.Writes, a.Faults, b.Faults,
			a.PagesCopied, b.PagesCopied, a.WriteUsFaultingP50, b.WriteUsFaultingP50, a.Misplaced+b.Misplaced, a.Timeouts, b.Timeouts)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if paper == nil {
		return nil
	}
	a, b := paper.InProcess, paper.Processes
	fmt.Fprintln(w, "\nThe paper's figures (2 SPARCserver5, 4 KiB pages) beside ours:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\tone process\ta process per node (%s)\tpaper\n", paper.Link)
	fmt.Fprintf(tw, "first message µs\t%.0f\t%.0f\t~180 more than the second (TLB work)\n", a.FirstMsgUs, b.FirstMsgUs)
	fmt.Fprintf(tw, "second message µs\t%.0f\t%.0f\t\n", a.SecondMsgUs, b.SecondMsgUs)
	fmt.Fprintf(tw, "warm 1-byte write routine µs (sender)\t%.2f\t%.2f\t17\n", a.WriteRoutineUs, b.WriteRoutineUs)
	fmt.Fprintf(tw, "arrival to link memory µs (receiver)\t%.2f\t%.2f\t20\n", a.ArrivalToLinkMemUs, b.ArrivalToLinkMemUs)
	fmt.Fprintf(tw, "write start to a polling reader µs\t%.2f\t%.2f\t\n", a.ArrivalToReaderUs, b.ArrivalToReaderUs)
	for i, st := range a.OneWay {
		ob := 0.0
		if i < len(b.OneWay) {
			ob = b.OneWay[i].OneWayUs
		}
		fmt.Fprintf(tw, "one-way µs, %d B\t%.2f\t%.2f\t(curve not in our copy)\n", st.Size, st.OneWayUs, ob)
	}
	return tw.Flush()
}
