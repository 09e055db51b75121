package fmpl_test

import (
	"fmt"
	"testing"

	"github.com/dimmnet/dimmnet/driver/fmpl"
)

// The any-source domain: rank 0 receives from every other rank without
// naming it, matching on the index in arrival order; a message sent to
// another index waits for its own RecvAny.
var anySourceRanks = map[string]rank{
	"anysource": {run: func(w *fmpl.World) error {
		const k = 5
		if w.Rank() != 0 {
			for i := 0; i < k; i++ {
				b := make([]byte, 10+i*1000)
				pattern(b, 100*w.Rank()+i)
				if err := w.SendAny(b, 0, 1, fmpl.CommWorld); err != nil {
					return err
				}
			}
			return w.SendAny([]byte("late"), 0, 2, fmpl.CommWorld)
		}
		next := make([]int, w.Size())
		b := make([]byte, 8192)
		for n := 0; n < k*(w.Size()-1); n++ {
			m, err := w.RecvAny(b, 1, fmpl.CommWorld)
			if err != nil {
				return err
			}
			if m.Source < 1 || m.Source >= w.Size() || m.Size != 10+next[m.Source]*1000 {
				return fmt.Errorf("message %d: %+v, expected the %dth of its source", n, m, next[m.Source])
			}
			if err := checkPattern(b[:m.Size], 100*m.Source+next[m.Source]); err != nil {
				return err
			}
			next[m.Source]++
		}
		for n := 1; n < w.Size(); n++ {
			m, err := w.RecvAny(b, 2, fmpl.CommWorld)
			if err != nil {
				return err
			}
			if string(b[:m.Size]) != "late" {
				return fmt.Errorf("index 2: %q", b[:m.Size])
			}
		}
		return nil
	}},
}

func TestAnySource(t *testing.T) { mustContain(t, runRanks(t, 4, "anysource"), "ok") }
