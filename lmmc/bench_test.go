package lmmc

import (
	"encoding/json"
	"testing"
)

func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every pattern on real devices")
	}
	for _, pattern := range Patterns {
		for _, pol := range Policies {
			if pattern == "paper" && pol != "lru" {
				continue
			}
			r, err := Bench(pol, pattern, 8, 3, BenchConfig{Rounds: 40})
			if err != nil {
				t.Fatalf("%s/%s: %v", pol, pattern, err)
			}
			if r.Misplaced != 0 {
				t.Fatalf("%s/%s: misplaced %d", pol, pattern, r.Misplaced)
			}
			j, _ := json.Marshal(r)
			t.Logf("%s", j)
		}
	}
}
