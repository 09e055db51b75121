package blacs_test

import (
	"bytes"
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

const role = "blacs-test-rank"

// TestMain registers this package's rank processes (rankMain, bcastMain)
// before it runs the one it was started as, if any.
func TestMain(m *testing.M) {
	subproc.Register(role, rankMain)
	subproc.Register(bcastRole, bcastMain)
	subproc.Main()
	os.Exit(m.Run())
}

// mk makes an element of v (complex ones with an imaginary part too).
func mk[T blacs.Elem](v int) T {
	var z T
	switch p := any(&z).(type) {
	case *int32:
		*p = int32(v)
	case *float32:
		*p = float32(v)
	case *float64:
		*p = float64(v)
	case *complex64:
		*p = complex(float32(v), float32(-v))
	case *complex128:
		*p = complex(float64(v), float64(-v))
	}
	return z
}

// val is element (i, j)'s value.
func val[T blacs.Elem](i, j int) T { return mk[T](1000*j + i + 1) }

// roundTrip has grid (0,0) send general and trapezoidal matrices, strided
// (packed through the two buffers, several pieces) and contiguous (sent as
// they are), and (0,1) receive and check every element, and that nothing
// outside the trapezoid changed.
func roundTrip[T blacs.Elem](c *blacs.Context, row int) error {
	const m, n, lda = 70, 90, 75 // 90 columns of 70 in 75: strided
	for _, cs := range []struct {
		uplo, diag byte
		lda        int
	}{{'G', 'N', lda}, {'G', 'N', m}, {'U', 'N', lda}, {'U', 'U', lda}, {'L', 'N', lda}, {'L', 'U', m}} {
		a := make([]T, cs.lda*n)
		in := func(i, j int) bool {
			switch cs.uplo {
			case 'U':
				return i < j || i == j && cs.diag == 'N'
			case 'L':
				return i > j || i == j && cs.diag == 'N'
			}
			return true
		}
		if row == 0 {
			for j := 0; j < n; j++ {
				for i := 0; i < m; i++ {
					a[i+j*cs.lda] = val[T](i, j)
				}
			}
			var err error
			if cs.uplo == 'G' {
				err = blacs.GESD2D(c, m, n, a, cs.lda, 0, 1)
			} else {
				err = blacs.TRSD2D(c, cs.uplo, cs.diag, m, n, a, cs.lda, 0, 1)
			}
			if err != nil {
				return err
			}
			continue
		}
		for k := range a {
			a[k] = mk[T](-7)
		}
		var err error
		if cs.uplo == 'G' {
			err = blacs.GERV2D(c, m, n, a, cs.lda, 0, 0)
		} else {
			err = blacs.TRRV2D(c, cs.uplo, cs.diag, m, n, a, cs.lda, 0, 0)
		}
		if err != nil {
			return err
		}
		for j := 0; j < n; j++ {
			for i := 0; i < cs.lda; i++ {
				want := mk[T](-7)
				if i < m && in(i, j) {
					want = val[T](i, j)
				}
				if a[i+j*cs.lda] != want {
					return fmt.Errorf("%c%c lda %d: element (%d,%d) %v, want %v", cs.uplo, cs.diag, cs.lda, i, j, a[i+j*cs.lda], want)
				}
			}
		}
	}
	return nil
}

func rankMain([]string) error {
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
	c, err := blacs.NewContext(w, fmpl.CommWorld, 1, 2, blacs.Options{Pack: 4096, Spool: 1 << 20})
	if err != nil {
		return err
	}
	_, col := c.Coords()
	for _, f := range []func(*blacs.Context, int) error{roundTrip[int32], roundTrip[float32], roundTrip[float64], roundTrip[complex64], roundTrip[complex128]} {
		if err := f(c, col); err != nil {
			return fmt.Errorf("rank %d: %w", l.Rank, err)
		}
	}
	return w.Finalize()
}

func TestBLACSMatrices(t *testing.T) {
	dir := t.TempDir() + "/shm"
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for r := 0; r < 2; r++ {
		c, err := subproc.Command(role)
		if err != nil {
			t.Fatal(err)
		}
		c.Env = append(c.Env, "BLACS_TEST_DIR="+dir, "PMI_RANK="+strconv.Itoa(r), "PMI_SIZE=2")
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
