package main

import (
	"flag"
	"io"
	"os"

	"github.com/dimmnet/dimmnet/driver/fmpl/mpbench"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/loadavg"
)

// mpbenchCmd runs FMPL's measurements beside raw PUSH and Open MPI; under
// mpirun it is one rank of the job and rank 0 prints.
func mpbenchCmd(args []string) error {
	fs := flag.NewFlagSet("mpbench", flag.ContinueOnError)
	np := fs.Int("np", 4, "ranks to launch on this host (ignored under a launcher)")
	linkKind := fs.String("link", "shm", "link between the ranks' devices: shm, udp or afpacket (raw Ethernet; launched here, the ranks run in a network namespace with a bridge and a veth per rank, made and removed by the run: needs root; under mpirun, DIMMNET_IFNAME names each rank's interface)")
	asJSON := fs.Bool("json", false, "print JSON records")
	jsonOut := fs.String("json-out", "", "also write the JSON records to this file (the tables still print)")
	maxSize := fs.Int("max", 16<<20, "largest ping-pong message")
	scale := fs.Int("scale", 1, "divide iteration counts by this (quick runs)")
	noOMPI := fs.Bool("no-ompi", false, "do not run Open MPI beside FMPL")
	stages := fs.Int("stages", 8, "ranks of the stage-count job (0: none)")
	figures := fs.Bool("figures", false, "sweep the FMPL paper's Figs. 7-11 (2..16 ranks; sizes 8 B..--max) beside Open MPI and the paper's stated values")
	inprocess := fs.Bool("inprocess", false, "--figures: ranks only as devices in this process (default: in-process and as processes)")
	processes := fs.Bool("processes", false, "--figures: ranks only as processes")
	rankList := fs.String("ranks", "2-16", "--figures: rank counts, e.g. 2-16 or 2,4,8,16 (the largest is Fig. 10's)")
	loops := fs.Int("loops", 5, "--figures: timed loops per median")
	keyFile, check := rankFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := setRankEnv(*keyFile, *check); err != nil {
		return err
	}
	out := mpbench.Output{JSONOut: *jsonOut, AsJSON: *asJSON}
	if *figures {
		rs, err := mpbench.ParseRanks(*rankList)
		if err != nil {
			return err
		}
		recs, err := mpbench.Figures(mpbench.FigOptions{Ranks: rs, MaxSize: *maxSize, Scale: *scale, Link: *linkKind, InProcess: *inprocess,
			Processes: *processes, NoOMPI: *noOMPI, Loops: *loops}, os.Stderr)
		if err != nil {
			return err
		}
		return mpbench.Emit(out, recs, func(w io.Writer) { mpbench.PrintFigures(w, recs, loadavg.String()) })
	}
	recs, err := mpbench.Run(mpbench.Options{NP: *np, Link: *linkKind, MaxSize: *maxSize, Scale: *scale, NoOMPI: *noOMPI, Stages: *stages}, os.Stderr)
	if err != nil {
		return err
	}
	if l, ok, _ := ranks.FromEnv(); ok && l.Rank != 0 {
		return nil
	}
	return mpbench.Emit(out, recs, func(w io.Writer) { mpbench.Print(w, recs, *linkKind) })
}
