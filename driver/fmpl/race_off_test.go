//go:build !race

package fmpl_test

// raceEnabled: the race detector's instrumentation allocates on its own.
const raceEnabled = false
