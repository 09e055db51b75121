package mpbench

import (
	"errors"

	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/ompi"
)

// Open MPI beside FMPL: 4 ranks under mpirun check bcast, reduce and
// allreduce by content, on shared memory and on TCP. .ci/run installs
// Open MPI, so in CI this runs; elsewhere it skips without mpirun.
func TestOMPICollectivesByContent(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not installed (Debian: openmpi-bin, libopenmpi-dev; .ci/run installs them)")
	}
	prog, err := buildOMPI(t.TempDir())
	if errors.Is(err, ErrNoMPI) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range []ompi.Transport{ompi.Vader, ompi.TCP} {
		btl := tr.Name
		out, err := runOMPI(prog, 4, tr, "check")
		if err != nil {
			t.Fatalf("%s: %v\n%s", btl, err, out)
		}
		if n := strings.Count(string(out), " ok 0"); n != 4 {
			t.Errorf("%s: %d of 4 ranks ok:\n%s", btl, n, out)
		}
	}
}

// Open MPI's side of the figure sweep: its records for every figure come
// back in the sweep's form, at each rank count, Fig. 7 at 2 ranks and
// Fig. 10 at the largest.
func TestOMPIFigures(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not installed (Debian: openmpi-bin, libopenmpi-dev; .ci/run installs them)")
	}
	recs, err := figOMPI(FigOptions{Ranks: []int{2, 3}, MaxSize: 512, Scale: 100, Loops: 1}, io.Discard)
	if errors.Is(err, ErrNoMPI) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[[3]any]bool{}
	for _, p := range []int{2, 3} {
		want[[3]any{"8", p, 0}], want[[3]any{"9", p, 8192}], want[[3]any{"11", p, 8192}] = true, true, true
	}
	for _, s := range []int{8, 64, 512} {
		want[[3]any{"7", 2, s}], want[[3]any{"10", 3, s}] = true, true
	}
	for _, r := range recs {
		if r.Lib != "ompi" || r.Where != "vader" || r.US <= 0 {
			t.Errorf("record %+v", r)
		}
		delete(want, [3]any{r.Figure, r.Ranks, r.Size})
	}
	for k := range want {
		t.Errorf("no Open MPI record for Fig. %v at %v ranks, %v bytes", k[0], k[1], k[2])
	}
}
