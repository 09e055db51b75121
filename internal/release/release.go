// Package release is the one release store of the module's shared-memory
// hand-offs: a word stored after the data it publishes, seen by a reader
// that loads it with sync/atomic and then reads the data.
//
// On amd64 Store is a plain MOV: under TSO every store before it becomes
// visible first, which is all such a reader needs, and unlike sync/atomic's
// store (XCHG, a locked instruction) it does not wait for the store
// buffer to drain, which on a hand-off means waiting for the cache line
// the spinning reader holds to come back before the writer goes on. What
// it gives up is ordering against a later load: a protocol that stores a
// word and then loads another (a ring's sleep word) must restore that
// with a fence (shmring.Fence). The shared-memory ring publishes its
// slots with it, and the raw word ping-pong the device is judged against
// (driver/pingpong) publishes its word the same way, so the floor is
// what the hardware does, not what a locked store adds to it.
//
// TSO covers ordinary stores only: non-temporal ones (MOVNTDQ) are weakly
// ordered and may become visible after a later plain store. Go's memmove
// copies regions of 1 MiB and more with non-temporal stores and ends
// those loops with SFENCE (runtime/memmove_amd64.s), so a copy() before
// Store is visible first; a copy of one's own with non-temporal stores
// would need its own SFENCE.
//
// Other architectures, and every build with the race detector (which
// must see the hand-off between two goroutines of one process), use
// sync/atomic's store (Plain is false there).
package release
