// Package loadavg reads the host's load average, which every figure this
// project prints is reported with: on a small machine shared with other
// work, absolute times mean little without it. It is the one reader of
// /proc/loadavg: provenance stamps --json records with Read's figures.
package loadavg

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// ErrFormat reports a load average line that is not three numbers first.
var ErrFormat = errors.New("loadavg: not a load average line")

// path is the kernel's file.
const path = "/proc/loadavg"

// Read is the 1, 5 and 15 minute load averages.
func Read() ([3]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [3]float64{}, fmt.Errorf("loadavg: %w", err)
	}
	return Parse(string(b))
}

// Parse reads the three averages at the start of a /proc/loadavg line.
func Parse(s string) ([3]float64, error) {
	var la [3]float64
	f := strings.Fields(s)
	if len(f) < 3 {
		return la, fmt.Errorf("%w: %q has fewer than 3 fields", ErrFormat, s)
	}
	for i := range la {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return la, fmt.Errorf("%w: %q: %v", ErrFormat, s, err)
		}
		la[i] = v
	}
	return la, nil
}

// String is "load average a b c on N cores", or "load average unknown on
// N cores" where the kernel does not say.
func String() string {
	la, err := Read()
	if err != nil {
		return fmt.Sprintf("load average unknown on %d cores", runtime.NumCPU())
	}
	return fmt.Sprintf("load average %.2f %.2f %.2f on %d cores", la[0], la[1], la[2], runtime.NumCPU())
}
