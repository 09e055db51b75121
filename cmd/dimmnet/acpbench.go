package main

import (
	"flag"
	"os"

	"github.com/dimmnet/dimmnet/driver/acp/acpbench"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/provenance"
)

// acpBenchCmd measures ACP's copies and atomics between rank processes
// beside Open MPI's OpenSHMEM and MPI one-sided in the same run; under
// mpirun it is one rank of the job and rank 0 prints.
func acpBenchCmd(args []string) error {
	fs := flag.NewFlagSet("acp-bench", flag.ContinueOnError)
	linkKind := fs.String("link", "shm", "link between the ranks' devices: shm, udp or afpacket (raw Ethernet; launched here, the ranks run in a network namespace with a bridge and a veth per rank, made and removed by the run: needs root; under mpirun, DIMMNET_IFNAME names each rank's interface)")
	asJSON := fs.Bool("json", false, "print JSON records (operation, path, medium, us median)")
	iters := fs.Int("iters", 20000, "operations per 8-byte measurement")
	noPeers := fs.Bool("no-peers", false, "do not run Open MPI beside ACP")
	procs := fs.Int("procs", 1, "GOMAXPROCS of each rank process")
	peers := fs.String("peers", "", "UDP peers file (under a launcher with --link udp)")
	keyFile, check := rankFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := setRankEnv(*keyFile, *check); err != nil {
		return err
	}
	recs, err := acpbench.Run(acpbench.Options{Link: *linkKind, Iters: *iters, NoPeers: *noPeers, Procs: *procs, Peers: *peers}, os.Stderr)
	if err != nil {
		return err
	}
	if l, ok, _ := ranks.FromEnv(); ok && l.Rank != 0 {
		return nil // one rank of a launcher's job: rank 0 prints
	}
	if *asJSON {
		enc := provenance.NewEncoder(os.Stdout)
		enc.Info.Medium = *linkKind
		for _, r := range recs {
			enc.Encode(r)
		}
		return nil
	}
	acpbench.Print(os.Stdout, recs, *linkKind)
	return nil
}
