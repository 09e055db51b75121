//go:build !amd64 || race

package vdev

import "sync/atomic"

// release gives the flag back: sync/atomic's store where a plain store is
// not a release store (other architectures), or where the race detector
// must see the hand-off between the passes.
func (f *runFlag) release() { atomic.StoreUint32(&f.v, 0) }
