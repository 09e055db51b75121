//go:build dimmnet_ofi && !race

package main

// raceEnabled says whether the race detector is on (its instrumentation
// allocates, so allocation counts are checked without it).
const raceEnabled = false
