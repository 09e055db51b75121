package auth

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// FuzzAdmit feeds arbitrary frames to a keyed port that holds a session:
// none may crash it, and none may pass without the key (only frames of
// other EtherTypes are handed on, untouched, for the device to count).
func FuzzAdmit(f *testing.F) {
	hub := link.NewHub(2048, 64)
	a, b := attach(f, hub, 1, testKey), attach(f, hub, 2, testKey)
	sendUntil(f, a, func() []byte { return frame(a, 1, 2, 1, []byte("seed....")) }, a, b)
	for _, g := range b.rec.got { // real HELLOs and a real data frame
		f.Add(g)
	}
	f.Add(frame(a, 1, 2, 2, []byte("no trailer")))
	f.Fuzz(func(t *testing.T, in []byte) {
		g := b.admit(append([]byte(nil), in...))
		if g == nil {
			return
		}
		if len(in) >= 14 && in[12] == 0x88 && in[13] == 0xb5 && len(in) >= wire.FrameOverhead {
			// Only a replay of a recorded frame could verify, and the
			// window refuses those once seen.
			for _, rec := range b.rec.got {
				if bytes.Equal(rec, in) {
					return
				}
			}
			t.Fatalf("a frame passed without the key: %x", in)
		}
	})
}
