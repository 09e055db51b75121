package main

import (
	"flag"
	"strings"

	"github.com/dimmnet/dimmnet/driver/collective/fabricsim"
	"github.com/dimmnet/dimmnet/vdev/fabric"
)

// fabricBenchCmd regenerates the RHiNET-2 multicast paper's Tables 2-5 on
// the fabric model beside the paper's numbers, so what the model gets
// right and wrong is read off one screen; the plots are drawn from --json
// by dimmnet-plot, which keeps the plotting library out of this binary.
func fabricBenchCmd(args []string) error {
	fs := flag.NewFlagSet("fabric-bench", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON records (table, order, column, topology, routing, us, paper_us, ...)")
	barriers := fs.Int("barriers", 100000, "barriers per visiting list (the paper's 100,000)")
	lists := fs.Int("lists", 10, "visiting lists per random order (the paper's 10)")
	seed := fs.Uint64("seed", 1, "seed of the random visiting lists")
	quiet := fs.Bool("q", false, "no progress line")
	swSpec := fs.String("switch", fabric.Switch{}.String(), "switch and NI model, comma-separated: "+strings.Join(fabric.SwitchVariants, ", ")+" (docs/rhinet.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return fabricsim.RunBench(fabricsim.BenchOptions{
		AsJSON:   *asJSON,
		Barriers: *barriers,
		Lists:    *lists,
		Seed:     *seed,
		Progress: progressLine(*quiet),
		SwSpec:   *swSpec,
	})
}
