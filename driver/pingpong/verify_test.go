package pingpong

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

var combos = [][2]string{{ModePush, CondLinkMem}, {ModeIPush, CondLinkMem}, {ModePush, CondHostCopy}, {ModeIPush, CondHostCopy}}

// verifiedPair is two verifying devices on an in-memory hub carrying
// payload-byte packets, each receive side wrapped in a fault port with fc
// (the two directions seeded apart); the fault ports are returned for
// their counters.
func verifiedPair(t *testing.T, maxSize, payload int, fc impair.Config) (*Side, *Side, []*impair.Port) {
	t.Helper()
	hub := link.NewHub(payload+wire.FrameOverhead, 256)
	var fps []*impair.Port
	a, b := portPairVerify(t, maxSize, true, func(d *vdev.Device) (link.Port, error) {
		p, err := hub.Attach(d.MAC())
		if err != nil || !fc.Active() {
			return p, err
		}
		c := fc
		c.Seed += int64(d.Node())
		fp := impair.Wrap(p, c).(*impair.Port)
		fps = append(fps, fp)
		return fp, nil
	})
	return a, b, fps
}

func statuses(ss ...*Side) uint64 {
	var n uint64
	for _, s := range ss {
		n += s.D.Counter(uapi.CtrStatusWritten)
	}
	return n
}

// Over a link that loses, duplicates and reorders frames, every message of
// every mode and condition arrives with the bytes its sender wrote for that
// iteration, and the record's verified count is every message received:
// both directions, warm-up included, as many as the devices wrote statuses.
func TestVerifyOverLossyLink(t *testing.T) {
	fc, err := impair.Parse("loss=0.05,dup=0.03,reorder=0.05,seed=7")
	if err != nil {
		t.Fatal(err)
	}
	a, b, fps := verifiedPair(t, 4096, 1024, fc) // 4 KiB messages are 4 packets: reordering matters
	const warm, iters = 3, 30
	var retx uint64
	for _, c := range combos {
		for _, size := range []int{8, 1000, 4096} {
			before := statuses(a, b)
			r, err := Run(a, b, c[0], c[1], size, warm, iters)
			if err != nil {
				t.Fatalf("%s %s %d: %v", c[0], c[1], size, err)
			}
			got := statuses(a, b) - before
			if want := 2 * (warm + iters); r.Verified != want || uint64(r.Verified) != got {
				t.Fatalf("%s %s %d: verified %d, want %d (messages received: %d statuses written)", c[0], c[1], size, r.Verified, want, got)
			}
			retx += r.Retransmits
		}
	}
	if a.Verified+b.Verified != len(combos)*3*2*(warm+iters) {
		t.Fatalf("sides verified %d + %d, want %d in all", a.Verified, b.Verified, len(combos)*3*2*(warm+iters))
	}
	// The link really was lossy: otherwise this proves nothing about recovery.
	var st impair.Stats
	for _, fp := range fps {
		s := fp.Stats()
		st.Dropped += s.Dropped
		st.Duplicated += s.Duplicated
		st.Reordered += s.Reordered
	}
	if st.Dropped == 0 || st.Duplicated == 0 || st.Reordered == 0 || retx == 0 {
		t.Fatalf("faults %+v, retransmits %d: the link did not exercise recovery", st, retx)
	}
	t.Logf("dropped %d, duplicated %d, reordered %d; %d retransmits; %d messages verified", st.Dropped, st.Duplicated, st.Reordered, retx, a.Verified+b.Verified)
}

// A payload that differs from what its sender meant to send fails the run
// with an error naming mode, condition, size, iteration and the first
// differing byte, whichever side receives it, in every mode and condition;
// and the other side stops at once instead of waiting out its timeout.
func TestVerifyCatchesCorruption(t *testing.T) {
	const size, iter, at = 4096, 5, 1234
	for _, c := range combos {
		for _, side := range []string{"initiator", "responder"} {
			t.Run(c[0]+"-"+c[1]+"-"+side, func(t *testing.T) {
				a, b, _ := verifiedPair(t, size, 1024, impair.Config{})
				sender, receiver := a, b
				if side == "responder" {
					sender, receiver = b, a
				}
				sender.tamper = func(mode string, i int, src []byte) {
					if i == iter {
						src[at] ^= 0x40 // one bit, in the second packet
					}
				}
				_, err := Run(a, b, c[0], c[1], size, 2, 10)
				var mm *MismatchError
				if !errors.As(err, &mm) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("err = %v, want a MismatchError", err)
				}
				if mm.Mode != c[0] || mm.Condition != c[1] || mm.Size != size || mm.Iter != iter || mm.Offset != at ||
					mm.From != sender.D.Node() || mm.To != receiver.D.Node() || mm.Got^mm.Want != 0x40 {
					t.Fatalf("mismatch %+v, want %s %s %d bytes, iteration %d, byte %d, node %d to %d",
						mm, c[0], c[1], size, iter, at, sender.D.Node(), receiver.D.Node())
				}
				for _, w := range []string{c[0], c[1], "4096-byte", "iteration 5", "byte 1234"} {
					if !strings.Contains(err.Error(), w) {
						t.Fatalf("error %q does not name %q", err, w)
					}
				}
				if receiver.Verified != iter {
					t.Fatalf("receiver verified %d before the bad message, want %d", receiver.Verified, iter)
				}
			})
		}
	}
}

// A stale buffer is caught: a sender that sends message 7 from the buffer
// still holding its message 6 (the other of its two) ships bytes that were
// right one iteration ago, and verification refuses them.
func TestVerifyCatchesStaleBuffer(t *testing.T) {
	const size, iter = 512, 7
	for _, c := range combos {
		t.Run(c[0]+"-"+c[1], func(t *testing.T) {
			a, b, _ := verifiedPair(t, size, 1024, impair.Config{})
			a.tamper = func(mode string, i int, src []byte) {
				if i == iter {
					prev := a.srcOf(i - 1)
					copy(src, a.D.LinkMem()[prev:prev+size])
				}
			}
			_, err := Run(a, b, c[0], c[1], size, 2, 10)
			var mm *MismatchError
			if !errors.As(err, &mm) || mm.Iter != iter || mm.To != b.D.Node() {
				t.Fatalf("err = %v, want a mismatch of iteration %d at node %d", err, iter, b.D.Node())
			}
		})
	}
}

// Messages differ from iteration to iteration, size to size, sender to
// sender and mode to mode, so no earlier message passes for a later one.
func TestPatternDiffersPerMessage(t *testing.T) {
	const n = 8 // the smallest message
	p := newPattern(n)
	seen := map[string]string{}
	add := func(what, msg string) {
		if o, dup := seen[msg]; dup {
			t.Fatalf("%s sends the same bytes as %s", what, o)
		}
		seen[msg] = what
	}
	for iter := range 3000 {
		o := patternStart(1, ModePush, CondLinkMem, n, iter)
		add(fmt.Sprint("iteration ", iter), string(p[o:o+n]))
	}
	for _, from := range []uint16{1, 2} {
		for _, c := range combos {
			for _, size := range []int{8, 16} {
				o := patternStart(from, c[0], c[1], size, 3000)
				add(fmt.Sprint(c, " from node ", from, ", ", size, " bytes"), string(p[o:o+n]))
			}
		}
	}
	if !bytes.Equal(newPattern(n), p) {
		t.Fatal("the pattern differs between two computations: two processes would disagree")
	}
}
