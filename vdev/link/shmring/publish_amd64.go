//go:build amd64 && !race

package shmring

// storeRelease stores v at addr with a plain MOV: on amd64 (TSO) every
// store before it is visible first, which is all a consumer needs, and
// unlike sync/atomic's XCHG it does not wait for the store buffer to
// drain, which on a frame's hand-off means waiting for the ownership of
// the lines the spinning consumer holds (a third of a streaming sender's
// time in `perf rate --link shm`). What it gives up, ordering against a
// later load (the sleep word), the consumer restores with Fence.
//
//go:noescape
func storeRelease(addr *uint64, v uint64)

// lazyPublish: this build publishes with storeRelease.
const lazyPublish = true
