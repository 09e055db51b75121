package fmpl

import "testing"

// A hello comes from a peer's process: any bytes must decode or be
// refused, never panic.
func FuzzDecodeHello(f *testing.F) {
	w := &World{cfg: Config{Count: 4}, size: 2}
	good := make([]byte, layoutWords*8)
	for i, v := range w.layout() {
		for j := 0; j < 8; j++ {
			good[8*i+j] = byte(v >> (8 * j))
		}
	}
	f.Add(good)
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeHello(b)
		if err == nil && (len(b) != layoutWords*8 || v[0] != 0x464d504c) {
			t.Fatalf("accepted %x", b)
		}
	})
}
