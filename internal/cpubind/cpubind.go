// Package cpubind keeps the processes of one measurement or job that
// spin while they wait on CPUs of their own, as MPI launchers bind ranks
// to cores (Open MPI binds to cores for np <= 2).
//
// Unbound, two processes that spin while they wait fell into whole runs
// 10-20x slower whenever another task held one of two cores: the
// scheduler put both on the other core and, their load balanced against
// that task's, never moved them apart again (wake-ups go to the waker's
// core when no core is idle), so every message waited for the spinning
// process's time slice to end. A perf trace of such an FMPL run had every
// thread of both ranks on one CPU; windows of 5 ms where both ranks ran
// only on one CPU had median waits of 381-427 µs, the others 7 µs
// (docs/fmpl.md); `dimmnet pingpong --link shm` saw the same (medians of
// 142-438 µs against 0.7-0.9). A process bound alone to a core that
// another task shares loses only the waits that fall in that task's
// slices: the median stays a round trip.
//
// Binding is for processes that fit the CPUs they may use: with fewer
// CPUs than processes the scheduler has to share cores out anyway, and a
// process bound to a busy core could not leave it. DIMMNET_BIND=0 turns
// every binding of this package off.
package cpubind

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// EnvBind is the environment variable that, set to 0, turns binding off
// for every process that reads it (ranks started by mpirun, benchmarks).
const EnvBind = "DIMMNET_BIND"

// ErrNoSuchCPU reports a CPU to bind to that the process may not use.
var ErrNoSuchCPU = errors.New("cpubind: CPU not among those this process may use")

// Allowed is the set of CPUs this thread may run on (its affinity, as
// taskset or a launcher set it): the set the process's children inherit.
func Allowed() (unix.CPUSet, error) {
	var s unix.CPUSet
	if err := unix.SchedGetaffinity(0, &s); err != nil {
		return s, fmt.Errorf("cpubind: CPU affinity: %w", err)
	}
	return s, nil
}

