package fabricsim

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/internal/provenance"
	"github.com/dimmnet/dimmnet/vdev/fabric"
)

// BenchOptions is what the command line asks of RunBench.
type BenchOptions struct {
	AsJSON   bool   // --json
	Barriers int    // --barriers
	Lists    int    // --lists
	Seed     uint64 // --seed
	// Progress, if set, is shown what the run is doing.
	Progress func(string)
	SwSpec   string // --switch
}

// RunBench regenerates the RHiNET-2 multicast paper's Tables 2-5 on the
// fabric model beside the paper's numbers (or prints them as JSON
// records), so what the model gets right and wrong is read off one screen.
func RunBench(o BenchOptions) error {
	sw, err := fabric.ParseSwitch(o.SwSpec)
	if err != nil {
		return fmt.Errorf("--switch: %w", err)
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string) {}
	}
	rep, err := Regenerate(Model{Barriers: o.Barriers, Seed: o.Seed, Lists: o.Lists, Switch: sw}, progress)
	progress("")
	if err != nil {
		return err
	}
	if o.AsJSON {
		enc := provenance.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep.Records)
	}
	m := rep.Model
	fmt.Printf("RHiNET-2 multicast paper, Tables 2-5 on the fabric model (%d barriers per list, %d lists per random order, seed %d, switch %s)\n", o.Barriers, o.Lists, o.Seed, sw)
	fmt.Printf("fitted host cost per message: 17 flits (PIO) %.1f ns on Table 3 SHIO Up*/Down*; 69 flits (DMA) %.1f ns on Table 5 mesh SHIO\n",
		float64(m.HostCost[17])/1000, float64(m.HostCost[69])/1000)
	f6, err := Fig6(m.HostCost[17], 4)
	if err != nil {
		return err
	}
	fmt.Printf("per-hop delay 350 ns (Fig. 6: +0.7 µs per extra switch on a 2-host barrier, two messages); model's 2-host barrier at 1-4 switches: %.2f µs\n", f6)
	for _, tb := range PaperTables {
		fmt.Printf("\nTable %s: %s (µs: ours / paper, error)\n", tb.Name, tb.Caption)
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
		head := []string{"order"}
		for _, c := range tb.Columns {
			head = append(head, c.Label)
		}
		fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
		for _, o := range collective.Orders {
			row := []string{o}
			for ci := range tb.Columns {
				r := rep.Cell(tb.Name, o, ci)
				row = append(row, fmt.Sprintf("%.2f / %.2f %+5.1f%%", r.US, r.PaperUS, 100*(r.US-r.PaperUS)/r.PaperUS))
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		row := []string{"spread"}
		for ci := range tb.Columns {
			lo, hi, plo, phi := 1e9, 0.0, 1e9, 0.0
			for _, o := range collective.Orders {
				r := rep.Cell(tb.Name, o, ci)
				lo, hi, plo, phi = min(lo, r.US), max(hi, r.US), min(plo, r.PaperUS), max(phi, r.PaperUS)
			}
			row = append(row, fmt.Sprintf("%.1f%% / %.1f%%", 100*(hi-lo)/lo, 100*(phi-plo)/plo))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		if err := tw.Flush(); err != nil {
			return err
		}
		pt := rep.PerTable[tb.Name]
		fmt.Printf("mean relative error: ours %.2f%%, no-fabric model %.2f%%\n", 100*pt[0], 100*pt[1])
	}
	fmt.Printf("\nmean relative error over Tables 3 and 4: ours %.2f%%, no-fabric model (2 x steps x one fitted constant) %.2f%%\n",
		100*rep.MeanRelErr, 100*rep.NoFabricRelErr)
	fmt.Println("\nthe paper's findings on the model:")
	for _, f := range rep.Findings() {
		mark := "holds "
		if !f.Held {
			mark = "MISSED"
		}
		fmt.Printf("  %s  %s", mark, f.Name)
		if !f.Held {
			fmt.Printf(": %s", f.Detail)
		}
		fmt.Println()
	}
	inv := rep.Inversions()
	fmt.Printf("\nrankings that differ from the paper's where its gap exceeds 1%% (%d):\n", len(inv))
	for _, v := range inv {
		fmt.Printf("  table %s %s: paper %s below %s by %.1f%%, ours %+.1f%%\n", v.Table, v.Column, v.Faster, v.Slower, 100*v.PaperGap, 100*v.OurGap)
	}
	return nil

}
