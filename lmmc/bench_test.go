package lmmc

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev/transport"
)

func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every pattern on real devices")
	}
	for _, pattern := range Patterns {
		for _, pol := range Policies {
			if pattern == "paper" && pol != "lru" {
				continue
			}
			r, err := Bench(pol, pattern, 8, 3, BenchConfig{Rounds: 40})
			if err != nil {
				t.Fatalf("%s/%s: %v", pol, pattern, err)
			}
			if r.Misplaced != 0 {
				t.Fatalf("%s/%s: misplaced %d", pol, pattern, r.Misplaced)
			}
			j, _ := json.Marshal(r)
			t.Logf("%s", j)
		}
	}
}

// TestPollLetsWaitingGoroutinesRun: a receiver's poll loop must hand the
// processor to the goroutines that deliver what it waits for. With one
// processor, a goroutine made runnable before the poll runs at its first
// yield; a loop that never yields would poll until the runtime preempts
// it (10-20 ms, hundreds of thousands of polls).
func TestPollLetsWaitingGoroutinesRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var done atomic.Bool
	polls := 0
	go done.Store(true)
	if err := poll(func() (bool, error) { polls++; return done.Load(), nil }); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if polls > 100 {
		t.Errorf("the waiting goroutine ran after %d polls; want it to run at the first yield", polls)
	}
}

// TestBenchFourNodesPagesWithoutTimers runs the 4-node patterns, where
// every node pages towards two or three others at once, on the lossless
// in-memory link with 2 processors (this project's machines): four
// polling receivers, four management goroutines and the engine share
// them. The link loses nothing, so a retransmission timeout there means a
// sender waited 5 ms (the lossless RTO) for a receiver whose paging hold
// lasted that long: the goroutine that ends the hold (the management
// goroutine posting PAGE_DONE, the engine taking it) had no processor.
// Receivers polling without yielding starved them for the Go runtime's
// 10-20 ms preemption period, and one paging write in six met a timeout.
// A busy machine can also keep a thread of ours off its core that long;
// the timeouts are judged only when this process's threads waited less
// than the RTO in all for a processor (the kernel's run-queue delay).
func TestBenchFourNodesPagesWithoutTimers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, pattern := range []string{"neighbour", "alltoall"} {
		before, known := runQueueWait()
		r, err := Bench("lru", pattern, 8, 3, BenchConfig{Rounds: 40})
		if err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		after, _ := runQueueWait()
		if r.Faults == 0 || r.PagesCopied == 0 {
			t.Fatalf("%s: %d faults, %d pages copied: the pattern did not page", pattern, r.Faults, r.PagesCopied)
		}
		if r.Misplaced != 0 {
			t.Errorf("%s: %d writes misplaced", pattern, r.Misplaced)
		}
		switch waited := after - before; {
		case r.Timeouts == 0:
		case !known || waited >= transport.LosslessRTO:
			t.Logf("%s: %d retransmission timeouts in %d paging writes, not judged: our threads waited %v for a processor (known: %v)", pattern, r.Timeouts, r.Faults, time.Duration(waited), known)
		default:
			t.Errorf("%s: %d retransmission timeouts in %d paging writes on a lossless link, our threads waiting only %v for a processor; want none", pattern, r.Timeouts, r.Faults, time.Duration(waited))
		}
	}
}

// runQueueWait is the time this process's threads have spent runnable but
// waiting for a processor, in ns, from /proc/self/task/*/schedstat; ok is
// false where the kernel does not say.
func runQueueWait() (ns int64, ok bool) {
	files, _ := filepath.Glob("/proc/self/task/*/schedstat")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			return 0, false
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, false
		}
		ns += v
		ok = true
	}
	return ns, ok
}
