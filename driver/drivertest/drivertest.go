// Package drivertest gives the tests of the libraries on the driver a
// failure an in-process attachment never has: a doorbell that cannot be
// rung (the descriptor a daemon handed over is gone). A library must
// treat the command posted then (driver.ErrNotRung), and only a test that
// makes the doorbell fail at will can show that it does.
package drivertest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
)

// ErrDeadDoorbell is what a Bell's Kick returns while its doorbell is dead.
var ErrDeadDoorbell = errors.New("drivertest: doorbell dead")

// Bell is an Attachment whose doorbell the test kills and revives. It
// hides what the attachment it wraps is, so a driver opened on a Bell
// over an in-process device posts as a driver in another process does
// (it rings the sleeping device instead of running it to completion):
// the path on which a doorbell can fail.
type Bell struct {
	driver.Attachment
	dead   atomic.Bool
	failed atomic.Uint64
}

// NewBell wraps a, its doorbell alive.
func NewBell(a driver.Attachment) *Bell { return &Bell{Attachment: a} }

// Kill makes every Kick fail with ErrDeadDoorbell (dead) or ring again.
func (b *Bell) Kill(dead bool) { b.dead.Store(dead) }

// Kick rings the wrapped doorbell, or fails while the bell is dead.
func (b *Bell) Kick() error {
	if b.dead.Load() {
		b.failed.Add(1)
		return ErrDeadDoorbell
	}
	return b.Attachment.Kick()
}

// Failed is how many Kicks failed: a test checks it moved, or the
// operation it ran never met the dead doorbell (the device was awake).
func (b *Bell) Failed() uint64 { return b.failed.Load() }

// ErrAwake is WaitAsleep's timeout: the device never slept.
var ErrAwake = errors.New("drivertest: the device never slept")

// WaitAsleep waits up to timeout until d's device sleeps, when a post
// rings its doorbell.
func WaitAsleep(d *driver.Driver, timeout time.Duration) error {
	for end := time.Now().Add(timeout); d.Region().Load64(uapi.RegDevSleep) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			return fmt.Errorf("node %d after %v: %w", d.Node(), timeout, ErrAwake)
		}
	}
	return nil
}

// ErrHung is Ranks' error when a rank did not come back in time.
var ErrHung = errors.New("drivertest: the ranks hang")

// Ranks opens a driver on each attachment and runs body(rank, driver)
// for every rank on a goroutine of its own, closing the driver after; it
// returns the first error a rank returned (wrapped with its rank), or
// ErrHung when one did not return within limit. onFail, if not nil, runs
// once at the first failure, so that ranks waiting for the failed one can
// stop. After an error a rank may still run on its device: the caller
// must leave the devices mapped (a library's waits may have no deadline).
func Ranks(atts []driver.Attachment, limit time.Duration, onFail func(), body func(rank int, d *driver.Driver) error) error {
	type result struct {
		rank int
		err  error
	}
	results := make(chan result, len(atts))
	for r, a := range atts {
		go func() {
			res := result{rank: r}
			defer func() { results <- res }()
			d, err := driver.Open(a)
			if err != nil {
				res.err = err
				return
			}
			defer d.Close()
			res.err = body(r, d)
		}()
	}
	timeout := time.After(limit)
	for range atts {
		select {
		case res := <-results:
			if res.err != nil {
				if onFail != nil {
					onFail()
				}
				return fmt.Errorf("rank %d: %w", res.rank, res.err)
			}
		case <-timeout:
			return ErrHung
		}
	}
	return nil
}
