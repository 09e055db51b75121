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
