package tests

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// procCPU returns the user plus system CPU time that process pid (all its
// threads) has used so far, from /proc/PID/stat.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from 3 (state) start after its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')' in %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	// utime and stime are fields 14 and 15 of the line, 11 and 12 here.
	var ticks uint64
	for _, x := range f[11:13] {
		v, err := strconv.ParseUint(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %v", pid, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// A daemon serving 64 devices with no traffic does not spin: its CPU time
// over 10 s, measured from /proc, stays far below a core. The issue's
// target is under 1% of one core; this test asserts only a bound that
// catches spinning (5%: it measures 0.5%) and logs the figure.
func TestIdleDaemonCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("measures an idle daemon for 10 s")
	}
	const (
		settle  = time.Second
		measure = 10 * time.Second
		limit   = 5.0 // % of one core
	)
	d := startDaemon(t, 64)
	pid := d.cmd.Process.Pid
	time.Sleep(settle) // past start-up's work
	c0, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	w0 := time.Now()
	time.Sleep(measure)
	c1, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(w0)
	pct := 100 * float64(c1-c0) / float64(wall)
	t.Logf("idle daemon, 64 nodes: %v CPU in %v = %.2f%% of one core (target < 1%%)", c1-c0, wall.Round(time.Millisecond), pct)
	if pct >= limit {
		t.Fatalf("idle daemon with 64 nodes uses %.1f%% of one core (%v CPU in %v): it spins", pct, c1-c0, wall.Round(time.Millisecond))
	}
}
