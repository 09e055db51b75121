package fmpl_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// FMPL ranks launched by Open MPI's mpirun, not by us: 4 processes of this
// test binary learn rank and size from OMPI_COMM_WORLD_* and run the
// "collectives" rank body (bcast, reduce and allreduce checked by content).
// .ci/run installs Open MPI, so in CI this runs.
func TestMPIRunLaunchesRanks(t *testing.T) {
	if _, err := exec.LookPath("mpirun"); err != nil {
		t.Skip("mpirun not installed (Debian: openmpi-bin; .ci/run installs it)")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	c := exec.CommandContext(ctx, "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4",
		"-x", "DIMMNET_SUBPROC", "-x", "FMPL_TEST_DIR", self, "collectives")
	c.Env = append(os.Environ(), "DIMMNET_SUBPROC="+roleRank, "FMPL_TEST_DIR="+t.TempDir()+"/shm")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), " ok"); n != 4 {
		t.Errorf("%d of 4 ranks ok:\n%s", n, out)
	}
}
