package ranks

import (
	"errors"
	"testing"
)

// Rank, size and local rank come from whichever launcher started us.
func TestLaunchEnvironments(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want Launch
		ok   bool
		err  error
	}{
		{map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"},
			Launch{Rank: 3, Size: 4, LocalRank: 1, LocalSize: 2, From: "ompi"}, true, nil},
		{map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2"}, Launch{Rank: 0, Size: 2, LocalRank: 0, From: "pmi"}, true, nil},
		{map[string]string{"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1"}, Launch{Rank: 5, Size: 8, LocalRank: 1, From: "slurm"}, true, nil},
		{map[string]string{}, Launch{}, false, nil},
		{map[string]string{"PMI_RANK": "2", "PMI_SIZE": "2"}, Launch{}, false, ErrLaunchEnv},
		{map[string]string{"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "2"}, Launch{}, false, ErrLaunchEnv},
	} {
		got, ok, err := launchFrom(func(k string) string { return c.env[k] })
		if got != c.want || ok != c.ok || !errors.Is(err, c.err) {
			t.Errorf("%v: got %+v %v %v, want %+v %v %v", c.env, got, ok, err, c.want, c.ok, c.err)
		}
	}
}
