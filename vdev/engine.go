package vdev

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/eventfd"
	"golang.org/x/sys/unix"
)

// Polling budget before the engine sleeps: spin (yielding the processor now
// and then, so a driver on the same core still runs) for about this long.
const (
	spinNs       = 50_000     // spin this long after the last work
	stallSleepNs = 50_000     // sleep this long when only a driver can unblock us
	aliveNs      = 10_000_000 // advance ALIVE this often
)

// Engine runs the command and receive engines of a set of devices on one
// goroutine: with fewer cores than pollers, one poller per process is what
// keeps the drivers' cores free (docs/design.md).
type Engine struct {
	devs     []*Device
	wake     *eventfd.FD
	sleeping atomic.Bool
	stop     atomic.Bool
	done     chan struct{}
	once     sync.Once
}

// NewEngine makes an engine for devs; each must have a port attached.
func NewEngine(devs ...*Device) (*Engine, error) {
	w, err := eventfd.New()
	if err != nil {
		return nil, err
	}
	e := &Engine{devs: devs, wake: w, done: make(chan struct{})}
	for _, d := range devs {
		if d.port == nil {
			w.Close()
			return nil, errors.New("vdev: device has no port attached")
		}
		d.port.SetNotify(e.notify)
	}
	return e, nil
}

func (e *Engine) notify() {
	if e.sleeping.Load() {
		e.wake.Signal()
	}
}

// Start runs the engine on its own goroutine.
func (e *Engine) Start() { go e.run() }

// Stop halts the engine and waits for it.
func (e *Engine) Stop() {
	e.once.Do(func() {
		e.stop.Store(true)
		e.wake.Signal()
		<-e.done
		e.wake.Close()
	})
}

// step runs one pass of a device's engines; it reports work done.
func (d *Device) step(now *int64) bool {
	d.trace = d.r.Load64(uapi.RegTraceCtrl) == 1
	busy := d.pollRx()
	if d.timers > 0 {
		if *now == 0 {
			*now = monotime.Now()
		}
		busy = d.retransmit(*now) || busy
	}
	if len(d.peers) > 0 {
		busy = d.serveResponses() || busy
	}
	busy = d.pollCommands() || busy
	busy = d.serviceAMTAT() || busy
	if d.irqWanted {
		d.interrupt()
	}
	return busy
}

// stalled reports work only a driver (consuming statuses or ring data) or
// a busy link can unblock: the engine then sleeps briefly instead of for good.
func (d *Device) stalled() bool {
	return d.held != nil || len(d.compQ) > 0 || d.cur != nil || d.timers > 0 || d.hasResp()
}

func (d *Device) hasResp() bool {
	for _, p := range d.peers {
		if len(p.resp) > 0 {
			return true
		}
	}
	return false
}

// pending reports work visible without doing it (the re-check before sleep).
func (d *Device) pending() bool {
	return d.r.Load64(uapi.RegCmdqTail) != d.cmdHead || d.r.Load64(uapi.RegAMTATCtrl) != d.amtatSeq
}

func (e *Engine) run() {
	defer close(e.done)
	fds := []unix.PollFd{{Fd: int32(e.wake.Int()), Events: unix.POLLIN}}
	for _, d := range e.devs {
		fds = append(fds, unix.PollFd{Fd: int32(d.doorbell.Int()), Events: unix.POLLIN})
	}
	lastWork := monotime.Now()
	lastAlive := int64(0)
	iter := 0
	for !e.stop.Load() {
		busy := false
		var now int64
		for _, d := range e.devs {
			if d.step(&now) {
				busy = true
			}
		}
		iter++
		if busy {
			iter = 0
			lastWork = 0
			continue
		}
		if iter&63 != 0 {
			continue
		}
		runtime.Gosched() // share the core with drivers polling on it
		t := monotime.Now()
		if t-lastAlive > aliveNs {
			lastAlive = t
			for _, d := range e.devs {
				d.r.Store64(uapi.RegAlive, uint64(t))
			}
		}
		if lastWork == 0 {
			lastWork = t
		}
		if t-lastWork < spinNs {
			continue
		}
		// Sleep: say so, look once more, then block on the doorbells.
		e.sleeping.Store(true)
		for _, d := range e.devs {
			d.r.Store64(uapi.RegDevSleep, 1)
		}
		timeout := int64(aliveNs)
		work := false
		for _, d := range e.devs {
			if d.pending() || d.port != nil && d.held == nil && d.portReady() {
				work = true
			}
			if d.stalled() {
				timeout = stallSleepNs
			}
		}
		if !work {
			for _, d := range e.devs {
				d.count(uapi.CtrSleeps, 1)
			}
			ts := unix.NsecToTimespec(timeout)
			n, _ := unix.Ppoll(fds, &ts, nil)
			if n > 0 {
				for i := range fds {
					if fds[i].Revents&unix.POLLIN != 0 {
						if i == 0 {
							e.wake.Drain()
						} else {
							e.devs[i-1].doorbell.Drain()
							e.devs[i-1].count(uapi.CtrDoorbells, 1)
						}
					}
					fds[i].Revents = 0
				}
			}
		}
		for _, d := range e.devs {
			d.r.Store64(uapi.RegDevSleep, 0)
		}
		e.sleeping.Store(false)
		lastWork = 0
	}
}

// portReady peeks whether a frame waits, without taking it.
func (d *Device) portReady() bool {
	if r, ok := d.port.(interface{ Pending() bool }); ok {
		return r.Pending()
	}
	return true // cannot tell: do not sleep
}
