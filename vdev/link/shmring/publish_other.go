//go:build !amd64 || race

package shmring

import "sync/atomic"

// storeRelease is sync/atomic's store where no cheaper release store is
// written (other architectures), or where the race detector must see the
// hand-off (two ends of a ring in one process, in tests).
func storeRelease(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }

// lazyPublish: this build's publishes are sequentially consistent; its
// segments need no Fence.
const lazyPublish = false
