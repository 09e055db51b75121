package fmpl_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/dimmnet/dimmnet/driver/fmpl"
)

// Collectives on 3 and 4 ranks (a non-power of two and a power): every
// result checked by content on every rank, roots rotating.
var collectiveRanks = map[string]rank{
	"collectives": {run: func(w *fmpl.World) error {
		p, me := w.Size(), w.Rank()
		for i := 0; i < 3; i++ {
			if err := w.Barrier(fmpl.CommWorld); err != nil {
				return err
			}
		}
		for root := 0; root < p; root++ {
			for _, n := range []int{1, 8, 5000, 300000} {
				b, err := w.Alloc(n)
				if err != nil {
					return err
				}
				if me == root {
					pattern(b, root+n)
				}
				if err := w.Bcast(b, root, fmpl.CommWorld); err != nil {
					return err
				}
				if err := checkPattern(b, root+n); err != nil {
					return fmt.Errorf("bcast root %d size %d: %w", root, n, err)
				}
				w.Free(b)
			}
		}
		// Sums of rank-dependent values, with a known result.
		const cnt = 1000
		for root := 0; root < p; root++ {
			for _, typ := range []fmpl.Type{fmpl.Int32, fmpl.Float32, fmpl.Float64, fmpl.Complex64, fmpl.Complex128} {
				buf, work := make([]byte, cnt*typ.Size()), make([]byte, cnt*typ.Size())
				fill(buf, typ, func(i int) (float64, float64) { return float64(me*cnt + i), float64(i - me) })
				if err := w.Reduce(buf, cnt, fmpl.Sum(typ), root, fmpl.CommWorld, work); err != nil {
					return err
				}
				if me == root {
					if err := check(buf, typ, func(i int) (float64, float64) {
						var re, im float64
						for r := 0; r < p; r++ {
							re += float64(r*cnt + i)
							im += float64(i - r)
						}
						return re, im
					}); err != nil {
						return fmt.Errorf("reduce sum %v root %d: %w", typ, root, err)
					}
				}
			}
		}
		// AbsMax and AbsMin keep the sign of the winner: rank r offers
		// (-1)^r * (r+1) * (i+1); the largest magnitude is rank p-1's.
		for _, typ := range []fmpl.Type{fmpl.Int32, fmpl.Float32, fmpl.Float64, fmpl.Complex64, fmpl.Complex128} {
			val := func(r, i int) float64 {
				v := float64((r + 1) * (i + 1))
				if r%2 == 1 {
					v = -v
				}
				return v
			}
			for _, mx := range []bool{true, false} {
				op, want := fmpl.AbsMin(typ), 0
				if mx {
					op, want = fmpl.AbsMax(typ), p-1
				}
				buf, work := make([]byte, cnt*typ.Size()), make([]byte, cnt*typ.Size())
				fill(buf, typ, func(i int) (float64, float64) { return val(me, i), 0 })
				if err := w.Allreduce(buf, cnt, op, fmpl.CommWorld, work); err != nil {
					return err
				}
				if err := check(buf, typ, func(i int) (float64, float64) { return val(want, i), 0 }); err != nil {
					return fmt.Errorf("allreduce %s: %w", op.Name(), err)
				}
			}
		}
		// A user function: element-wise max of uint64.
		umax := fmpl.UserOp("umax", 8, func(io, in []byte) {
			for i := 0; i+8 <= len(io); i += 8 {
				binary.LittleEndian.PutUint64(io[i:], max(binary.LittleEndian.Uint64(io[i:]), binary.LittleEndian.Uint64(in[i:])))
			}
		})
		b, work := make([]byte, 16), make([]byte, 16)
		binary.LittleEndian.PutUint64(b, uint64(me*10))
		binary.LittleEndian.PutUint64(b[8:], uint64(100-me))
		if err := w.Allreduce(b, 2, umax, fmpl.CommWorld, work); err != nil {
			return err
		}
		if binary.LittleEndian.Uint64(b) != uint64((p-1)*10) || binary.LittleEndian.Uint64(b[8:]) != 100 {
			return fmt.Errorf("user op: got %v", b)
		}
		// Even and odd ranks in communicators of their own.
		c, err := w.CommCreate(me % 2)
		if err != nil {
			return err
		}
		cs, _ := w.CommSize(c)
		cr, _ := w.CommRank(c)
		if cs != (p+1-me%2)/2 || cr != me/2 {
			return fmt.Errorf("comm of key %d: size %d rank %d", me%2, cs, cr)
		}
		x := make([]byte, 4)
		binary.LittleEndian.PutUint32(x, uint32(me))
		if err := w.Allreduce(x, 1, fmpl.Sum(fmpl.Int32), c, make([]byte, 4)); err != nil {
			return err
		}
		want := 0
		for r := me % 2; r < p; r += 2 {
			want += r
		}
		if got := int(binary.LittleEndian.Uint32(x)); got != want {
			return fmt.Errorf("allreduce on the comm of key %d: %d, want %d", me%2, got, want)
		}
		return w.Barrier(c)
	}},
}

func fill(b []byte, t fmpl.Type, f func(i int) (float64, float64)) {
	le := binary.LittleEndian
	for i := 0; i < len(b)/t.Size(); i++ {
		re, im := f(i)
		x := b[i*t.Size():]
		switch t {
		case fmpl.Int32:
			le.PutUint32(x, uint32(int32(re)))
		case fmpl.Float32:
			le.PutUint32(x, math.Float32bits(float32(re)))
		case fmpl.Float64:
			le.PutUint64(x, math.Float64bits(re))
		case fmpl.Complex64:
			le.PutUint32(x, math.Float32bits(float32(re)))
			le.PutUint32(x[4:], math.Float32bits(float32(im)))
		case fmpl.Complex128:
			le.PutUint64(x, math.Float64bits(re))
			le.PutUint64(x[8:], math.Float64bits(im))
		}
	}
}

func check(b []byte, t fmpl.Type, f func(i int) (float64, float64)) error {
	want := make([]byte, len(b))
	fill(want, t, f)
	for i := 0; i < len(b); i += t.Size() {
		if string(b[i:i+t.Size()]) != string(want[i:i+t.Size()]) {
			return fmt.Errorf("element %d: % x, want % x", i/t.Size(), b[i:i+t.Size()], want[i:i+t.Size()])
		}
	}
	return nil
}

func TestCollectives3(t *testing.T) { mustContain(t, runRanks(t, 3, "collectives"), "ok") }
func TestCollectives4(t *testing.T) { mustContain(t, runRanks(t, 4, "collectives"), "ok") }

// Collectives on keyed links and checked devices: every frame between the
// ranks authenticated, and FMPL's driver held to the datasheet (a
// violation fails the rank's Close).
func TestCollectivesKeyedAndChecked(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("a pre-shared key of 32 bytes!!!!"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustContain(t, runRanks(t, 3, "collectives", "DIMMNET_KEY="+key, "DIMMNET_CHECK=1"), "ok")
}
