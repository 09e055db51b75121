//go:build amd64 && !race

package uapi

// The owner stores (StoreOwn64, AddOwn64, WriteDescOwn) of this build
// are plain MOVs. On amd64 (TSO) a plain store is a release
// store: every store before it becomes visible first, which is all a
// reader that loads the word atomically and then reads what it guards
// needs. A locked instruction (sync/atomic's XCHG store, LOCK XADD) also
// drains the store buffer, and on a sender's hot path the buffer holds the
// store of a frame into a cache line the consumer's core holds: every
// locked instruction waits for that line to come back (docs/design.md,
// "Where a stream of 8-byte messages is bound"). The race detector's
// builds and other architectures use sync/atomic (ownstore_atomic.go).
func storeOwn64(p *uint64, v uint64) { *p = v }

func addOwn64(p *uint64, d uint64) uint64 {
	v := *p + d
	*p = v
	return v
}
