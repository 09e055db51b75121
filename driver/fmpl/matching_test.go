package fmpl_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dimmnet/dimmnet/driver/fmpl"
)

// Sender-side matching: a ping-pong of every size class through link
// memory and host memory, contents checked at both ends.
var matchingRanks = map[string]rank{
	"pingpong": {run: func(w *fmpl.World) error {
		peer := 1 - w.Rank()
		for _, n := range []int{0, 1, 7, 8, 100, fmpl.InlineMax, fmpl.InlineMax + 1, 200000} {
			for _, inLink := range []bool{true, false} {
				var sb, rb []byte
				if inLink {
					var err error
					if sb, err = w.Alloc(max(n, 1)); err != nil {
						return err
					}
					if rb, err = w.Alloc(n + 64); err != nil {
						return err
					}
					sb = sb[:n]
				} else {
					sb, rb = make([]byte, n), make([]byte, n+64)
				}
				for it := 0; it < 3; it++ {
					seed := n + it
					if w.Rank() == 0 {
						pattern(sb, seed)
						if err := w.Send(sb, peer, it%3, fmpl.CommWorld); err != nil {
							return err
						}
						m, err := w.Recv(rb, peer, it%3, fmpl.CommWorld)
						if err != nil {
							return err
						}
						if m.Size != n || m.Index != it%3 || m.Source != peer {
							return fmt.Errorf("size %d: got %+v", n, m)
						}
						if err := checkPattern(rb[:n], seed+1); err != nil {
							return fmt.Errorf("size %d link %v: %w", n, inLink, err)
						}
					} else {
						m, err := w.Recv(rb, peer, it%3, fmpl.CommWorld)
						if err != nil {
							return err
						}
						if m.Size != n {
							return fmt.Errorf("size %d: got %+v", n, m)
						}
						if err := checkPattern(rb[:n], seed); err != nil {
							return fmt.Errorf("size %d link %v: %w", n, inLink, err)
						}
						pattern(sb, seed+1)
						if err := w.Send(sb, peer, it%3, fmpl.CommWorld); err != nil {
							return err
						}
					}
				}
			}
		}
		return nil
	}},
	// TagAny matches whatever index the sender used; an explicit index is
	// matched by its own header even when posted after a TagAny one.
	"tagany": {run: func(w *fmpl.World) error {
		buf := make([]byte, 16)
		if w.Rank() == 1 {
			for i := 0; i < 3; i++ {
				m, err := w.Recv(buf, 0, fmpl.TagAny, fmpl.CommWorld)
				if err != nil {
					return err
				}
				if m.Index != 5+i || m.Size != 8+i {
					return fmt.Errorf("TagAny receive %d: %+v", i, m)
				}
				if err := checkPattern(buf[:m.Size], m.Index); err != nil {
					return err
				}
			}
			return nil
		}
		for i := 0; i < 3; i++ {
			b := make([]byte, 8+i)
			pattern(b, 5+i)
			if err := w.Send(b, 1, 5+i, fmpl.CommWorld); err != nil {
				return err
			}
		}
		return nil
	}},
	// Receives posted in reverse index order, sends in order: matching is
	// by index, not by arrival.
	"reverse": {run: func(w *fmpl.World) error {
		const k = 12
		if w.Rank() == 1 {
			bufs := make([][]byte, k)
			for i := k - 1; i >= 0; i-- {
				bufs[i], _ = w.Alloc(8 * k)
				if err := w.Irecv(bufs[i], 0, i, fmpl.CommWorld); err != nil {
					return err
				}
			}
			for i := 0; i < k; i++ {
				m, err := w.IrecvWait(0, i, fmpl.CommWorld)
				if err != nil {
					return err
				}
				if err := checkPattern(bufs[i][:m.Size], i); err != nil {
					return err
				}
			}
			return nil
		}
		for i := 0; i < k; i++ {
			b := make([]byte, 8*(i+1))
			pattern(b, i)
			if err := w.Isend(b, 1, i, fmpl.CommWorld); err != nil {
				return err
			}
			if err := w.IsendWait(1, i, fmpl.CommWorld); err != nil {
				return err
			}
		}
		return nil
	}},
}

func TestMatchingPingPong(t *testing.T) { mustContain(t, runRanks(t, 2, "pingpong"), "ok") }
func TestMatchingTagAny(t *testing.T)   { mustContain(t, runRanks(t, 2, "tagany"), "ok") }
func TestMatchingReverse(t *testing.T)  { mustContain(t, runRanks(t, 2, "reverse"), "ok") }

// errIs is a rank body's helper: err must wrap want.
func errIs(err, want error, what string) error {
	if !errors.Is(err, want) {
		return fmt.Errorf("%s: got %v, want %v", what, err, want)
	}
	return nil
}
