package fmpl

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Type is the element type of a built-in reduction: BLACS's I, S, D, C
// and Z (the v of fmpl_vsum).
type Type int

// The element types.
const (
	Int32 Type = iota
	Float32
	Float64
	Complex64
	Complex128
)

var typeNames = [...]string{"int32", "float32", "float64", "complex64", "complex128"}
var typeSizes = [...]int{4, 4, 8, 8, 16}

// String names the type as Go spells it, for errors and tables.
func (t Type) String() string {
	if t < 0 || int(t) >= len(typeNames) {
		return fmt.Sprintf("Type(%d)", int(t))
	}
	return typeNames[t]
}

// Size is the bytes of one element.
func (t Type) Size() int { return typeSizes[t] }

// Op is a reduction: a function combining in into inout element-wise,
// over count elements of elem bytes each.
type Op struct {
	name string
	elem int
	fn   func(inout, in []byte)
}

// Name names the operation, for errors and tables.
func (o Op) Name() string { return o.name }

// UserOp makes a reduction of a caller's function on elements of elem
// bytes. A panic in fn fails the reduction with ErrUserOp on every rank
// instead of taking the process down.
func UserOp(name string, elem int, fn func(inout, in []byte)) Op {
	return Op{name: name, elem: elem, fn: fn}
}

// apply combines, turning a panic into ErrUserOp.
func (o Op) apply(inout, in []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s panicked: %v: %w", o.name, p, ErrUserOp)
		}
	}()
	o.fn(inout, in)
	return nil
}

// Sum adds element-wise (fmpl_vsum).
func Sum(t Type) Op {
	if f := sumFast(t); f != nil {
		return Op{name: "sum/" + t.String(), elem: t.Size(), fn: f}
	}
	return Op{name: "sum/" + t.String(), elem: t.Size(), fn: func(io, in []byte) {
		each(t, io, in, func(a, b [2]float64, ai, bi int32) ([2]float64, int32) {
			return [2]float64{a[0] + b[0], a[1] + b[1]}, ai + bi
		})
	}}
}

// AbsMax keeps the element of the largest absolute value, with its sign
// (fmpl_vmax, BLACS's convention; for complex |re|+|im|). Ties keep inout.
func AbsMax(t Type) Op {
	return Op{name: "absmax/" + t.String(), elem: t.Size(), fn: func(io, in []byte) {
		each(t, io, in, func(a, b [2]float64, ai, bi int32) ([2]float64, int32) {
			if abs2(b) > abs2(a) {
				a = b
			}
			if absI(bi) > absI(ai) {
				ai = bi
			}
			return a, ai
		})
	}}
}

// AbsMin keeps the element of the smallest absolute value, with its sign
// (fmpl_vmin). Ties keep inout.
func AbsMin(t Type) Op {
	return Op{name: "absmin/" + t.String(), elem: t.Size(), fn: func(io, in []byte) {
		each(t, io, in, func(a, b [2]float64, ai, bi int32) ([2]float64, int32) {
			if abs2(b) < abs2(a) {
				a = b
			}
			if absI(bi) < absI(ai) {
				ai = bi
			}
			return a, ai
		})
	}}
}

func abs2(v [2]float64) float64 { return math.Abs(v[0]) + math.Abs(v[1]) }

func absI(v int32) int64 {
	if v < 0 {
		return -int64(v)
	}
	return int64(v)
}

// each decodes element pairs of type t (little-endian, the layout of
// Go's and C's arrays on the machines we run on), combines them with f
// and writes the result into io. Floats and complexes travel as
// [re, im] float64; int32 on its own lane so no precision is lost.
func each(t Type, io, in []byte, f func(a, b [2]float64, ai, bi int32) ([2]float64, int32)) {
	le := binary.LittleEndian
	sz := t.Size()
	n := min(len(io), len(in)) / sz
	for i := 0; i < n; i++ {
		x, y := io[i*sz:(i+1)*sz], in[i*sz:(i+1)*sz]
		switch t {
		case Int32:
			_, v := f([2]float64{}, [2]float64{}, int32(le.Uint32(x)), int32(le.Uint32(y)))
			le.PutUint32(x, uint32(v))
		case Float32:
			r, _ := f([2]float64{float64(math.Float32frombits(le.Uint32(x)))}, [2]float64{float64(math.Float32frombits(le.Uint32(y)))}, 0, 0)
			le.PutUint32(x, math.Float32bits(float32(r[0])))
		case Float64:
			r, _ := f([2]float64{math.Float64frombits(le.Uint64(x))}, [2]float64{math.Float64frombits(le.Uint64(y))}, 0, 0)
			le.PutUint64(x, math.Float64bits(r[0]))
		case Complex64:
			a := [2]float64{float64(math.Float32frombits(le.Uint32(x))), float64(math.Float32frombits(le.Uint32(x[4:])))}
			b := [2]float64{float64(math.Float32frombits(le.Uint32(y))), float64(math.Float32frombits(le.Uint32(y[4:])))}
			r, _ := f(a, b, 0, 0)
			le.PutUint32(x, math.Float32bits(float32(r[0])))
			le.PutUint32(x[4:], math.Float32bits(float32(r[1])))
		case Complex128:
			a := [2]float64{math.Float64frombits(le.Uint64(x)), math.Float64frombits(le.Uint64(x[8:]))}
			b := [2]float64{math.Float64frombits(le.Uint64(y)), math.Float64frombits(le.Uint64(y[8:]))}
			r, _ := f(a, b, 0, 0)
			le.PutUint64(x, math.Float64bits(r[0]))
			le.PutUint64(x[8:], math.Float64bits(r[1]))
		}
	}
}

// sumFast is Sum without the generic element path: a reduce of 8 KB
// spends its time here, once per tree edge.
func sumFast(t Type) func(io, in []byte) {
	le := binary.LittleEndian
	switch t {
	case Int32:
		return func(io, in []byte) {
			n := min(len(io), len(in)) &^ 3
			for i := 0; i < n; i += 4 {
				le.PutUint32(io[i:], uint32(int32(le.Uint32(io[i:]))+int32(le.Uint32(in[i:]))))
			}
		}
	case Float32, Complex64: // a complex64 is two float32s, added apart
		return func(io, in []byte) {
			n := min(len(io), len(in)) &^ 3
			for i := 0; i < n; i += 4 {
				le.PutUint32(io[i:], math.Float32bits(math.Float32frombits(le.Uint32(io[i:]))+math.Float32frombits(le.Uint32(in[i:]))))
			}
		}
	case Float64, Complex128:
		return func(io, in []byte) {
			n := min(len(io), len(in)) &^ 7
			for i := 0; i < n; i += 8 {
				le.PutUint64(io[i:], math.Float64bits(math.Float64frombits(le.Uint64(io[i:]))+math.Float64frombits(le.Uint64(in[i:]))))
			}
		}
	}
	return nil
}
