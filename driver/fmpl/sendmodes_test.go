package fmpl_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver/fmpl"
)

// Two ranks that both send first: without a timeout (synchronous mode)
// neither send can complete, since each waits for the other's receive;
// with one, both sends spool and the receives that follow complete.
var sendModeRanks = map[string]rank{
	"deadlock": {noFinalize: true, run: func(w *fmpl.World) error {
		peer := 1 - w.Rank()
		b := make([]byte, 64)
		done := make(chan error, 1)
		go func() { done <- w.Send(b, peer, 0, fmpl.CommWorld) }() // the World is this goroutine's from here on
		// A bounded wait: a send that completes means no deadlock. Not a
		// timing assertion: a deadlocked send never completes, however
		// slow the machine.
		select {
		case err := <-done:
			return fmt.Errorf("send completed (%v) although both ranks send first", err)
		case <-time.After(500 * time.Millisecond):
			fmt.Println("deadlocked")
			return nil
		}
	}},
	"buffered": {run: func(w *fmpl.World) error {
		peer := 1 - w.Rank()
		spool, err := w.Alloc(4096)
		if err != nil {
			return err
		}
		if err := w.SendBufSet(spool, 5*time.Millisecond); err != nil {
			return err
		}
		for round := 0; round < 3; round++ {
			b := make([]byte, 300)
			pattern(b, 10*w.Rank()+round)
			if err := w.Send(b, peer, round, fmpl.CommWorld); err != nil {
				return err
			}
			pattern(b, 99) // the spool holds a copy: the caller may reuse its buffer
			r := make([]byte, 300)
			m, err := w.Recv(r, peer, round, fmpl.CommWorld)
			if err != nil {
				return err
			}
			if err := checkPattern(r[:m.Size], 10*peer+round); err != nil {
				return err
			}
		}
		// Timeout 0 is buffered mode: the send returns before the
		// receive exists, and SendBufCheck reports it spooled until then.
		if err := w.SendBufSet(spool, 0); err != nil {
			return err
		}
		if w.Rank() == 0 {
			b := make([]byte, 40)
			pattern(b, 7)
			if err := w.Send(b, 1, 9, fmpl.CommWorld); err != nil {
				return err
			}
			// At least this send is spooled (rank 1 posts index 9 only
			// once told); a standard send of the rounds above may be too,
			// when a loaded machine kept its header past the 5 ms timeout.
			if _, n, err := w.SendBufCheck(); err != nil || n < 1 {
				return fmt.Errorf("after a buffered send: %d spooled, %v", n, err)
			}
			if err := w.Send(b[:8], 1, 10, fmpl.CommWorld); err != nil { // tells rank 1 to receive
				return err
			}
		} else {
			r := make([]byte, 40)
			if _, err := w.Recv(r[:8], 0, 10, fmpl.CommWorld); err != nil {
				return err
			}
			m, err := w.Recv(r, 0, 9, fmpl.CommWorld)
			if err != nil {
				return err
			}
			if err := checkPattern(r[:m.Size], 7); err != nil {
				return err
			}
		}
		return nil
	}},
}

func TestSendModesDeadlockWithoutTimeout(t *testing.T) {
	mustContain(t, runRanks(t, 2, "deadlock"), "deadlocked")
}

func TestSendModesBufferedCompletes(t *testing.T) { mustContain(t, runRanks(t, 2, "buffered"), "ok") }
