package lmmcbench

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/loadavg"
	"github.com/dimmnet/dimmnet/lmmc"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
)

// Options is what the command line asks of Run.
type Options struct {
	AsJSON bool // --json
	Check  bool // --check
	Ports  int  // --ports
	Frames int  // --frames
	Rounds int  // --rounds
	Size   int  // --size
	// Progress, if set, is shown what the run is doing.
	Progress func(string)
	PcapFile string // --pcap
	// Link, when set (shm or udp), also runs every node as a process of
	// its own over that medium, beside the run in one process.
	Link string // --link
}

// Run runs LMMC's communication patterns with more ports than link page
// frames under each replacement policy, and the paper's own figures, and
// prints them (or JSON records); o.PcapFile records the whole run's
// traffic in one file.
func Run(o Options) (rerr error) {
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	defer progress("")
	var cw *capture.Writer
	if o.PcapFile != "" {
		f, err := os.Create(o.PcapFile)
		if err != nil {
			return fmt.Errorf("--pcap: %w", err)
		}
		if cw, err = capture.NewWriter(f, BenchFrameMax); err != nil {
			f.Close()
			return fmt.Errorf("--pcap %s: %w", o.PcapFile, err)
		}
		// Written once, whatever happens to the run: a failed run's
		// capture is the one most worth reading.
		defer func() {
			if err := cw.Close(); err != nil {
				rerr = errors.Join(rerr, fmt.Errorf("--pcap %s: %w", o.PcapFile, err))
			} else if o.Progress != nil {
				fmt.Fprintf(os.Stderr, "lmmc-bench: %d frames captured to %s\n", cw.Frames(), o.PcapFile)
			}
		}()
	}
	if o.Link != "" {
		if cw != nil {
			return fmt.Errorf("--pcap records one process's devices; it cannot be combined with --link")
		}
		pairs, err := Compare(o.Ports, o.Frames, BenchConfig{Rounds: o.Rounds, Size: o.Size, Check: o.Check}, o.Link, progress)
		progress("")
		if err != nil {
			return err
		}
		if o.AsJSON {
			return pingpong.WriteJSON(os.Stdout, pairs)
		}
		return WriteComparison(os.Stdout, pairs, loadavg.String())
	}
	var res []BenchResult
	for _, pat := range Patterns {
		pols := lmmc.Policies
		if pat == "paper" {
			pols = []string{"lru"}
		}
		for _, pol := range pols {
			progress(fmt.Sprintf("lmmc-bench: %s, %s", pat, pol))
			r, err := Bench(pol, pat, o.Ports, o.Frames, BenchConfig{Rounds: o.Rounds, Size: o.Size, Capture: cw, Check: o.Check})
			if err != nil {
				return fmt.Errorf("%s/%s: %w", pat, pol, err)
			}
			res = append(res, r)
		}
	}
	progress("")
	if o.AsJSON {
		return pingpong.WriteJSON(os.Stdout, res)
	}
	fmt.Printf("LMMC remote paging: %d ports per connection over %d receive frames per node, %d-byte writes\n", o.Ports, o.Frames, o.Size)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\tpolicy\twrites\tfaults\tfault rate\tpages copied\tresident write µs\tfaulting write µs\tmedian\tmisplaced\ttimeouts\t")
	var paper *BenchResult
	for i, r := range res {
		if r.Pattern == "paper" {
			paper = &res[i]
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t\n", r.Pattern, r.Policy, r.Writes, r.Faults, r.FaultRate, r.PagesCopied, r.WriteUsResident, r.WriteUsFaulting, r.WriteUsFaultingP50, r.Misplaced, r.Timeouts)
	}
	tw.Flush()
	if paper != nil {
		fmt.Println("\nThe paper's figures (2 SPARCserver5, 4 KiB pages) beside ours:")
		fmt.Printf("  first message vs second:            ours %.0f vs %.0f µs    paper: the first ~180 µs slower (TLB work)\n", paper.FirstMsgUs, paper.SecondMsgUs)
		fmt.Printf("  warm 1-byte write routine (sender): ours %.2f µs           paper 17 µs\n", paper.WriteRoutineUs)
		fmt.Printf("  arrival to link memory (receiver):  ours %.2f µs           paper 20 µs\n", paper.ArrivalToLinkMemUs)
		fmt.Println("  one-way time by size (ours; the paper's curve is not in our copy):")
		for _, st := range paper.OneWay {
			fmt.Printf("    %8s  %.2f µs\n", pingpong.SizeName(st.Size), st.OneWayUs)
		}
	}
	return nil

}
