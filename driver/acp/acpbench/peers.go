package acpbench

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/dimmnet/dimmnet/driver/ompi"
	"github.com/dimmnet/dimmnet/internal/subproc"
)

//go:embed oshmem.c.in
var oshmemSource string

//go:embed mpi1s.c.in
var mpiSource string

// ErrNoPeers reports a machine without Open MPI's compilers or launchers.
var ErrNoPeers = ompi.ErrNoMPI

// RunPeers measures OpenSHMEM (oshrun, UCX on shared memory, then UCX on
// TCP) and MPI one-sided with osc pt2pt (vader, then tcp, then dimmnet:
// pml cm and mtl ofi over the project's libfabric provider, when it builds
// here), two ranks each; osc pt2pt runs on the pml, so the same program
// crosses each wire. Debian's OpenSHMEM crashes in shmem_finalize after
// printing: its exit status is ignored and its records are taken if they
// are all there.
func RunPeers(iters int) ([]Record, error) {
	dir, err := os.MkdirTemp("", "acp-bench-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var recs []Record
	var errs []error
	if osh, err := ompi.Build(dir, "oshcc", "acpbench_oshmem", oshmemSource); err != nil {
		errs = append(errs, err)
	} else {
		for _, m := range []struct{ medium, tls string }{{"shm", ""}, {"tcp", "self,tcp"}} {
			t := ompi.Transport{Name: "ucx " + m.medium}
			if m.tls != "" {
				t.Env = []string{"UCX_TLS=" + m.tls}
			}
			out, _ := ompi.Run(ompi.Job{Launcher: "oshrun", NP: 2, T: t, Prog: osh, Args: []string{m.medium, strconv.Itoa(iters)}}) // the exit status: see above
			r, err := subproc.Records[Record](out)
			if err == nil && len(r) < 5 {
				err = fmt.Errorf("oshmem on %s printed %d of 5 records", m.medium, len(r))
			}
			recs = append(recs, r...)
			errs = append(errs, err)
		}
	}
	if mpi, err := ompi.Build(dir, "mpicc", "acpbench_mpi", mpiSource); err != nil {
		errs = append(errs, err)
	} else {
		shm, tcp := ompi.Vader, ompi.TCP
		shm.Name, tcp.Name = "shm", "tcp" // the medium the records name
		ts := []ompi.Transport{shm, tcp}
		if _, err := ompi.BuildProvider(dir); err != nil {
			errs = append(errs, fmt.Errorf("no MPI one-sided over dimmnet: %w", err))
		} else {
			ts = append(ts, ompi.Dimmnet(dir))
		}
		for _, t := range ts {
			out, err := ompi.Run(ompi.Job{NP: 2, T: t, MCA: []string{"osc", "pt2pt"}, Prog: mpi, Args: []string{t.Name, strconv.Itoa(iters)}})
			if err != nil {
				errs = append(errs, fmt.Errorf("osc pt2pt: %w", err))
			}
			r, err := subproc.Records[Record](out)
			recs = append(recs, r...)
			errs = append(errs, err)
		}
	}
	return recs, errors.Join(errs...)
}
