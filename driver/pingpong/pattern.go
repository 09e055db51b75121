package pingpong

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// What a verified run (Side.Verify) sends: every message is a window of
// one pseudo-random pattern, at a start chosen by the sender's node, the
// mode, the condition, the size and the iteration. A payload left over
// from an earlier message, delivered to the wrong place, or placed only in
// part then differs from what the receiver expects, which a fixed pattern
// per side would not show. Both sides compute the same pattern, so the two
// processes (or guests) of a run agree on it without talking.

// patternSpan is the number of starts: a prime, so that the starts of one
// sender's iterations i and j of a measurement coincide only when i and j
// are a multiple of patternSpan apart (more round trips than a run makes).
const patternSpan = 65521

// patternStride steps the start from one iteration to the next; any value
// in 1..patternSpan-1 visits every start before repeating.
const patternStride = 40503

// newPattern returns the pattern for messages up to maxSize bytes: a
// splitmix64 stream of maxSize+patternSpan bytes, the same in every process.
func newPattern(maxSize int) []byte {
	p := make([]byte, (maxSize+patternSpan+7)&^7)
	x := uint64(0x64696d6d6e6574) // "dimmnet"
	for i := 0; i < len(p); i += 8 {
		x += 0x9e3779b97f4a7c15
		binary.LittleEndian.PutUint64(p[i:], mix64(x))
	}
	return p[:maxSize+patternSpan]
}

// mix64 is splitmix64's finaliser: every input bit moves every output bit.
func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// patternStart is where in the pattern the message from node from, of the
// given mode, condition and size, in iteration iter (warm-up included)
// begins.
func patternStart(from uint16, mode, cond string, size, iter int) int {
	k := uint64(from)<<40 | uint64(size)<<2
	if mode == ModeIPush {
		k |= 1
	}
	if cond == CondHostCopy {
		k |= 2
	}
	base := mix64(k) % patternSpan
	return int((base + uint64(iter)%patternSpan*patternStride) % patternSpan)
}

// MismatchError is a verified payload that differs from what its sender
// wrote: which message, and the first byte that differs. It wraps
// ErrCorrupt.
type MismatchError struct {
	Mode, Condition string
	Size            int
	Iter            int    // the message's iteration, warm-up included, from 0
	From, To        uint16 // sender's and receiver's nodes
	Offset          int    // first differing byte
	Got, Want       byte
}

// Error names the message (mode, condition, size, iteration, nodes) and
// the first differing byte, so a failed run says where to look.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("verify: %s %s %d-byte message, iteration %d, node %d to node %d: first difference at byte %d (got %#04x, want %#04x): %v",
		e.Mode, e.Condition, e.Size, e.Iter, e.From, e.To, e.Offset, e.Got, e.Want, ErrCorrupt)
}

// Unwrap lets errors.Is(err, ErrCorrupt) find a mismatch.
func (e *MismatchError) Unwrap() error { return ErrCorrupt }

// compare returns nil when got equals want, else a MismatchError with the
// first differing byte (the caller names the message).
func compare(got, want []byte) *MismatchError {
	if bytes.Equal(got, want) {
		return nil
	}
	for i := range got {
		if got[i] != want[i] {
			return &MismatchError{Offset: i, Got: got[i], Want: want[i]}
		}
	}
	return nil
}
