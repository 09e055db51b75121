package ranks_test

import (
	"runtime"
	"testing"

	"github.com/dimmnet/dimmnet/driver/ranks"
)

// A rank among more ranks than cores waits by yielding its core (the rank
// it waits for may have none); one among fewer keeps spinning; a policy the
// environment sets wins over either.
func TestOversubscribedRanksYieldTheCore(t *testing.T) {
	t.Setenv("GOMAXPROCS", "2") // keep ranks from changing this test process's
	cases := []struct {
		name       string
		localRanks int
		env        string
		want       bool
	}{
		{"more ranks than cores", runtime.NumCPU() + 1, "", true},
		{"as many ranks as cores", runtime.NumCPU(), "", false},
		{"unknown", 0, "", false},
		{"environment says no", runtime.NumCPU() + 1, "0", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !c.want && c.env == "" && runtime.NumCPU() < 2 {
				t.Skip("on one core the driver yields to peers in other processes anyway")
			}
			t.Setenv("DIMMNET_OS_YIELD", c.env)
			t.Setenv("DIMMNET_SPIN_NS", "")
			dev, err := ranks.Open(ranks.Options{Link: "shm", Dir: t.TempDir(), Node: 1, RegionSize: 4 << 20, LocalRanks: c.localRanks})
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			if got := dev.Driver.YieldsCore(); got != c.want {
				t.Errorf("%d local ranks on %d cores, DIMMNET_OS_YIELD=%q: YieldsCore %v, want %v", c.localRanks, runtime.NumCPU(), c.env, got, c.want)
			}
		})
	}
}
