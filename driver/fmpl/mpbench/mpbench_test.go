package mpbench

import (
	"io"
	"os"
	"testing"

	"github.com/dimmnet/dimmnet/internal/subproc"
)

func TestMain(m *testing.M) {
	subproc.Main()
	os.Exit(m.Run())
}

// A short run of every FMPL measurement on two ranks (and stage counts on
// three): each produces its records, contents checked inside.
func TestMPBenchQuickRun(t *testing.T) {
	recs, err := Run(Options{NP: 2, MaxSize: 4096, Scale: 50, NoOMPI: true, Stages: 3}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		lib, test string
		size, p   int
	}{{"raw", "pingpong", 8, 2}, {"fmpl", "pingpong", 4096, 2}, {"fmpl", "table2_reverse", 4, 2}, {"fmpl", "reduce", 8192, 2}, {"fmpl", "stages_bcast", 0, 3}} {
		if find(recs, want.lib, "", want.test, "", want.size, want.p) == nil {
			t.Errorf("no %s %s record of size %d at p=%d", want.lib, want.test, want.size, want.p)
		}
	}
	if r := find(recs, "fmpl", "", "stages_bcast", "", 0, 3); r != nil && (len(r.Stages) != 2 || r.Stages[1] != 2) {
		t.Errorf("bcast at p=3: stages %v, want 2 down", r.Stages)
	}
}
