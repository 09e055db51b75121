package vdev

import (
	"runtime"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// Run to completion. A process that embeds its device (the in-process
// default, the shared-memory link) lets the thread that waits for the
// device run it, as DPDK's poll-mode drivers do: the driver's wait loop
// calls Poll, so each process keeps one spinning thread instead of a
// driver and an engine competing for the same cores (four spinners on two
// cores for two such processes). The Engine serves a device only while no
// driver drives it; a driver that stops driving leaves the device to the
// engine, which it wakes if something can be done now, and which looks at
// least every watchNs while drivers drive, for what is timed (owed ACKs,
// retransmission timers).

// watchNs is how often a parked engine looks at devices drivers drive (or
// drove): an ACK owed when a driver stopped waiting leaves within it, well
// inside the 5 ms retransmission floor of a lossless link.
const watchNs = 1_000_000

// Poll runs one pass of the device's engines on the calling goroutine, if
// no other goroutine runs the device now; it reports whether the pass did
// work. A driver calls it while it waits (the device's work runs on the
// waiting thread), and after publishing a command when the device offers
// no PollPost (the command leaves at once, without a doorbell). Outside
// Drive, a pass that leaves work only the engine can do now wakes the
// engine.
func (d *Device) Poll() bool { return d.driverPass(false, false) }

// Drive says that the calling goroutine will Poll the device until
// Drive(false): the engine leaves it alone and is not woken for it (no
// doorbell, no frame notice). Drive(false) hands the device back, waking
// the engine if a pass could do something now.
func (d *Device) Drive(on bool) {
	if on {
		d.driven.Add(1)
		d.drove.Store(true)
		if d.parker != nil {
			d.parker.Park(false) // our thread polls the port: peers need not signal
		}
		return
	}
	d.handBack(true)
}

// Pause is Drive(false) for a driver that will drive again soon (a
// wait that saw its status: its caller posts or waits next): the device
// goes back to the engine, woken if a pass could do something now, but
// a port the driver's Drive(true) unparked stays unparked while the
// engine looks within watchNs (it parks the undriven ports itself when
// it next sleeps). Parking at the end of every wait and unparking at the
// start of the next cost each 8-byte message two stores to the word the
// peer's producer loads after every frame (a cache line each way) and a
// lock, about 0.1 µs of a 0.95 µs one way on the shared-memory link; a
// frame that comes while the driver is away now waits for its next look
// or the engine's watch (at most watchNs) instead of signalling. A driver
// that is about to sleep, or stop looking for long, calls Drive(false).
// A port the driver blocks on (link.FrameWaiter) is not peeked at here,
// as Drive(false) does: see below.
func (d *Device) Pause() { d.handBack(false) }

// handBack ends a driver's turn: Drive(false) (full) or Pause. A pause
// becomes a full hand-back when the engine already sleeps for long.
func (d *Device) handBack(full bool) {
	if d.parker != nil && d.away.Load() {
		full = true
	}
	if d.driven.Add(-1) > 0 {
		return
	}
	// The engine parks only undriven ports before it sleeps. It stores
	// DEV_SLEEP before it reads driven, and we cleared driven before we
	// read DEV_SLEEP: one of us sees the other, so a sleeping engine's
	// port is parked by it or by us, and the look below (urgent reads the
	// port) catches a frame that came before. A pause parks only when the
	// engine went to sleep for long since the look above (driven is
	// cleared, so it may park it too).
	if d.parker != nil && (full || d.away.Load()) && d.r.Load64(uapi.RegDevSleep) != 0 {
		d.parker.Park(true)
	}
	for !d.running.acquire() {
		runtime.Gosched() // another goroutine's pass: a few µs at most
	}
	// A pause does not look at a port the driver blocks on: a peek there
	// is a system call on every message's path, and a frame waiting now
	// is the driver's next wait's (it returns at once) or, if it does not
	// come back, the port watcher's notice or the engine's watch.
	// An ACK owed and retransmission timers are timed work, the engine's
	// watch's; but an engine that fell into its long idle sleep before
	// this driver drove (Drive(true) does not wake it) would come back to
	// them only when that ends: the ACK past the sender's retransmission
	// timer once a driver's passes held it for a reply
	// (transport.AckHoldPasses), a resend up to 100 ms late. Woken, it
	// watches (away is set only for its long sleep: one wake a sleep).
	// A driver that leaves for good (Drive(false), not a pause) hands
	// them over at once too: it may have driven idle for milliseconds
	// (the libfabric provider's release), which its watch would add to.
	urgent := d.urgentBesidesPort() || (full || d.waiter == nil) && d.portReady() ||
		(d.book.AcksOwed > 0 || d.book.Timers > 0 || len(d.lazyPeers) > 0) && (full || d.away.Load())
	d.running.release()
	if urgent {
		d.wakeEngine()
	}
}

// urgent reports work a pass could do now, without waiting for a driver,
// a frame or a timer: a command posted, a frame arrived, packets or
// statuses or responses waiting to go out. Timed work (ACKs owed,
// retransmission timers) is the engine's watch. The caller runs the device.
func (d *Device) urgent() bool { return d.portReady() || d.urgentBesidesPort() }

// urgentBesidesPort is urgent without the look at the port.
func (d *Device) urgentBesidesPort() bool {
	return d.pending() || d.sending > 0 || len(d.compQ) > 0 || d.respJobs > 0 ||
		d.owed > 0 || d.book.Resends > 0 || d.fence != nil || d.gone.any.Load()
}

// wakeEngine wakes the device's engine if it sleeps.
func (d *Device) wakeEngine() {
	if w := d.wake.Load(); w != nil {
		(*w)()
	}
}

// A driver's wait loop runs a pass per look, and while a packet of ours is
// unacknowledged (the whole wait of a ping-pong) each pass would read the
// clock for the retransmission timers: 227 ns a read on this kvm-clock VM
// under load, most of a pass, so a frame that arrived waited for it. The
// run-to-completion commit (58b5207) put those passes on the waiting
// thread, and the in-process 8-byte RTT/2 went from 1.42-1.46 to
// 1.59-1.61 µs; with the timers looked at every 16th driver pass it is
// 0.73x the build before this change, interleaved. Retransmission timers
// are milliseconds (the 5 ms floor): 16 passes of a spinning driver are
// microseconds. The engine's passes, and any pass with a resend marked,
// look every time.
const timerPollMask = 15

// skipTimers, as step's now, says the pass leaves the timers alone.
const skipTimers = -1

// PollPost runs a send-only pass on the calling goroutine, if no other
// goroutine runs the device now: the command engine takes what was
// published and sends what its windows allow, and nothing is received. It
// reports whether the pass did work. A driver calls it right after
// publishing a command, before it comes back to wait or poll: a burst of
// posts then pays for its own commands only. A full pass there (Poll)
// also receives and places whatever the peers sent meanwhile, the crossing
// burst of a peer posting at the same time, which made a post with 600
// outstanding cost 1.4-2.1x a lone one (FMPL's Table 2, docs/fmpl.md);
// that work waits for the caller's next wait or Progress, or for the
// engine, which a frame arriving at an undriven device wakes (its port is
// parked while the engine sleeps). So the pass wakes the engine only for
// what no frame's arrival will bring: commands it left in the queue that
// the device could take, packets a window has room for, statuses held for
// status room, and the answers a full pass left owed (see sendUrgent).
// Frames waiting at the port and packets waiting for a window to open
// wait for a full pass.
func (d *Device) PollPost() bool { return d.driverPass(true, false) }

// BlocksOnPort reports whether WaitFrame can block: the port is a
// link.FrameWaiter. A driver asks once, so a spin over another medium
// pays nothing for it.
func (d *Device) BlocksOnPort() bool { return d.waiter != nil }

// WaitFrame is a driven device's wait for its next frame, for a port the
// caller's thread can block on (link.FrameWaiter: UDP, AF_PACKET, TAP):
// the thread sleeps in the kernel until a frame arrives or timeoutNs
// passes, then runs a full pass (with the retransmission timers after a
// timeout). A spinning driver's thread on a loaded host has used its
// share of the core when the frame comes and waits for the scheduler;
// one the frame wakes runs at once, as a blocking recvfrom does, and the
// frame crosses one hand-off (kernel to this thread) instead of spinning
// passes' system calls. It reports false, doing nothing, when it cannot
// block: another port, a device nobody drives, another goroutine's pass
// running it, or work a pass could do now (including an ACK owed, which
// the next pass sends); the caller polls instead. Callers bound
// timeoutNs (watchNs): statuses another goroutine's pass writes, and
// timed work, are seen only when it ends.
func (d *Device) WaitFrame(timeoutNs int64) bool {
	if d.waiter == nil || d.driven.Load() == 0 || !d.running.acquire() {
		return false
	}
	// The port is not looked at: its WaitFrame returns at once for a frame
	// waiting, which a look would cost a system call more to learn.
	idle := d.book.AcksOwed == 0 && d.holding == 0 && !d.urgentBesidesPort()
	d.running.release()
	if !idle {
		return false
	}
	arrived := d.waiter.WaitFrame(timeoutNs)
	d.driverPass(false, !arrived)
	return true
}

// driverPass is Poll (a full pass) and PollPost (sendOnly: the command
// side only, and a wake-up only for what no arriving frame will start).
// timers makes a full pass look at the retransmission timers whatever
// the pass count.
func (d *Device) driverPass(sendOnly, timers bool) bool {
	if !d.running.acquire() {
		// The engine holds the device. If it is falling asleep, the look
		// it takes before sleeping may have missed what our caller just
		// published, and nobody rings for it: wake it (a checked device
		// caught this as NO_DOORBELL under load).
		if d.chk != nil {
			d.chk.driverPolled() // the wake below is this driver's doorbell
		}
		if d.r.Load64(uapi.RegDevSleep) != 0 {
			d.wakeEngine()
		}
		return false
	}
	if d.chk != nil {
		d.chk.driverPolled() // a driver runs it: no doorbell is owed
	}
	var busy bool
	if sendOnly {
		busy = d.sendStep()
	} else {
		var now int64
		if !timers && d.polls&timerPollMask != 0 && d.book.Resends == 0 {
			now = skipTimers
		}
		d.driverStep = true
		busy = d.step(&now)
		d.driverStep = false
	}
	if d.polls++; d.polls&255 == 0 { // the device is alive while its driver runs it, engine starved or not
		if t := monotime.Now(); t-d.lastAlive > aliveNs {
			d.lastAlive = t
			d.r.Store64(uapi.RegAlive, uint64(t))
		}
	}
	wake := false
	if d.driven.Load() == 0 {
		if sendOnly {
			wake = d.sendUrgent()
		} else {
			wake = d.urgent()
		}
	}
	d.running.release()
	if wake {
		d.wakeEngine()
	}
	return busy
}

// sendStep is the command side of a pass (step without receiving, peer
// liveness, retransmission and owed answers): held completions, commands
// taken and packetized within their windows, AMT Address Table requests,
// and the interrupt a completion owes a sleeping driver. It does not count
// as a pass for the receive side's ACK timing (Device.pass): it receives
// nothing.
func (d *Device) sendStep() bool {
	if d.chk != nil {
		d.chk.pass()
		defer d.chk.snap()
	}
	d.trace = d.r.Load64(uapi.RegTraceCtrl) == 1
	busy := d.pollCommands()
	if len(d.lazyPeers) > 0 {
		d.settleAcks() // after the commands left: off the path of what they send
	}
	busy = d.serviceAMTAT() || busy
	if d.irqWanted {
		d.interrupt()
	}
	return busy
}

// sendUrgent reports work left after a send-only pass that another pass
// could do now and that no frame's arrival will start: a command the
// device could take (a pass takes at most 64; one behind a FENCE or the
// in-flight bound waits for acknowledgements, which are frames),
// completions held for status room (the driver frees it), packets a
// window has room for, and what a full pass left to do (responses to
// remote PULLs, owed ACKs and NACKs, resends, peers gone). The caller
// runs the device.
func (d *Device) sendUrgent() bool {
	if len(d.compQ) > 0 || d.respJobs > 0 || d.owed > 0 || d.book.Resends > 0 || d.gone.any.Load() {
		return true
	}
	if d.fence == nil && d.inflight < d.cfg.MaxInflight && d.pending() {
		return true
	}
	if d.sending > 0 {
		for _, p := range d.peerList {
			if p.pkz < len(p.q) && p.tx.Room() {
				return true
			}
		}
	}
	return false
}
