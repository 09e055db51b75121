// Package loadavg reads the host's load average, which every figure this
// project prints is reported with: on a small machine shared with other
// work, absolute times mean little without it.
package loadavg

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// String is "load average a b c on N cores" from /proc/loadavg, or "load
// average unknown on N cores" where the kernel does not say.
func String() string {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 3 {
		return fmt.Sprintf("load average unknown on %d cores", runtime.NumCPU())
	}
	return fmt.Sprintf("load average %s %s %s on %d cores", f[0], f[1], f[2], runtime.NumCPU())
}
