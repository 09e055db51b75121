package vdev

import (
	"errors"
	"fmt"
	"runtime/debug"
)

// Region faults: a SIGBUS on a device's region. ("Fault" in this package
// means this and nothing else; faults injected into a link are the link's
// impairments, and LMMC's page faults are the driver's.) A daemon hands every client its device's region
// read-write; a region that is a file (serve --shm-dir) cannot be sealed,
// so a client may shrink it, and the device's next touch of a lost page is
// a SIGBUS. Every goroutine of this package that touches regions runs with
// runtime/debug.SetPanicOnFault, which turns that signal into a panic whose
// value carries the faulting address: the address names the device (the
// region it lies in), so one client's resize fails its own device and the
// engine goes on serving the others. A fault outside every region is a bug
// and still crashes the process.
//
// Poll (drive.go) runs a device on its driver's goroutine and catches
// nothing: a device driven in its own process has a sealed memfd region
// (Config.ShmPath empty) that nobody else can resize, and a check on every
// pass of the hot path would buy nothing there.
//
// Under the race detector atomic loads and stores run in its C runtime on
// the system stack, where a fault is fatal whatever SetPanicOnFault says:
// tests that shrink a region run a binary built without -race.

// ErrRegionFault reports a device failed by a fault in its region: a
// client resized the region's file under the daemon.
var ErrRegionFault = errors.New("fault in the device's region (its file was resized under the daemon)")

// Failed reports why the device failed (wrapping ErrRegionFault), or nil
// while it serves. A failed device is never touched again.
func (d *Device) Failed() error {
	if p := d.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// markFailed records the device's failure (the first one wins) and tells its
// engine, which stops serving it at its next pass.
func (d *Device) markFailed(err error) {
	if !d.failure.CompareAndSwap(nil, &err) {
		return
	}
	if e := d.eng; e != nil {
		e.failures.Add(1)
		e.kick()
	}
}

// regionFaultAt returns the failure a recovered panic value r means for d: an
// error wrapping ErrRegionFault if r is a memory fault in d's region, nil
// for anything else.
func (d *Device) regionFaultAt(r any) error {
	f, ok := r.(interface{ Addr() uintptr })
	if !ok || d.shm == nil || !d.shm.Contains(f.Addr()) {
		return nil
	}
	where := "memfd"
	if d.shm.Path != "" {
		where = d.shm.Path
	}
	return fmt.Errorf("node %d: %w: address %#x of region %s", d.node, ErrRegionFault, f.Addr(), where)
}

// guard runs f, which touches d's region, on the calling goroutine with a
// fault in that region caught: d is then failed and guard returns why. A
// device already failed is not touched.
func (d *Device) guard(f func()) (err error) {
	if err := d.Failed(); err != nil {
		return err
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			if err = d.regionFaultAt(r); err == nil {
				panic(r)
			}
			d.markFailed(err)
		}
	}()
	f()
	return nil
}

// SetRegionFaultHandler makes the engine call f, on its own goroutine and once
// per device, when a fault in a device's region fails it: the daemon logs
// it and tells the device's clients. f must not block.
func (e *Engine) SetRegionFaultHandler(f func(d *Device, err error)) { e.onRegionFault.Store(&f) }

// recoverRegionFault ends an engine pass a fault in a device's region broke
// off: the device is failed (the next pass drops it) and the engine goes
// on. Anything else is re-raised.
func (e *Engine) recoverRegionFault() {
	r := recover()
	if r == nil {
		return
	}
	for _, d := range e.devs {
		if err := d.regionFaultAt(r); err != nil {
			d.markFailed(err)
			e.sleeping.Store(false)
			return
		}
	}
	panic(r)
}

// prune drops failed devices from the engine's passes, reports each to
// the fault handler and closes its port.
func (e *Engine) prune() {
	kept := e.devs[:0:0]
	for _, d := range e.devs {
		err := d.Failed()
		if err == nil {
			kept = append(kept, d)
			continue
		}
		if f := e.onRegionFault.Load(); f != nil {
			(*f)(d, err)
		}
		d.closePort() // frames for it are refused from now on, not queued
	}
	e.devs = kept
}
