//go:build !amd64 || race

package uapi

import "sync/atomic"

// The owner stores of this build are sync/atomic's, where no
// cheaper release store is written (other architectures) or where the
// race detector must see the hand-off (ownstore_tso.go says why amd64's
// are plain).
func storeOwn64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }

func addOwn64(p *uint64, d uint64) uint64 { return atomic.AddUint64(p, d) }
