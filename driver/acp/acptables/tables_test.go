package acptables

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/acp/acpbench"
)

// TestSkeletonPartnersMatchThePaper: the partner counts our skeletons
// produce on 64 devices, point-to-point only, are the paper's k for MG,
// CG, LU, SP and BT; IS has none (the paper's 98.4% is k = 0).
func TestSkeletonPartnersMatchThePaper(t *testing.T) {
	want := map[string]int{"MG": 9, "CG": 4, "IS": 0, "LU": 4, "SP": 6, "BT": 6}
	for name, k := range want {
		ph, err := Skeleton(name, 64, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Partners(acpbench.LocalDevices, ph, 64)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Max(got) != k {
			t.Errorf("%s: k = %d, want %d", name, slices.Max(got), k)
		}
	}
}

// TestFormatsFlagThePapersInconsistentRows: the rows the issue lists, and
// no other, fail their field sums.
func TestFormatsFlagThePapersInconsistentRows(t *testing.T) {
	var b bytes.Buffer
	PrintFormats(&b)
	bad := map[string]bool{}
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "INCONSISTENT") {
			f := strings.Fields(l)
			bad[f[0]+" "+f[1]] = true
		}
	}
	for _, w := range []string{"Tofu CAS8", "Tofu RMW8", "UDP Atomic4", "UDP Atomic8", "UDP END/WriteACK/EndACK"} {
		if !bad[w] {
			t.Errorf("%s not flagged", w)
		}
		delete(bad, w)
	}
	if len(bad) != 0 {
		t.Errorf("flagged beyond the known rows: %v", bad)
	}
}

// TestMemoryTotalsOfThePaper: the paper's entries sum to the issue's
// formulas, Tofu 262,144 + 68·P and UDP 649,728 + 18·P.
func TestMemoryTotalsOfThePaper(t *testing.T) {
	for _, p := range Ranks {
		if got := sumPaper(paperTofu, uint64(p)); got != 262144+68*uint64(p) {
			t.Errorf("Tofu at %d: %d", p, got)
		}
		if got := sumPaper(paperUDP, uint64(p)); got != 649728+18*uint64(p) {
			t.Errorf("UDP at %d: %d", p, got)
		}
	}
	var b bytes.Buffer
	if err := PrintMemory(&b, 62<<20); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "ours: total") {
		t.Errorf("no total of ours:\n%s", b.String())
	}
}
