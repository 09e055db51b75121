package tests

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// One core: every process of a run pinned to CPU 0 with taskset, so each
// hand-off between processes waits for the scheduler. The runs are short
// (a few thousand round trips); the target for the default CLI
// runs is 4 minutes each.

const (
	oneCoreTrips    = 3000
	oneCoreDeadline = 90 * time.Second // hang guard of each pinned child
	oneCoreStall    = 30 * time.Second // a pinned child without a round trip for this long ends with an error
)

var pinned = []string{"taskset", "-c", "0"}

func needTaskset(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset on this machine")
	}
}

// runPinnedPair runs a ping and a pong soak-pair process of kind, both
// pinned to CPU 0, doing oneCoreTrips verified 8-byte round trips.
func runPinnedPair(t *testing.T, kind string, where func(int) string, base int, extra func() string) time.Duration {
	t.Helper()
	ping, pong := soakPairArgs(kind, where, base, 0, oneCoreTrips, oneCoreStall)
	procs := []*soakProc{
		startSoakProc(t, fmt.Sprintf("node %d (ping, CPU 0)", base), pinned, ping...),
		startSoakProc(t, fmt.Sprintf("node %d (pong, CPU 0)", base+1), pinned, pong...),
	}
	return runSoak(t, procs, oneCoreDeadline, extra)
}

// The in-process default ping-pong (two embedded devices on the mem link,
// PUSH and IPUSH, link memory and host copies) completes pinned to one
// CPU, every payload checked byte for byte (--verify).
func TestOneCoreInProcessPingPong(t *testing.T) {
	needTaskset(t)
	args := append(append([]string{}, pinned[1:]...), dimmnet(t), "pingpong", "--json", "-q", "--verify", "--max", "8", "--iters", strconv.Itoa(oneCoreTrips))
	c := exec.Command(pinned[0], args...)
	t0 := time.Now()
	out, err := runWithin(c, oneCoreDeadline)
	wall := time.Since(t0)
	if err != nil {
		t.Fatalf("taskset -c 0 dimmnet pingpong: %v\n%s", err, out)
	}
	var recs []pingpong.Result
	if err := json.Unmarshal(out, &recs); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4 (PUSH/IPUSH x linkmem/hostcopy at 8 bytes): %+v", len(recs), recs)
	}
	for _, r := range recs {
		if r.Size != 8 || r.Iters != oneCoreTrips || r.Verified < oneCoreTrips || r.RTTHalfUs <= 0 {
			t.Fatalf("record %+v", r)
		}
		t.Logf("%s %s 8 B: RTT/2 median %.2f µs", r.Mode, r.Condition, r.RTTHalfP50Us)
	}
	t.Logf("in-process ping-pong on CPU 0: 4 x %d round trips in %v", oneCoreTrips, wall.Round(time.Millisecond))
}

// Two processes, each embedding a device on the shared-memory link, both
// pinned to one CPU, exchange verified 8-byte messages.
func TestOneCoreShmPair(t *testing.T) {
	needTaskset(t)
	dir := filepath.Join(t.TempDir(), "rv")
	wall := runPinnedPair(t, "shm", func(int) string { return dir }, 1, nil)
	t.Logf("shm pair on CPU 0: %d round trips in %v (%.1f µs each)", oneCoreTrips, wall.Round(time.Millisecond), float64(wall.Microseconds())/oneCoreTrips)
}

// Two processes attached to a daemon, all three pinned to one CPU,
// exchange verified 8-byte messages.
func TestOneCoreAttachedPair(t *testing.T) {
	needTaskset(t)
	d := startDaemon(t, 2)
	if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(d.cmd.Process.Pid)).CombinedOutput(); err != nil {
		t.Fatalf("pin the daemon: %v\n%s", err, out)
	}
	wall := runPinnedPair(t, "attach", d.sock, 0, func() string { return "--- daemon stderr:\n" + d.stderr.String() })
	t.Logf("attached pair and daemon on CPU 0: %d round trips in %v (%.1f µs each)", oneCoreTrips, wall.Round(time.Millisecond), float64(wall.Microseconds())/oneCoreTrips)
}

// runWithin runs c and returns its stdout, killing it after limit.
func runWithin(c *exec.Cmd, limit time.Duration) ([]byte, error) {
	timer := time.AfterFunc(limit, func() { c.Process.Kill() })
	defer timer.Stop()
	out, err := c.Output()
	if !timer.Stop() && err != nil {
		err = fmt.Errorf("hang guard: killed after %v: %w", limit, err)
	}
	return out, err
}
