package mpbench

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/dimmnet/dimmnet/internal/subproc"
)

//go:embed ompi.c.in
var ompiSource string

// ErrNoMPI reports a machine without Open MPI's mpicc or mpirun.
var ErrNoMPI = errors.New("mpbench: Open MPI (mpicc, mpirun) not found")

// BuildOMPI compiles the Open MPI side with mpicc into dir and returns the
// program's path.
func BuildOMPI(dir string) (string, error) {
	cc, err := exec.LookPath("mpicc")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoMPI, err)
	}
	if _, err := exec.LookPath("mpirun"); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoMPI, err)
	}
	src := filepath.Join(dir, "mpbench_ompi.c")
	if err := os.WriteFile(src, []byte(ompiSource), 0o600); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "mpbench_ompi")
	out, err := exec.Command(cc, "-O2", "-o", bin, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("mpicc: %v: %s", err, out)
	}
	return bin, nil
}

// mpirunLimit bounds one mpirun job.
const mpirunLimit = 10 * time.Minute

// MPIRun runs prog on np ranks under Open MPI's mpirun with the byte
// transfer layers btl ("self,vader" or "self,tcp") and returns its
// standard output. Root may run it (containers, CI) and ranks may
// outnumber cores.
func MPIRun(prog string, np int, btl string, args ...string) ([]byte, error) {
	a := []string{"--allow-run-as-root", "--oversubscribe", "--mca", "btl", btl, "-np", strconv.Itoa(np), prog}
	// A bound, not a measurement: a job that hangs (a rank that never
	// started) ends with an error instead of holding the run for ever.
	ctx, cancel := context.WithTimeout(context.Background(), mpirunLimit)
	defer cancel()
	c := exec.CommandContext(ctx, "mpirun", append(a, args...)...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.Env = append(os.Environ(), "OMPI_MCA_btl_vader_single_copy_mechanism=none")
	out, err := c.Output()
	if err != nil {
		return out, fmt.Errorf("mpirun %s: %v: %s", btl, err, stderr.String())
	}
	return out, nil
}

// RunOMPI measures Open MPI on shared memory (vader) and TCP, np ranks.
func RunOMPI(np, maxSize, scale int) ([]Record, error) {
	dir, err := os.MkdirTemp("", "mpbench-ompi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	prog, err := BuildOMPI(dir)
	if err != nil {
		return nil, err
	}
	var all []Record
	for _, m := range []struct{ medium, btl string }{{"vader", "self,vader"}, {"tcp", "self,tcp"}} {
		out, err := MPIRun(prog, np, m.btl, m.medium, strconv.Itoa(maxSize), strconv.Itoa(scale))
		if err != nil {
			return all, err
		}
		recs, err := subproc.Records[Record](out)
		if err != nil {
			return all, err
		}
		all = append(all, recs...)
	}
	return all, nil
}
