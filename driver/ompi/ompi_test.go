package ompi

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

const ring = `#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
	int rank, size, v;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	v = rank * 7;
	MPI_Sendrecv_replace(&v, 1, MPI_INT, (rank + 1) % size, 0, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	printf("rank %d got %d from %d via %s\n", rank, v, (rank + size - 1) % size, argv[1]);
	MPI_Finalize();
	return v == ((rank + size - 1) % size) * 7 ? 0 : 1;
}
`

// One build, one launcher: a ring exchange over Open MPI's own
// transports and, when the provider builds here, over dimmnet; every rank
// got its neighbour's value. A compiler error and a missing launcher
// are named.
func TestBuildAndRun(t *testing.T) {
	if _, err := exec.LookPath("mpicc"); err != nil {
		t.Skip("mpicc not installed (Debian: libopenmpi-dev; .ci/run installs it)")
	}
	dir := t.TempDir()
	if _, err := Build(dir, "mpicc", "bad", "int main( {"); err == nil || !strings.Contains(err.Error(), "mpicc bad") {
		t.Fatalf("bad source: %v", err)
	}
	if _, err := Build(dir, "no-such-mpicc", "x", ring); !errors.Is(err, ErrNoMPI) {
		t.Fatalf("no compiler: %v", err)
	}
	if _, err := Run(Job{Launcher: "no-such-mpirun", NP: 2, T: Vader}); !errors.Is(err, ErrNoMPI) {
		t.Fatalf("no launcher: %v", err)
	}
	prog, err := Build(dir, "mpicc", "ring", ring)
	if err != nil {
		t.Fatal(err)
	}
	ts := []Transport{Vader, TCP}
	if _, err := BuildProvider(dir); err == nil {
		ts = append(ts, Dimmnet(dir))
	} else if !errors.Is(err, ErrNoProvider) {
		t.Fatal(err)
	} else {
		t.Logf("no dimmnet transport: %v", err)
	}
	for _, tr := range ts {
		out, err := Run(Job{NP: 3, T: tr, Env: []string{"OMPI_MCA_btl_vader_single_copy_mechanism=none"}, Prog: prog, Args: []string{tr.Name}})
		if err != nil {
			t.Fatalf("%s: %v\n%s", tr.Name, err, out)
		}
		for _, want := range []string{"rank 0 got 14 from 2", "rank 1 got 0 from 0", "rank 2 got 7 from 1"} {
			if !strings.Contains(string(out), want+" via "+tr.Name) {
				t.Fatalf("%s: no %q in\n%s", tr.Name, want, out)
			}
		}
	}
}
