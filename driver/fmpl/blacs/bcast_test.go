package blacs_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/dimmnet/dimmnet/driver/fmpl"
	"github.com/dimmnet/dimmnet/driver/fmpl/blacs"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/subproc"
)

const bcastRole = "blacs-bcast-rank"

// bcastMain is one process of a 2x2 grid: a strided matrix (packed in
// pieces) and a contiguous one broadcast over the whole grid from (1,0),
// each row's broadcast from its column 1 and each column's from its row 0;
// every element is checked, and so is what a receiver's matrix holds
// outside the m rows (untouched).
func bcastMain([]string) error {
	l, _, err := ranks.FromEnv()
	if err != nil {
		return err
	}
	dev, err := ranks.Open(ranks.Options{Dir: os.Getenv("BLACS_TEST_DIR"), Node: uint16(l.Rank + 1), RegionSize: 16 << 20})
	if err != nil {
		return err
	}
	defer dev.Close()
	w, err := fmpl.Init(dev.Driver, fmpl.Config{Rank: l.Rank, Size: l.Size, Count: 8})
	if err != nil {
		return err
	}
	c, err := blacs.NewContext(w, fmpl.CommWorld, 2, 2, blacs.Options{Pack: 4096, Spool: 1 << 20})
	if err != nil {
		return err
	}
	row, col := c.Coords()
	for _, cs := range []struct {
		scope      byte
		m, n, lda  int
		rsrc, csrc int
	}{
		{'A', 300, 7, 301, 1, 0}, // 7 strided columns of 2400 bytes: pieces through a 4 KiB buffer
		{'A', 64, 9, 64, 1, 0},   // contiguous
		{'R', 5, 3, 8, row, 1},
		{'C', 5, 3, 5, 0, col},
	} {
		a := make([]float64, (cs.n-1)*cs.lda+cs.m+1)
		for i := range a {
			a[i] = -1
		}
		if row == cs.rsrc && col == cs.csrc {
			for j := 0; j < cs.n; j++ {
				for i := 0; i < cs.m; i++ {
					a[i+j*cs.lda] = val[float64](i, j) + 1e6*float64(cs.scope)
				}
			}
			err = blacs.GEBS2D(c, cs.scope, cs.m, cs.n, a, cs.lda)
		} else {
			err = blacs.GEBR2D(c, cs.scope, cs.m, cs.n, a, cs.lda, cs.rsrc, cs.csrc)
		}
		if err != nil {
			return fmt.Errorf("rank %d scope %c: %w", l.Rank, cs.scope, err)
		}
		for j := 0; j < cs.n; j++ {
			for i := 0; i < cs.lda && i+j*cs.lda < len(a); i++ {
				want := -1.0
				if i < cs.m {
					want = val[float64](i, j) + 1e6*float64(cs.scope)
				}
				if got := a[i+j*cs.lda]; got != want {
					return fmt.Errorf("rank %d scope %c: element (%d,%d) is %v, want %v", l.Rank, cs.scope, i, j, got, want)
				}
			}
		}
	}
	if err := blacs.GEBS2D(c, 'X', 1, 1, []float64{1}, 1); !errors.Is(err, blacs.ErrScope) {
		return fmt.Errorf("scope X: %v, want ErrScope", err)
	}
	if err := blacs.GEBR2D(c, 'R', 1, 1, []float64{1}, 1, 1-row, 0); !errors.Is(err, blacs.ErrArgs) {
		return fmt.Errorf("row broadcast from another row: %v, want ErrArgs", err)
	}
	return w.Finalize()
}

// GEBS2D/GEBR2D on FMPL's broadcast, four processes on a 2x2 grid.
func TestBLACSBroadcast(t *testing.T) {
	dir := t.TempDir() + "/shm"
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for r := 0; r < 4; r++ {
		c, err := subproc.Command(bcastRole)
		if err != nil {
			t.Fatal(err)
		}
		c.Env = append(c.Env, "BLACS_TEST_DIR="+dir, "PMI_RANK="+strconv.Itoa(r), "PMI_SIZE=4")
		b := &bytes.Buffer{}
		c.Stdout = b
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, b)
	}
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, outs[r])
		}
	}
}
