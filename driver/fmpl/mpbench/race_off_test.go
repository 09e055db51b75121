//go:build !race

package mpbench

const raceEnabled = false
