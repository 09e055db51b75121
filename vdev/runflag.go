package vdev

import "sync/atomic"

// runFlag is the device's "a pass runs it now" flag: one goroutine at a
// time runs the device's engines (the engine's loop, a driver's Poll or
// PollPost, a hand-back's look). Taking it is a compare-and-swap, a full
// barrier on every architecture, which the hand-offs that follow a
// publish rely on (a post's pass that finds the device held looks at
// DEV_SLEEP after it). Giving it back is a release store (release, in
// runflag_tso.go and runflag_atomic.go): only its holder stores it, and
// on amd64 a plain store is ordered after every store the pass made,
// where sync/atomic's XCHG would wait for the store buffer to drain, and
// with it for the line of the frame the pass just stored into a consumer's
// slot (docs/design.md, "Where a stream of 8-byte messages is bound").
type runFlag struct{ v uint32 }

// acquire takes the flag if nobody holds it.
func (f *runFlag) acquire() bool { return atomic.CompareAndSwapUint32(&f.v, 0, 1) }