// CPU is the CPU the process with index local among n processes of one
// host binds to: the local-th of the allowed CPUs. ok is false when the
// processes do not fit, n is unknown or the process is alone (nothing to
// keep apart from, and a bound process cannot leave a busy core), only
// one CPU is allowed (a launcher bound it already, or the host has one),
// or DIMMNET_BIND=0.
func CPU(local, n int, allowed *unix.CPUSet) (cpu int, ok bool) {
	if os.Getenv(EnvBind) == "0" || n < 2 || local < 0 || local >= n || n > allowed.Count() {
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

// CPUs is the CPU of each of n processes (CPU of local 0, 1, ...), or nil
// when they are not to be bound (see CPU).
func CPUs(n int, allowed *unix.CPUSet) []int {
	var cpus []int
	for local := range n {
		c, ok := CPU(local, n, allowed)
		if !ok {
			return nil
		}
		cpus = append(cpus, c)
	}
	return cpus
}

// Binding is this process bound to one CPU: what it was allowed before,
// and its GOMAXPROCS before (0: not changed), which Restore gives back.
type Binding struct {
	prev      unix.CPUSet
	cpu       int
	prevProcs int
}

// Bind pins every thread of this process to the CPU that CPU chooses for
// process local of n, among the CPUs it may use now; nil (and no error)
// when it chooses none.
func Bind(local, n int) (*Binding, error) {
	allowed, err := Allowed()
	if err != nil {
		return nil, err
	}
	cpu, ok := CPU(local, n, &allowed)
	if !ok {
		return nil, nil
	}
	b, err := Pin(cpu)
	if err != nil {
		return nil, fmt.Errorf("local process %d of %d: %w", local, n, err)
	}
	return b, nil
}

// Pin binds every thread of this process to cpu. Threads the Go runtime
// starts later inherit the mask of the thread that starts them, and so
// do children.
//
// A pinned process also runs one thread of Go code (GOMAXPROCS=1, unless
// the environment sets it): with a second processor the runtime wakes a
// thread to look for work whenever a goroutine becomes runnable, and on
// the process's one core that thread takes turns with the waiting one
// (the shared-memory 8-byte raw ping-pong went from 0.7-1.1 µs to 30-70
// µs bound with two; 0.7-1.2 with one).
func Pin(cpu int) (*Binding, error) {
	prev, err := Allowed()
	if err != nil {
		return nil, err
	}
	if cpu < 0 || cpu >= len(prev)*64 || !prev.IsSet(cpu) {
		return nil, fmt.Errorf("cpubind: pin to CPU %d: %w", cpu, ErrNoSuchCPU)
	}
	var one unix.CPUSet
	one.Set(cpu)
	if err := setAllThreads(&one); err != nil {
		setAllThreads(&prev)
		return nil, fmt.Errorf("cpubind: pin to CPU %d: %w", cpu, err)
	}
	b := &Binding{prev: prev, cpu: cpu}
	if os.Getenv("GOMAXPROCS") == "" {
		b.prevProcs = runtime.GOMAXPROCS(1)
	}
	return b, nil
}

// CPU is the CPU the process is bound to.
func (b *Binding) CPU() int { return b.cpu }

// Restore gives the process back the CPUs and GOMAXPROCS it had before
// it was bound. A nil Binding (nothing was bound) restores nothing.
func (b *Binding) Restore() error {
	if b == nil {
		return nil
	}
	// The CPUs first: the runtime's default GOMAXPROCS is read from them.
	if err := setAllThreads(&b.prev); err != nil {
		return fmt.Errorf("cpubind: restore CPU affinity: %w", err)
	}
	switch {
	case b.prevProcs > 0 && os.Getenv("GOMAXPROCS") == "":
		// The runtime's own setting, which follows the CPUs this
		// process may use; setting a number would freeze it.
		runtime.SetDefaultGOMAXPROCS()
	case b.prevProcs > 0:
		runtime.GOMAXPROCS(b.prevProcs)
	}
	return nil
}

// Start starts cmd bound to cpu from its first instruction: it forks
// from a thread of this process bound to cpu for the moment, so the
// child and every thread it starts inherit that one CPU, and a Go child
// sizes its GOMAXPROCS to it. This process's own CPUs are not touched: a
// parent that binds only its children, or binds itself after starting
// them, leaves no mask behind for the next child to inherit.
//
// A child that must see every allowed CPU before it binds (a driver
// judges at Open whether it shares one core with its peers) should bind
// itself instead (Bind, Pin).
func Start(cmd *exec.Cmd, cpu int) error {
	allowed, err := Allowed()
	if err != nil {
		return err
	}
	if cpu < 0 || cpu >= len(allowed)*64 || !allowed.IsSet(cpu) {
		return fmt.Errorf("cpubind: start %s on CPU %d: %w", cmd.Path, cpu, ErrNoSuchCPU)
	}
	errc := make(chan error, 1)
	go func() {
		// The thread goes back to the runtime's pool afterwards, its
		// mask restored. It must not exit instead (a goroutine ending
		// locked): a child's Pdeathsig is sent when the thread that
		// forked it exits.
		runtime.LockOSThread()
		prev, err := Allowed()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("cpubind: start %s on CPU %d: %w", cmd.Path, cpu, err)
			return
		}
		startErr := cmd.Start()
		if startErr != nil {
			startErr = fmt.Errorf("cpubind: start %s on CPU %d: %w", cmd.Path, cpu, startErr)
		}
		if err := unix.SchedSetaffinity(0, &prev); err != nil {
			// The pool must not get a thread bound to one CPU, and the
			// child must keep its parent thread: park here for good.
			errc <- errors.Join(startErr, fmt.Errorf("cpubind: restore the starting thread's CPUs: %w", err))
			select {}
		}
		runtime.UnlockOSThread()
		errc <- startErr
	}()
	return <-errc
}

// ThreadSets is the CPU affinity of every thread of process pid, by
// thread id: what shows a binding from outside (a thread that exits
// meanwhile is left out), for tests and reports.
func ThreadSets(pid int) (map[int]unix.CPUSet, error) {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, fmt.Errorf("cpubind: threads of process %d: %w", pid, err)
	}
	sets := map[int]unix.CPUSet{}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var s unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &s); err != nil {
			continue // the thread exited
		}
		sets[tid] = s
	}
	return sets, nil
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
