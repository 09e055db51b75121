package mpbench

import (
	"math"
	"unsafe"
)

// linkOffset is b's link address when b lies in link memory lm.
func linkOffset(lm, b []byte) (uint64, bool) {
	if len(b) == 0 || len(lm) == 0 {
		return 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(lm)))
	if p < base || p+uintptr(len(b)) > base+uintptr(len(lm)) {
		return 0, false
	}
	return uint64(p - base), true
}

func mathFloat64bits(f float64) uint64     { return math.Float64bits(f) }
func mathFloat64frombits(u uint64) float64 { return math.Float64frombits(u) }
