//go:build race

package mpbench

// raceEnabled: under the race detector every rank process runs several
// times slower, so the sweep's process half keeps its ends and a middle.
const raceEnabled = true
