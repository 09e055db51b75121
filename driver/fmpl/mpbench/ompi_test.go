package mpbench

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// Open MPI beside FMPL: 4 ranks under mpirun check bcast, reduce and
// allreduce by content, on shared memory and on TCP. .ci/run installs
// Open MPI, so in CI this runs; elsewhere it skips without mpirun.
func TestOMPICollectivesByContent(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not installed (Debian: openmpi-bin, libopenmpi-dev; .ci/run installs them)")
	}
	prog, err := BuildOMPI(t.TempDir())
	if errors.Is(err, ErrNoMPI) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, btl := range []string{"self,vader", "self,tcp"} {
		out, err := MPIRun(prog, 4, btl, "check")
		if err != nil {
			t.Fatalf("%s: %v\n%s", btl, err, out)
		}
		if n := strings.Count(string(out), " ok 0"); n != 4 {
			t.Errorf("%s: %d of 4 ranks ok:\n%s", btl, n, out)
		}
	}
}
