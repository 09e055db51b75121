package acpbench

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/dimmnet/dimmnet/internal/subproc"
)

//go:embed oshmem.c.in
var oshmemSource string

//go:embed mpi1s.c.in
var mpiSource string

// ErrNoPeers reports a machine without Open MPI's compilers or launchers.
var ErrNoPeers = errors.New("acpbench: Open MPI (oshcc, oshrun, mpicc, mpirun) not found")

func build(dir, cc, src, name string) (string, error) {
	path, err := exec.LookPath(cc)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoPeers, err)
	}
	f := filepath.Join(dir, name+".c")
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command(path, "-O2", "-o", bin, f).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v: %s", cc, err, out)
	}
	return bin, nil
}

// RunPeers measures OpenSHMEM (oshrun, UCX on shared memory, then UCX on
// TCP) and MPI one-sided with osc pt2pt (vader, then tcp), two ranks each.
// Debian's OpenSHMEM crashes in shmem_finalize after printing: its exit
// status is ignored and its records are taken if they are all there.
func RunPeers(iters int) ([]Record, error) {
	dir, err := os.MkdirTemp("", "acp-bench-peers-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var recs []Record
	var errs []error
	common := []string{"--allow-run-as-root", "--oversubscribe", "-np", "2"}
	if osh, err := build(dir, "oshcc", oshmemSource, "acpbench_oshmem"); err != nil {
		errs = append(errs, err)
	} else {
		for _, m := range []struct{ medium, tls string }{{"shm", ""}, {"tcp", "self,tcp"}} {
			args := append([]string{}, common...)
			env := os.Environ()
			if m.tls != "" {
				env = append(env, "UCX_TLS="+m.tls)
				args = append(args, "-x", "UCX_TLS")
			}
			c := exec.Command("oshrun", append(args, osh, m.medium, strconv.Itoa(iters))...)
			c.Env = env
			out, _ := c.Output() // the exit status: see above
			r, err := subproc.Records[Record](out)
			if err == nil && len(r) < 5 {
				err = fmt.Errorf("oshmem on %s printed %d of 5 records", m.medium, len(r))
			}
			recs = append(recs, r...)
			errs = append(errs, err)
		}
	}
	if mpi, err := build(dir, "mpicc", mpiSource, "acpbench_mpi"); err != nil {
		errs = append(errs, err)
	} else {
		for _, m := range []struct{ medium, btl string }{{"shm", "self,vader"}, {"tcp", "self,tcp"}} {
			args := append(append([]string{}, common...), "--mca", "osc", "pt2pt", "--mca", "btl", m.btl, mpi, m.medium, strconv.Itoa(iters))
			c := exec.Command("mpirun", args...)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			out, err := c.Output()
			if err != nil {
				errs = append(errs, fmt.Errorf("mpirun osc pt2pt %s: %v: %s", m.btl, err, stderr.String()))
			}
			r, err := subproc.Records[Record](out)
			recs = append(recs, r...)
			errs = append(errs, err)
		}
	}
	return recs, errors.Join(errs...)
}
