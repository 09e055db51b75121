package vdev

import (
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// Polling budget before the engine sleeps: spin (yielding the processor now
// and then, so a driver on the same core still runs) for about this long.
const (
	spinNs       = 50_000     // spin this long after the last work
	stallSleepNs = 50_000     // sleep this long when only a driver can unblock us
	aliveNs      = 10_000_000 // advance ALIVE this often while awake
	// idleNs is the longest an idle engine sleeps: ALIVE advances at
	// least this often (a driver calls a device stale after 2 s), and
	// every wake-up of an idle daemon of 64 devices costs a pass over all.
	idleNs = 100_000_000
)

// Engine runs the command and receive engines of a set of devices on one
// goroutine: with fewer cores than pollers, one poller per process is what
// keeps the drivers' cores free (docs/design.md).
type Engine struct {
	osYield atomic.Bool

	devs     []*Device
	wakeCh   chan struct{}
	sleeping atomic.Bool
	stop     atomic.Bool
	done     chan struct{}
	once     sync.Once

	failures      atomic.Uint64                        // devices failed so far (regionfault.go)
	onRegionFault atomic.Pointer[func(*Device, error)] // told of each failed device
}

// NewEngine makes an engine for devs; each must have a port attached.
func NewEngine(devs ...*Device) (*Engine, error) {
	e := &Engine{devs: devs, wakeCh: make(chan struct{}, 1), done: make(chan struct{})}
	for _, d := range devs {
		if d.port == nil {
			return nil, errors.New("vdev: device has no port attached")
		}
		d.port.SetNotify(func() {
			if d.driven.Load() == 0 { // a driver that drives it polls the port itself
				e.notify()
			}
		})
		wake := e.notify // kicks only a sleeping engine, as the doorbell eventfd's reader does
		d.wake.Store(&wake)
		d.eng = e
	}
	return e, nil
}

func (e *Engine) notify() {
	if e.sleeping.Load() {
		e.kick()
	}
}

// SetOSYield makes the idle engine yield its core to the OS scheduler now
// and then: set it when drivers run in other processes (the daemon), so a
// spinning engine does not starve them on a machine with few cores.
func (e *Engine) SetOSYield(on bool) { e.osYield.Store(on) }

// Start runs the engine on its own goroutine.
func (e *Engine) Start() { go e.run() }

// Stop halts the engine and waits for it.
func (e *Engine) Stop() {
	e.once.Do(func() {
		e.stop.Store(true)
		e.kick()
		<-e.done
	})
}

// step runs one pass of a device's engines; it reports work done. *now
// is the pass's clock, read when first needed (0: not yet); skipTimers
// leaves the retransmission timers to a later pass (drive.go).
func (d *Device) step(now *int64) bool {
	if d.chk != nil {
		d.chk.pass()
		defer d.chk.snap()
	}
	d.trace = d.r.Load64(uapi.RegTraceCtrl) == 1
	d.pass++
	tail := d.statTail
	busy := d.pollRx()
	if d.cutShort(tail, *now) {
		return busy
	}
	busy = d.peersDown() || busy // after the frames it sent before it went (its receive may keep ACKs too)
	if len(d.lazyPeers) > 0 {
		d.settleAcks() // what this pass and the last received acknowledges, before the timers look
	}
	if (d.book.Timers > 0 || d.book.Resends > 0) && *now != skipTimers {
		if *now == 0 {
			*now = d.now()
		}
		busy = d.retransmit(*now) || busy
	}
	if d.respJobs > 0 {
		busy = d.serveResponses() || busy
	}
	if d.owed > 0 {
		busy = d.flushOwed() || busy
	}
	busy = d.pollCommands() || busy
	if d.book.AcksOwed > 0 {
		d.flushAcks(false) // after the command engine's look: a reply carries the ACK
	}
	busy = d.serviceAMTAT() || busy
	if d.irqWanted {
		d.interrupt()
	}
	return busy
}

// cutShort reports whether a driver's pass ends once its receive wrote
// a status (the status tail was tail before it), leaving the rest of
// the pass to the next: the waiting driver sees its status sooner (an
// 8-byte shm ping-pong's one way 0.830 -> 0.797 µs, medians of 6
// alternated rounds, lower in 5), and what it posts next, whose
// send-only pass takes the commands, carries the ACK. Only a pass that
// would skip the timers anyway, with no responses or answers owed, and
// never two in a row: a flood of statuses still gets every other pass
// whole (peers gone, timers, owed ACKs, commands queued behind a
// window).
func (d *Device) cutShort(tail uint64, now int64) bool {
	if !d.driverStep || d.statTail == tail || now != skipTimers || d.respJobs > 0 || d.owed > 0 || d.wasCut {
		d.wasCut = false
		return false
	}
	d.wasCut = true
	if d.irqWanted {
		d.interrupt() // another thread may sleep on it
	}
	return true
}

// stalled reports work only a driver (consuming statuses or ring data) or
// a busy link can unblock: the engine then sleeps briefly instead of for good.
func (d *Device) stalled() bool {
	return d.holding > 0 || len(d.compQ) > 0 || d.sending > 0 || d.fence != nil || d.book.Timers > 0 || d.book.Resends > 0 ||
		d.respJobs > 0 || d.owed > 0 || d.book.AcksOwed > 0
}

// pending reports work visible without doing it (the re-check before sleep).
func (d *Device) pending() bool {
	slot := d.g.CmdqOff + (d.cmdHead&(d.g.CmdqEntries-1))*uapi.DescSize
	return d.r.Load64At(slot+uapi.DescSeqOff) == d.cmdHead+1 || d.r.Load64(uapi.RegAMTATCtrl) != d.amtatSeq
}

func (e *Engine) run() {
	var waiters []*eventfd.FD
	var wg sync.WaitGroup
	defer func() {
		for _, w := range waiters {
			w.Close()
		}
		wg.Wait() // no doorbell goroutine touches a region once Stop returns
		close(e.done)
	}()
	for _, d := range e.devs {
		for _, db := range d.doorbells {
			w, err := db.Dup()
			if err != nil {
				continue // the device still runs, only by polling
			}
			waiters = append(waiters, w)
			wg.Add(1)
			go func(d *Device, w *eventfd.FD) { // doorbell -> wake channel, parked in the runtime poller
				defer wg.Done()
				debug.SetPanicOnFault(true) // counting touches the region (regionfault.go)
				defer func() {
					if r := recover(); r != nil {
						err := d.regionFaultAt(r)
						if err == nil {
							panic(r)
						}
						d.markFailed(err)
					}
				}()
				for {
					if _, err := w.Wait(0); err != nil {
						return
					}
					d.countShared(uapi.CtrDoorbells, 1)
					if t := d.tracer.Load(); t != nil {
						t.emit(d, Event{Kind: EvDoorbell})
					}
					e.kick()
				}
			}(d, w)
		}
	}
	debug.SetPanicOnFault(true) // a device's region may be shrunk under us (regionfault.go)
	seen := uint64(0)
	for !e.stop.Load() {
		if f := e.failures.Load(); f != seen {
			seen = f
			e.prune()
		}
		e.loop()
	}
}

// loop runs the engine's passes until Stop, or until a fault in a
// device's region breaks one off (recoverRegionFault fails that device; run
// drops it and starts loop again for the others).
func (e *Engine) loop() {
	defer e.recoverRegionFault()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	seen := e.failures.Load()
	lastWork := int64(0)
	lastAlive := int64(0)
	iter, busyRuns := 0, 0
	timedOut := false // the last sleep ended by its timer, not a wake-up
	// The watch over driven devices (watchDriven) looks after each sleep
	// its timer ended, and every watchNs of an engine that does not
	// sleep (another device keeps it busy).
	lastWatch, watchDue := int64(0), false
	for !e.stop.Load() {
		if e.failures.Load() != seen {
			return // a device failed off the engine (a doorbell's count): run drops it
		}
		busy := false
		var now int64
		for _, d := range e.devs {
			if d.driven.Load() > 0 {
				if (timedOut || watchDue || d.watchBusy) && d.watchDriven(&now) {
					busy = true
				}
				continue // a driver runs it (drive.go)
			}
			if !d.running.acquire() {
				continue
			}
			if d.step(&now) {
				busy = true
			}
			d.running.release()
		}
		watchDue = false
		iter++
		if !busy && e.osYield.Load() {
			// Drivers in other processes wait on this core: give it up
			// after every idle pass (the three-process hand-off).
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
		if busy {
			if busyRuns++; busyRuns&63 == 0 { // ALIVE advances under unbroken load too
				t := monotime.Now()
				if t-lastAlive > aliveNs {
					lastAlive = t
					e.heartbeat(t)
				}
				if t-lastWatch >= watchNs {
					lastWatch, watchDue = t, true
				}
			}
			iter = 0
			lastWork = 0
			timedOut = false
			continue
		}
		if iter&15 != 0 && !timedOut {
			continue
		}
		if yieldEngine {
			runtime.Gosched() // share the core with drivers polling on it
		}
		t := monotime.Now()
		if t-lastAlive > aliveNs {
			lastAlive = t
			e.heartbeat(t)
		}
		if t-lastWatch >= watchNs {
			lastWatch, watchDue = t, true
		}
		if lastWork == 0 {
			lastWork = t
		}
		if t-lastWork < spinNs && !timedOut {
			continue
		}
		timedOut = false
		// Sleep: say so, look once more, then park until a doorbell, a frame or a timer.
		e.sleeping.Store(true)
		for _, d := range e.devs {
			d.r.Store64(uapi.RegDevSleep, 1)
			if d.parker != nil && d.driven.Load() == 0 {
				// Peers in other processes signal us from now on. Not while
				// a driver's thread runs the device: it polls the port, and
				// a signal would cost the sender a system call per frame
				// (a third of the frames of a shared-memory ping-pong). A
				// driver that leaves parks it (Drive); DEV_SLEEP, stored
				// first, is what it reads to know.
				d.parker.Park(true)
			}
			d.checkSleep(false)
		}
		timeout := time.Duration(idleNs)
		work := false
		for _, d := range e.devs {
			if d.drove.Swap(false) || d.driven.Load() > 0 {
				timeout = min(timeout, watchNs) // what its driver left timed is ours
			}
			if d.driven.Load() > 0 {
				continue
			}
			if !d.running.acquire() {
				// Another goroutine's pass holds it (a post's send-only
				// pass, which leaves frames at the port to others): this
				// look cannot see what it left, so look again instead of
				// sleeping past a frame that came before the port was
				// parked, whose sender did not signal.
				work = true
				continue
			}
			if d.pending() || d.portReady() || d.gone.any.Load() {
				work = true
			}
			if d.stalled() {
				timeout = stallSleepNs
			}
			if d.chk != nil && d.chk.suspect {
				// A missing doorbell is judged once its grace has passed:
				// wake for it, or a driver that exits first goes unnamed.
				timeout = min(timeout, doorbellGrace+watchNs)
			}
			d.running.release()
		}
		if !work {
			if timeout > watchNs {
				// A driver's Pause leaves its port unparked when we look
				// within watchNs. It stored drove before it reads away,
				// and we store away before we read drove again: one of us
				// sees the other, so a driver that drove since the look
				// above either shortens this sleep or parks its port.
				for _, d := range e.devs {
					d.away.Store(true)
				}
				for _, d := range e.devs {
					if d.drove.Load() {
						timeout = watchNs
					}
				}
				if timeout <= watchNs {
					for _, d := range e.devs {
						d.away.Store(false)
					}
				}
			}
			for _, d := range e.devs {
				d.countShared(uapi.CtrSleeps, 1)
			}
			timer.Reset(timeout)
			select {
			case <-e.wakeCh:
			case <-timer.C:
				// Only time passed: the heartbeat, then look once and sleep
				// again at once unless that look finds work.
				t := monotime.Now()
				lastAlive = t
				e.heartbeat(t)
				timedOut = true
				for _, d := range e.devs {
					d.checkSleep(true)
				}
			}
			timer.Stop()
		}
		for _, d := range e.devs {
			d.r.Store64(uapi.RegDevSleep, 0)
			d.away.Store(false)
			if d.parker != nil {
				d.parker.Park(false)
			}
		}
		e.sleeping.Store(false)
		lastWork = 0
	}
}

// watchDriven is the engine's watch over a device a driver drives: a pass
// when the driver made none since the watch's last look, and again at
// once while those passes find work. A driver that holds the device and
// makes no pass (a libfabric call copying a megabyte into link memory, a
// thread descheduled between its waits) left what is timed (ACKs held
// for a reply, retransmission timers) to nobody: its peer's 5 ms timer
// ran out. The running flag arbitrates: a pass the driver is in is never
// touched (it is there), and a driver that comes back waits a pass.
func (d *Device) watchDriven(now *int64) bool {
	if !d.running.acquire() {
		return false // the driver's pass: it is there
	}
	defer d.running.release()
	d.watchBusy = false
	if d.pass == d.watchedPass {
		d.watchBusy = d.step(now)
	}
	d.watchedPass = d.pass
	return d.watchBusy
}

// heartbeat advances every device's ALIVE register and mirrors its port's
// own counters into the register page (the port counts on goroutines of its
// own; only the engine writes the page).
func (e *Engine) heartbeat(t int64) {
	for _, d := range e.devs {
		d.r.Store64(uapi.RegAlive, uint64(t))
		d.mirrorLink()
	}
}

// kick wakes the engine if it is parked (or about to park).
func (e *Engine) kick() {
	select {
	case e.wakeCh <- struct{}{}:
	default:
	}
}

// checkSleep tells a checked device's checker that the engine falls
// asleep on it, or (timedOut) that the sleep ended by its timer, unless a
// driver runs the device: then no doorbell is owed.
func (d *Device) checkSleep(timedOut bool) {
	if d.chk == nil || d.driven.Load() > 0 || !d.running.acquire() {
		return
	}
	if timedOut {
		d.chk.timerWoke()
	} else {
		d.chk.sleeping()
	}
	d.running.release()
}

// portReady peeks whether a frame waits, without taking it.
func (d *Device) portReady() bool {
	if d.peeker != nil {
		return d.peeker.Pending()
	}
	return true // cannot tell: do not sleep
}

var yieldEngine = os.Getenv("DIMMNET_ENGINE_YIELD") != "0"
