package main

import (
	"flag"
	"os"

	"github.com/dimmnet/dimmnet/driver/fmpl"
	"github.com/dimmnet/dimmnet/driver/fmpl/mpbench"
	"github.com/dimmnet/dimmnet/internal/provenance"
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
	keyFile, check := rankFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := setRankEnv(*keyFile, *check); err != nil {
		return err
	}
	recs, err := mpbench.Run(mpbench.Options{NP: *np, Link: *linkKind, MaxSize: *maxSize, Scale: *scale, NoOMPI: *noOMPI, Stages: *stages}, os.Stderr)
	if err != nil {
		return err
	}
	if l, ok, _ := fmpl.FromEnv(); ok && l.Rank != 0 {
		return nil
	}
	if *jsonOut != "" {
		f, err := os.Create(*jsonOut)
		if err != nil {
			return err
		}
		enc := provenance.NewEncoder(f)
		enc.Info.Medium = *linkKind
		for _, r := range recs {
			enc.Encode(r)
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if *asJSON {
		enc := provenance.NewEncoder(os.Stdout)
		enc.Info.Medium = *linkKind
		for _, r := range recs {
			enc.Encode(r)
		}
		return nil
	}
	mpbench.Print(os.Stdout, recs, *linkKind)
	return nil
}
