//go:build !amd64 || race

package release

import "sync/atomic"

// Store is sync/atomic's store where no cheaper release store is written
// (other architectures), or where the race detector must see the hand-off
// (two ends in one process, in tests).
func Store(addr *uint64, v uint64) { atomic.StoreUint64(addr, v) }

// Plain: this build's Store is sequentially consistent; nothing that uses
// it needs a fence.
const Plain = false
