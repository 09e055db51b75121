package fabricsim

import (
	"os"
	"testing"
)

// The paper's findings the issue names as targets, on the model. The
// steady state makes the barrier count nearly free, but the default run
// still uses fewer (DIMMNET_SOAK_TESTS runs the paper's 100,000).
func TestPaperFindings(t *testing.T) {
	m := Model{Barriers: 2000, Seed: 1, Lists: 10}
	if os.Getenv("DIMMNET_SOAK_TESTS") != "" {
		m.Barriers = 100000
	}
	rep, err := Regenerate(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Findings the model does not reproduce, each explained in
	// docs/rhinet.md; they are reported, not hidden, and must stay the
	// only ones.
	known := map[string]bool{
		"RO 8-12% over SHO at 64 hosts, 5-7.5% at 16/32 (17 flits)": true,
		"SCO about 12% behind SHO at 69 flits on the mesh":          true,
	}
	for _, f := range rep.Findings() {
		switch {
		case f.Held:
			t.Logf("holds: %s", f.Name)
		case known[f.Name]:
			t.Logf("known miss: %s: %s", f.Name, f.Detail)
		default:
			t.Errorf("finding lost: %s: %s", f.Name, f.Detail)
		}
	}
	for _, inv := range rep.Inversions() {
		t.Logf("ranking differs: table %s %s: paper has %s below %s by %.1f%%, ours %+.1f%%",
			inv.Table, inv.Column, inv.Faster, inv.Slower, 100*inv.PaperGap, 100*inv.OurGap)
	}
	// The fitted cells are reproduced (to the bisection's picosecond).
	for f, fc := range FitCells {
		tb, _ := TableByName(fc.Table)
		if got, want := rep.Cell(fc.Table, fc.Order, fc.Column).US, tb.Paper[fc.Order][fc.Column]; RelErr(got, want) > 0.001 {
			t.Errorf("%d-flit fit cell: %.2f, paper %.2f", f, got, want)
		}
	}
	// Fig. 6: +0.7 µs per extra switch.
	f6, err := Fig6(rep.Model.HostCost[17], 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(f6); i++ {
		if d := f6[i] - f6[i-1]; d < 0.69 || d > 0.71 {
			t.Errorf("Fig. 6 slope %.3f µs per switch", d)
		}
	}
}
