package shmring

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// membarrier(2) commands (linux/membarrier.h).
const (
	membarrierQuery                   = 0
	membarrierGlobalExpedited         = 1 << 1
	membarrierRegisterGlobalExpedited = 1 << 2
)

// registered reports whether this process asked the kernel to include it
// in other processes' expedited global barriers: a producer that publishes
// lazily must be, or a consumer's Fence would not reach it.
var registered = sync.OnceValue(func() bool {
	mask, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0)
	if errno != 0 || mask&(membarrierGlobalExpedited|membarrierRegisterGlobalExpedited) != membarrierGlobalExpedited|membarrierRegisterGlobalExpedited {
		return false
	}
	_, _, errno = unix.Syscall(unix.SYS_MEMBARRIER, membarrierRegisterGlobalExpedited, 0, 0)
	return errno == 0
})

// canFence reports whether this process can run Fence (the command may be
// filtered, or the kernel older than 4.16).
var canFence = sync.OnceValue(func() bool {
	mask, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierQuery, 0, 0)
	return errno == 0 && mask&membarrierGlobalExpedited != 0
})

// Fence is what a consumer runs between storing its sleep word and its
// last look at the rings before it sleeps, when a peer publishes lazily
// (Remote.Lazy). A lazy producer stores a slot word and then loads the
// sleep word with no barrier between them (the store may still sit in its
// core's store buffer when the load is answered); membarrier(2) makes
// every core running a registered process execute a full barrier. If that
// barrier comes after the producer's store, the store is visible to our
// look; if before, the producer's load comes after it and sees our sleep
// word: one of the two sides sees the other, as with fenced stores, and
// the cost moves from every frame to every sleep (a few µs).
func Fence() error {
	if _, _, errno := unix.Syscall(unix.SYS_MEMBARRIER, membarrierGlobalExpedited, 0, 0); errno != 0 {
		return fmt.Errorf("shmring: membarrier: %w", errno)
	}
	return nil
}
