package mpbench

import (
	"io"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// The figure sweep at a reduced size: 2 to 16 ranks in one process and as
// processes (under the race detector, processes at 2, 9 and 16 ranks),
// every figure's records present for every rank count it has, broadcasts
// and reductions checked by content inside; Open MPI beside with
// DIMMNET_FIG_OMPI set where mpirun is installed.
func TestFiguresSweep(t *testing.T) {
	o := FigOptions{MaxSize: 4096, Scale: 100, Loops: 1, NoOMPI: true, InProcess: true}
	if _, err := exec.LookPath("mpirun"); err == nil && os.Getenv("DIMMNET_FIG_OMPI") != "" {
		o.NoOMPI = false
	}
	start := time.Now()
	recs, err := Figures(o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	procRanks := []int{2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	if raceEnabled {
		procRanks = []int{2, 9, 16}
	}
	pr, err := Figures(FigOptions{Ranks: procRanks, MaxSize: 4096, Scale: 100, Loops: 1, NoOMPI: true, Processes: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	recs = append(recs, pr...)
	t.Logf("%d records in %v", len(recs), time.Since(start))
	has := func(fig, lib, where string, ranks, size int) bool {
		for _, r := range recs {
			if r.Figure == fig && r.Lib == lib && r.Where == where && r.Ranks == ranks && r.Size == size && r.US > 0 {
				return true
			}
		}
		return false
	}
	for _, where := range []string{"processes", "inprocess"} {
		for p := 2; p <= 16; p++ {
			if where == "processes" && !slices.Contains(procRanks, p) {
				continue
			}
			for _, w := range []struct {
				fig, lib string
				size     int
			}{{"8", "fmpl", 0}, {"9", "fmpl", 8192}, {"9", "blacs-fmpl", 8192}, {"11", "fmpl", 8192}} {
				if !has(w.fig, w.lib, where, p, w.size) {
					t.Errorf("no Fig. %s %s record at %d ranks %s", w.fig, w.lib, p, where)
				}
			}
		}
		for size := 8; size <= 4096; size *= 8 {
			for _, lib := range []string{"fmpl", "fmpl-copy", "blacs-fmpl"} {
				if !has("7", lib, where, 2, size) {
					t.Errorf("no Fig. 7 %s record of %d bytes %s", lib, size, where)
				}
			}
			for _, lib := range []string{"fmpl", "blacs-fmpl"} {
				if !has("10", lib, where, 16, size) {
					t.Errorf("no Fig. 10 %s record of %d bytes at 16 ranks %s", lib, size, where)
				}
			}
		}
	}
}
