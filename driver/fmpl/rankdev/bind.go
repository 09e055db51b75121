package rankdev

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Ranks of one host that fit its cores are bound one to a core, as MPI
// launchers bind them (Open MPI binds to cores for np <= 2). Unbound, two
// ranks that spin while they wait fell into whole runs 10-20x slower
// whenever another task held one of two cores: the scheduler put both
// ranks on the other core and, their load balanced against that task's,
// never moved them apart again (wake-ups go to the waker's core when no
// core is idle), so every message waited for the spinning rank's time
// slice to end. A perf trace of such a run had every thread of both ranks
// on one CPU; windows of 5 ms where both ranks ran only on one CPU had
// median waits of 381-427 µs, the others 7 µs (docs/fmpl.md). A rank
// bound alone to a core that another task shares loses only the waits
// that fall in that task's slices: the median stays a round trip.

// bindCPU is the CPU the rank with index local among n on this host
// binds to: the local-th of the CPUs this process may use. ok is false
// when the ranks do not fit, n is unknown or the rank is alone (nothing
// to keep apart from, and a bound rank cannot leave a busy core), the
// process may use one CPU (a launcher bound it already, or the host has
// one), or DIMMNET_BIND=0.
func bindCPU(local, n int, allowed *unix.CPUSet) (cpu int, ok bool) {
	if os.Getenv("DIMMNET_BIND") == "0" || n < 2 || local < 0 || local >= n || n > allowed.Count() {
		return 0, false
	}
	for c, i := 0, 0; c < len(allowed)*64; c++ {
		if !allowed.IsSet(c) {
			continue
		}
		if i == local {
			return c, true
		}
		i++
	}
	return 0, false
}

// binding is a process bound to one CPU: what it was allowed before, and
// its GOMAXPROCS before (0: not changed), to restore on Close.
type binding struct {
	prev      unix.CPUSet
	cpu       int
	prevProcs int
}

// bind pins every thread of this process to the CPU bindCPU chooses for
// rank local of n (nil when it chooses none). Threads the Go runtime
// starts later inherit the mask of the thread that starts them.
//
// A bound rank also runs one thread of Go code (GOMAXPROCS=1, unless the
// environment sets it): with a second processor the runtime wakes a
// thread to look for work whenever a goroutine becomes runnable, and on
// the rank's one core that thread takes turns with the waiting one (the
// shared-memory 8-byte raw ping-pong went from 0.7-1.1 µs to 30-70 µs
// bound with two; 0.7-1.2 with one).
func bind(local, n int) (*binding, error) {
	var prev unix.CPUSet
	if err := unix.SchedGetaffinity(0, &prev); err != nil {
		return nil, fmt.Errorf("rankdev: CPU affinity: %w", err)
	}
	cpu, ok := bindCPU(local, n, &prev)
	if !ok {
		return nil, nil
	}
	var one unix.CPUSet
	one.Set(cpu)
	if err := setAllThreads(&one); err != nil {
		setAllThreads(&prev)
		return nil, fmt.Errorf("rankdev: bind local rank %d of %d to CPU %d: %w", local, n, cpu, err)
	}
	b := &binding{prev: prev, cpu: cpu}
	if os.Getenv("GOMAXPROCS") == "" {
		b.prevProcs = runtime.GOMAXPROCS(1)
	}
	return b, nil
}

// restore gives the process back the CPUs it had before bind.
func (b *binding) restore() error {
	if b == nil {
		return nil
	}
	if b.prevProcs > 0 {
		runtime.GOMAXPROCS(b.prevProcs)
	}
	if err := setAllThreads(&b.prev); err != nil {
		return fmt.Errorf("rankdev: restore CPU affinity: %w", err)
	}
	return nil
}

// setAllThreads sets the affinity of every thread of the process, going
// over the list again until it sees no thread it has not set (the runtime
// may start one meanwhile, inheriting its creator's old mask).
func setAllThreads(set *unix.CPUSet) error {
	done := map[int]bool{}
	for {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := false
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			fresh = true
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
			done[tid] = true
		}
		if !fresh {
			return nil
		}
	}
}
