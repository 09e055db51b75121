package ranks

import (
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrLaunchEnv: a launcher's variables are set but do not parse (a rank
// outside the size, a size of 0, a word where a number belongs).
var ErrLaunchEnv = errors.New("ranks: bad launcher environment")

// Launch is where a rank learned its place in the job.
type Launch struct {
	Rank, Size, LocalRank int
	// LocalSize is the ranks the launcher put on this host (0: it did
	// not say).
	LocalSize int
	// From names the launcher whose environment said so ("ompi", "pmi",
	// "slurm"), or "" when no launcher started this process.
	From string
}

// launchers are the environments of the launchers the ranks run under, in
// the order they are believed: Open MPI's mpirun, any PMI launcher
// (MPICH's hydra, Slurm's PMI), Slurm's srun.
var launchers = []struct{ from, rank, size, local, localSize string }{
	{"ompi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
	{"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
}

// FromEnv reads rank, size and local rank from the launcher's
// environment of this process (getenv), so ranks started by mpirun or
// srun need no cluster manager of ours. ok is false when no launcher's
// variables are set; a launcher's variables that do not parse are an
// error.
func FromEnv() (Launch, bool, error) { return launchFrom(os.Getenv) }

func launchFrom(getenv func(string) string) (Launch, bool, error) {
	for _, l := range launchers {
		rs, ss := getenv(l.rank), getenv(l.size)
		if rs == "" || ss == "" {
			continue
		}
		rank, err1 := strconv.Atoi(rs)
		size, err2 := strconv.Atoi(ss)
		if err1 != nil || err2 != nil || size <= 0 || rank < 0 || rank >= size {
			return Launch{}, false, fmt.Errorf("%s=%q %s=%q: %w", l.rank, rs, l.size, ss, ErrLaunchEnv)
		}
		local := rank
		if v := getenv(l.local); v != "" {
			if local, err1 = strconv.Atoi(v); err1 != nil || local < 0 {
				return Launch{}, false, fmt.Errorf("%s=%q: %w", l.local, v, ErrLaunchEnv)
			}
		}
		localSize, _ := strconv.Atoi(getenv(l.localSize)) // a hint only: 0 when absent or odd
		return Launch{Rank: rank, Size: size, LocalRank: local, LocalSize: max(localSize, 0), From: l.from}, true, nil
	}
	return Launch{}, false, nil
}
