// Package interrupt turns SIGINT and SIGTERM into a stop of the running
// measurement, so that a command tears down (unmaps link memory, closes
// its devices, removes its network namespace) only after the measurement
// has stopped touching them. Tearing down from the signal handler while
// the measuring goroutine still wrote its source buffer killed `pingpong
// --link udp --fault ... --pcap` runs stopped by timeout(1) with SIGSEGV.
//
// A command calls Catch once, registers what stops its measurement
// (OnStop: typically pingpong.Side.Stop), and returns normally once the
// measurement fails with the stop's error; main sees ErrInterrupted and
// exits 130. A measurement that does not stop within the grace, or a
// second signal, ends the process at once without unmapping anything:
// the kernel releases the mappings, and nothing touches them first.
package interrupt

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// ErrInterrupted is what a stopped measurement fails with.
var ErrInterrupted = errors.New("interrupted")

// Grace is how long a stopped measurement may take to return before the
// process exits without tearing down.
const Grace = 5 * time.Second

// sameSignal is how soon a second signal counts as the first delivered
// again rather than a user insisting.
const sameSignal = time.Second

// ExitCode is the exit status of an interrupted command (128 + SIGINT,
// as shells report it).
const ExitCode = 130

var (
	mu       sync.Mutex
	stops    []func(error)
	caught   bool
	signaled bool
	lastHard []func() // run before a forced exit: undo what outlives the process
)

// Catch starts turning SIGINT and SIGTERM into stops. It is idempotent.
func Catch() {
	mu.Lock()
	defer mu.Unlock()
	if caught {
		return
	}
	caught = true
	c := make(chan os.Signal, 2)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-c
		mu.Lock()
		signaled = true
		fs := append([]func(error){}, stops...)
		mu.Unlock()
		err := fmt.Errorf("%w by %v", ErrInterrupted, s)
		live := 0
		for _, f := range fs {
			if f != nil {
				f(err)
				live++
			}
		}
		if live == 0 { // nothing measures: nothing to wait for
			mu.Lock()
			hs := append([]func(){}, lastHard...)
			mu.Unlock()
			for i := len(hs) - 1; i >= 0; i-- {
				if hs[i] != nil {
					hs[i]()
				}
			}
			fmt.Fprintf(os.Stderr, "dimmnet: interrupted by %v with no measurement running: exiting\n", s)
			os.Exit(ExitCode)
		}
		first := time.Now()
		grace := time.After(Grace)
	wait:
		for {
			select {
			case s = <-c:
				// timeout(1) signals its child and then the child's
				// process group: one stop can arrive twice at once.
				if time.Since(first) < sameSignal {
					continue
				}
				fmt.Fprintf(os.Stderr, "dimmnet: %v again: exiting now\n", s)
				break wait
			case <-grace:
				fmt.Fprintf(os.Stderr, "dimmnet: the measurement did not stop within %v: exiting now\n", Grace)
				break wait
			}
		}
		mu.Lock()
		hs := append([]func(){}, lastHard...)
		mu.Unlock()
		for i := len(hs) - 1; i >= 0; i-- {
			if hs[i] != nil {
				hs[i]()
			}
		}
		os.Exit(ExitCode)
	}()
}

// OnStop registers f to be called with an ErrInterrupted error when a
// signal arrives (at once, if one already did). It returns a function
// that unregisters it.
func OnStop(f func(error)) (unregister func()) {
	mu.Lock()
	stops = append(stops, f)
	i := len(stops) - 1
	already := signaled
	mu.Unlock()
	if already {
		f(ErrInterrupted)
	}
	// (a nil entry is one unregistered)
	return func() {
		mu.Lock()
		stops[i] = nil
		mu.Unlock()
	}
}

// OnForcedExit registers f to run before a forced exit (a measurement
// that did not stop, a second signal): undo only what outlives the
// process (a network namespace), never unmap what a goroutine may still
// write. It returns a function that unregisters it.
func OnForcedExit(f func()) (unregister func()) {
	mu.Lock()
	lastHard = append(lastHard, f)
	i := len(lastHard) - 1
	mu.Unlock()
	return func() {
		mu.Lock()
		lastHard[i] = nil
		mu.Unlock()
	}
}

// Signaled reports whether a signal arrived.
func Signaled() bool {
	mu.Lock()
	defer mu.Unlock()
	return signaled
}
