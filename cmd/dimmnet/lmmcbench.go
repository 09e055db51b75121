package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/internal/loadavg"
	"github.com/dimmnet/dimmnet/lmmc"
	"github.com/dimmnet/dimmnet/lmmc/lmmcbench"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
)

// lmmcBenchCmd runs LMMC's communication patterns with more ports than link
// page frames under each replacement policy, and the paper's own figures;
// --pcap records the whole run's traffic in one file to study its paging.
func lmmcBenchCmd(args []string) (rerr error) {
	fs := flag.NewFlagSet("lmmc-bench", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON records")
	check := fs.Bool("check", false, "checked devices: the LMMC manager's driver is held to the datasheet; a violation fails the run")
	ports := fs.Int("ports", 8, "ports per connection")
	frames := fs.Int("frames", 3, "receive frames per connected node (fewer than ports: it pages)")
	rounds := fs.Int("rounds", 120, "rounds of each pattern")
	size := fs.Int("size", 64, "message bytes")
	quiet := fs.Bool("q", false, "no progress line")
	pcapFile := fs.String("pcap", "", "capture every frame of every device of the run to this pcap file")
	linkName := fs.String("link", "", "also run every node as a process of its own over this medium (shm or udp), beside the run in one process")
	if err := fs.Parse(args); err != nil {
		return err
	}
	progress := progressLine(*quiet)
	defer progress("")
	var cw *capture.Writer
	if *pcapFile != "" {
		f, err := os.Create(*pcapFile)
		if err != nil {
			return fmt.Errorf("--pcap: %w", err)
		}
		if cw, err = capture.NewWriter(f, lmmc.BenchFrameMax); err != nil {
			f.Close()
			return fmt.Errorf("--pcap %s: %w", *pcapFile, err)
		}
		// Written once, whatever happens to the run: a failed run's
		// capture is the one most worth reading.
		defer func() {
			if err := cw.Close(); err != nil {
				rerr = errors.Join(rerr, fmt.Errorf("--pcap %s: %w", *pcapFile, err))
			} else if !*quiet {
				fmt.Fprintf(os.Stderr, "lmmc-bench: %d frames captured to %s\n", cw.Frames(), *pcapFile)
			}
		}()
	}
	if *linkName != "" {
		if cw != nil {
			return fmt.Errorf("--pcap records one process's devices; it cannot be combined with --link")
		}
		pairs, err := lmmcbench.Compare(*ports, *frames, lmmc.BenchConfig{Rounds: *rounds, Size: *size, Check: *check}, *linkName, progress)
		progress("")
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(os.Stdout, pairs)
		}
		return lmmcbench.WriteComparison(os.Stdout, pairs, loadavg.String())
	}
	var res []lmmc.BenchResult
	for _, pat := range lmmc.Patterns {
		pols := lmmc.Policies
		if pat == "paper" {
			pols = []string{"lru"}
		}
		for _, pol := range pols {
			progress(fmt.Sprintf("lmmc-bench: %s, %s", pat, pol))
			r, err := lmmc.Bench(pol, pat, *ports, *frames, lmmc.BenchConfig{Rounds: *rounds, Size: *size, Capture: cw, Check: *check})
			if err != nil {
				return fmt.Errorf("%s/%s: %w", pat, pol, err)
			}
			res = append(res, r)
		}
	}
	progress("")
	if *asJSON {
		return writeJSON(os.Stdout, res)
	}
	fmt.Printf("LMMC remote paging: %d ports per connection over %d receive frames per node, %d-byte writes\n", *ports, *frames, *size)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pattern\tpolicy\twrites\tfaults\tfault rate\tpages copied\tresident write µs\tfaulting write µs\tmedian\tmisplaced\ttimeouts\t")
	var paper *lmmc.BenchResult
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
			fmt.Printf("    %8s  %.2f µs\n", sizeName(st.Size), st.OneWayUs)
		}
	}
	return nil
}
