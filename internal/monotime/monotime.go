// Package monotime reads the monotonic clock cheaply so that stage timestamps
// (the --breakdown trace) can be taken on every packet without a syscall.
// It is CLOCK_MONOTONIC in nanoseconds, the same clock in every process on a
// host, so timestamps taken by the device and by drivers in other processes
// can be subtracted.
package monotime

import _ "unsafe" // for go:linkname

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Now returns CLOCK_MONOTONIC in nanoseconds via the vDSO (tens of ns).
func Now() int64 { return nanotime() }
