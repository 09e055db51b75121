package mpbench

import (
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/dimmnet/dimmnet/driver/ompi"
	"github.com/dimmnet/dimmnet/internal/subproc"
)

//go:embed ompi.c.in
var ompiSource string

// ErrNoMPI reports a machine without Open MPI's mpicc or mpirun.
var ErrNoMPI = ompi.ErrNoMPI

// buildOMPI compiles the Open MPI side with mpicc into dir.
func buildOMPI(dir string) (string, error) {
	return ompi.Build(dir, "mpicc", "mpbench_ompi", ompiSource)
}

// runOMPI runs prog on np ranks over t. vader's single-copy mechanism
// (CMA) is off: containers often refuse it, and the runs then fail.
func runOMPI(prog string, np int, t ompi.Transport, args ...string) ([]byte, error) {
	return ompi.Run(ompi.Job{NP: np, T: t, Env: []string{"OMPI_MCA_btl_vader_single_copy_mechanism=none"}, Prog: prog, Args: args})
}

// RunOMPI measures Open MPI on shared memory (vader), TCP and, when the
// project's libfabric provider builds here, dimmnet (pml cm, mtl ofi:
// medium "dimmnet"), np ranks, the same program on each. A provider that
// cannot be built is reported to log and its column left out.
func RunOMPI(np, maxSize, scale int, log io.Writer) ([]Record, error) {
	dir, err := os.MkdirTemp("", "mpbench-ompi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	prog, err := buildOMPI(dir)
	if err != nil {
		return nil, err
	}
	ts := []ompi.Transport{ompi.Vader, ompi.TCP}
	if _, err := ompi.BuildProvider(dir); err != nil {
		fmt.Fprintf(log, "mpbench: no Open MPI over dimmnet: %v\n", err)
	} else {
		ts = append(ts, ompi.Dimmnet(dir))
	}
	var all []Record
	var errs []error
	for _, t := range ts {
		out, err := runOMPI(prog, np, t, t.Name, strconv.Itoa(maxSize), strconv.Itoa(scale))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		recs, err := subproc.Records[Record](out)
		errs = append(errs, err)
		all = append(all, recs...)
	}
	return all, errors.Join(errs...)
}
