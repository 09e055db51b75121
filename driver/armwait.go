package driver

import (
	"errors"
	"sync/atomic"

	"github.com/dimmnet/dimmnet/uapi"
)

// ErrNoInterruptFD is AddInterruptFD's answer for a device that does not
// run in this process (a daemon's, a guest's PCI function): its interrupt
// cannot be pointed at a descriptor of the caller's.
var ErrNoInterruptFD = errors.New("driver: the device cannot signal another descriptor (not in this process)")

// interruptAdder is a device in this process that signals extra eventfds
// when it interrupts (vdev's Device.AddInterrupt).
type interruptAdder interface {
	AddInterrupt(fd int)
	RemoveInterrupt(fd int)
}

// AddInterruptFD makes a device embedded in this process signal eventfd
// fd too whenever it interrupts a waiting driver (after publishing
// statuses while DRV_WAIT is set: ArmInterrupt). A library that hands
// its callers a descriptor to poll (libfabric's FI_WAIT_FD) gets the
// device to wake it directly, with no goroutine between. remove undoes
// it; once remove returns the device no longer writes fd.
func (d *Driver) AddInterruptFD(fd int) (remove func(), err error) {
	if lt, ok := d.t.(*localTransport); ok {
		if a, ok := lt.dev.(interruptAdder); ok {
			a.AddInterrupt(fd)
			return func() { a.RemoveInterrupt(fd) }, nil
		}
	}
	return nil, ErrNoInterruptFD
}

// armed counts the callers of ArmInterrupt not yet disarmed: DRV_WAIT
// stays 1 while any is, whatever WaitTail's own sleeps store.
type armCount struct{ n atomic.Int64 }

// ArmInterrupt sets DRV_WAIT for a caller about to wait outside the
// driver (on a descriptor AddInterruptFD gave the device), so the device
// interrupts after the next status it publishes. It reports false, and
// leaves nothing armed, when a status already waits: the caller polls
// instead of sleeping. DRV_WAIT is stored before the tail is loaded and
// the device stores the tail before it loads DRV_WAIT, so a status is
// either seen here or interrupts. The caller runs the device no longer
// (Drive(false)) if its engine is to serve it meanwhile; every true
// answer is undone by one DisarmInterrupt.
func (d *Driver) ArmInterrupt() bool {
	d.Flush()
	d.arms.n.Add(1)
	d.r.Store64(uapi.RegDrvWait, 1)
	if d.r.Load64(uapi.RegStatqTail) != d.statHead {
		d.DisarmInterrupt()
		return false
	}
	return true
}

// DisarmInterrupt undoes one ArmInterrupt: DRV_WAIT goes back to 0 when
// no arm and no sleep of WaitTail wants it.
func (d *Driver) DisarmInterrupt() {
	if d.arms.n.Add(-1) == 0 {
		d.clearDrvWait()
	}
}

// clearDrvWait stores DRV_WAIT 0 unless an arm holds it: an arm that
// came between the count's look and the store stores 1 after it, and
// the second look restores it.
func (d *Driver) clearDrvWait() {
	if d.arms.n.Load() > 0 {
		return
	}
	d.r.Store64(uapi.RegDrvWait, 0)
	if d.arms.n.Load() > 0 {
		d.r.Store64(uapi.RegDrvWait, 1)
	}
}
