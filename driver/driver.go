// Package driver is the kernel-bypass userspace driver of a dimmnet device.
// It sees only what a real driver sees — the mapped region and a doorbell —
// through an Attachment, so the same code runs in-process, in a host process
// attached over the ivshmem protocol, and in a guest mapping the PCI BARs.
//
// A Driver posts command descriptors, rings the doorbell only when the
// device says it sleeps, polls the receive status ring (spin, then yield,
// then sleep on the interrupt eventfd), manages IPUSH rings and the AMT
// Address Table, and copies data out of link memory. A Driver is owned by
// one goroutine at a time; use one per thread of control. The one
// exception: posting (Post and the commands built on it) and consuming
// statuses (Poll, Wait, WaitTail, Skip, Flush) touch separate state, so
// one goroutine may post while one other consumes (lmmc's manager waits
// for paging requests while writers post), as long as no ring in
// device-head mode is released by the consumer (that release posts).
package driver

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"golang.org/x/sys/unix"
)

// Errors callers test with errors.Is.
var (
	ErrNotDevice     = errors.New("driver: not a dimmnet device (bad magic)")
	ErrABI           = errors.New("driver: unsupported ABI version")
	ErrQueueFull     = errors.New("driver: command queue full")
	ErrDeviceStopped = errors.New("driver: device stopped")
	ErrDeviceStale   = errors.New("driver: device not responding (alive word stale)")
	ErrAMTAT         = errors.New("driver: AMT Address Table access refused")
	ErrTimeout       = errors.New("driver: timed out")
	// ErrNotRung: the command was published (its index is valid, and
	// the device runs it when it next looks: its engine looks at least
	// every 100 ms) but the doorbell of the sleeping device could not be
	// rung. It is posted: what it reads must stay as it is until it
	// completes, as for any posted command. The cause is wrapped.
	// Posted tells it from a command not posted.
	ErrNotRung = errors.New("driver: command published, doorbell not rung")
)

// Attachment is what an attach method provides: the mapped region, a way to
// ring the device's doorbell, and a way to sleep until the device
// interrupts.
type Attachment interface {
	Region() []byte
	// Kick rings the device's doorbell.
	Kick() error
	// WaitIRQ sleeps until the device signals or timeoutMs passes.
	WaitIRQ(timeoutMs int) error
	Close() error
}

// Polling budget of Wait before it sleeps on the interrupt.
const (
	spinNs    = 50_000
	maxSpinNs = 1_000_000
	sleepMs   = 10
	staleNs   = 2_000_000_000 // ALIVE older than this while we wait: the device is gone
	yieldMod  = 16
	// lookMod: a spinning wait reads the clock (its budget, its timeout)
	// and lets the runtime schedule other goroutines every lookMod-th
	// look. Each costs more than a look (a clock read 30-230 ns on this
	// VM, a Gosched a few hundred with the scheduler's locks), and a
	// frame that comes during one waits for it: every 16th look, they
	// took 0.08-0.13 µs of an 8-byte shared-memory one way (0.77-0.84 ->
	// 0.67-0.72 µs, 4 alternated rounds). A look is a device pass of
	// about 25 ns, so the budget is still read every few microseconds.
	lookMod = 256
	// blockSliceNs bounds one WaitFrame: what another goroutine's pass
	// completed, and the device's timed work (retransmission timers),
	// wait at most this long for a thread blocked on the port.
	blockSliceNs = 1_000_000
	// blockNs is how long WaitTail blocks on a port before it sleeps on
	// the interrupt instead (giving the device back to its engine): a
	// blocked thread holds no core, so this need not follow the learned
	// spin budget, only keep a long-idle wait from waking every slice.
	blockNs = 100_000_000
)

// Driver drives one device.
type Driver struct {
	t         Attachment
	r         uapi.Region
	g         uapi.Geometry
	lm        []byte
	node      uint16
	proc      uint32
	cmdTail   uint64
	cmdHead   uint64 // cached; reloaded only when the queue looks full
	held      bool   // PostMore published commands no pass or doorbell has sent yet
	statHead  uint64 // statuses consumed
	statPub   uint64 // head last published to the device
	amtatSeq  uint64
	avgWait   int64 // ns, running average of WaitTail waits
	stats     WaitStats
	rings     []*Ring // for Flush
	aliveSeen uint64  // last ALIVE value read, and when (our clock)
	aliveAt   int64
	spinFixed int64       // >= 0: DIMMNET_SPIN_NS's fixed budget
	osYield   bool        // sched_yield while spinning (engine in another process)
	run       Runner      // the device runs in this process: our thread runs it (nil: its engine does)
	runPost   postRunner  // run's send-only pass after a post, if it has one
	runPause  pauser      // run's Drive(false) for a driver coming back soon, if it has one
	frames    frameWaiter // run's blocking wait for a frame, if its port has one
	arms      armCount    // ArmInterrupt's callers (armwait.go)
}

// frameWaiter is a Runner whose driver can block on its port for the
// next frame (vdev's Device.WaitFrame over UDP, AF_PACKET or TAP): a
// wait then sleeps in the kernel and the frame wakes it, instead of
// spinning passes that lose the core on a loaded host. false: it could
// not block, poll instead.
type frameWaiter interface{ WaitFrame(timeoutNs int64) bool }

// portBlocks reports whether the device's port can be blocked on.
type portBlocker interface{ BlocksOnPort() bool }

// pauser is a Runner that can be handed back to its engine briefly
// (vdev's Device.Pause): at the end of a wait, whose caller posts or
// waits again soon, it skips what Drive(false) does for a driver that
// leaves for long (asking the port's peers to signal).
type pauser interface{ Pause() }

// postRunner is a Runner with a send-only pass for right after a post
// (vdev's Device.PollPost): a burst of posts then does not also receive
// and place what the peers send meanwhile; the next wait does.
type postRunner interface{ PollPost() bool }

// Open attaches to the device behind t after checking its identity, ABI
// version and geometry.
func Open(t Attachment) (*Driver, error) {
	mem := t.Region()
	if err := uapi.CheckRegion(mem); err != nil {
		return nil, fmt.Errorf("open device: %w", err)
	}
	r := uapi.Region(mem)
	if m := r.Load64(uapi.RegMagic); m != uapi.Magic {
		return nil, fmt.Errorf("open device: magic %#x: %w", m, ErrNotDevice)
	}
	if v := r.Load64(uapi.RegABIVersion); v != uapi.ABIVersion {
		return nil, fmt.Errorf("open device: ABI %d, driver speaks %d: %w", v, uapi.ABIVersion, ErrABI)
	}
	g := r.ReadGeometry()
	if err := g.Validate(uint64(len(mem))); err != nil {
		return nil, fmt.Errorf("open device: %w", err)
	}
	d := &Driver{t: t, r: r, g: g, lm: mem[g.LinkMemOff : g.LinkMemOff+g.LinkMemSize], node: uint16(r.Load64(uapi.RegNodeID))}
	d.cmdHead = r.Load64(uapi.RegCmdqHead)
	d.cmdTail = firstFreeIndex(r, g, d.cmdHead)
	d.statHead = r.Load64(uapi.RegStatqHead)
	d.statPub = d.statHead
	d.amtatSeq = r.Load64(uapi.RegAMTATCtrl) >> 8
	d.spinFixed = -1
	// Yield the core to the OS while spinning when the device's engine runs
	// in another process (it may need this core); in-process it only costs
	// (8-byte RTT/2 1.15 -> 3.4 us here). DIMMNET_OS_YIELD=0/1 overrides.
	_, d.osYield = t.(*hostTransport)
	if lt, ok := t.(*localTransport); ok {
		if os.Getenv("DIMMNET_RUN_TO_COMPLETION") != "0" {
			d.run, _ = lt.dev.(Runner)
			if d.run != nil {
				d.runPost, _ = lt.dev.(postRunner)
				d.runPause, _ = lt.dev.(pauser)
				if pb, ok := lt.dev.(portBlocker); ok && pb.BlocksOnPort() {
					d.frames, _ = lt.dev.(frameWaiter)
				}
			}
		}
		// Peers in other processes of this host (the shared-memory link)
		// need the core we spin on when we have only one: yield it while
		// spinning (one core: 2 ms per round trip -> 13 µs). With more,
		// yielding costs (8-byte RTT/2 mean 1.2 -> 10 µs on two cores).
		if rp, ok := lt.dev.(interface{ RemotePeers() bool }); ok && rp.RemotePeers() && usableCPUs() < 2 {
			d.osYield = true
		}
	}
	if v := os.Getenv("DIMMNET_OS_YIELD"); v != "" {
		d.osYield = v != "0"
	}
	if v, err := strconv.ParseInt(os.Getenv("DIMMNET_SPIN_NS"), 10, 64); err == nil {
		d.spinFixed = v
	}
	return d, nil
}

// usableCPUs is how many CPUs this process may run on (its affinity, as
// taskset sets it).
func usableCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return runtime.NumCPU()
	}
	return set.Count()
}

// firstFreeIndex is where a driver taking over a device starts posting:
// the first index at or above head whose slot is not published. CMDQ_TAIL
// cannot say: a driver that died between publishing a slot (its SEQ word)
// and storing the tail leaves the tail behind a command the device will
// still take, and posting over it would rewrite a slot the device may be
// reading.
func firstFreeIndex(r uapi.Region, g uapi.Geometry, head uint64) uint64 {
	i := head
	for i-head < g.CmdqEntries && r.Load64At(g.CmdqOff+(i&(g.CmdqEntries-1))*uapi.DescSize+uapi.DescSeqOff) == i+1 {
		i++
	}
	return i
}

// Close detaches.
func (d *Driver) Close() error {
	if d.held {
		d.Ring() // commands PostMore held leave before the driver goes
	}
	return d.t.Close()
}

// Node is the device's node id.
func (d *Driver) Node() uint16 { return d.node }

// SetProc sets the local process index this driver sends as (GPID =
// node*ProcsPerNode + proc).
func (d *Driver) SetProc(p uint32) { d.proc = p }

// GPID is the global process id this driver sends as.
func (d *Driver) GPID() uint32 { return uapi.GPID(d.node, d.proc) }

// Geometry is the device's layout.
func (d *Driver) Geometry() uapi.Geometry { return d.g }

// Region is the mapped region, for register access.
func (d *Driver) Region() uapi.Region { return d.r }

// LinkMem is link memory, mapped: index it with link addresses.
func (d *Driver) LinkMem() []byte { return d.lm }

// MTU is the largest payload of one packet.
func (d *Driver) MTU() int { return int(d.r.Load64(uapi.RegMTU)) }

// Counter reads one device counter.
func (d *Driver) Counter(c uapi.Counter) uint64 { return d.r.Counter(c) }

// Post publishes one descriptor and rings the doorbell if the device
// sleeps. It returns the command's index (named in its DONE/ERROR status).
// A device this thread runs (run to completion) gets a send-only pass
// instead: the command leaves now, and what the peers sent meanwhile is
// received by the next wait or Progress (or the engine, which their
// frames wake while nobody drives the device), so a post costs the same
// with hundreds outstanding as alone. A full queue gets a full pass
// first: the acknowledgements it takes in are what free the queue. The
// pass or doorbell also sends what PostMore published before. An error
// other than ErrNotRung means the command was not published.
func (d *Driver) Post(c *uapi.Desc) (uint64, error) {
	if d.cmdTail-d.cmdHead >= d.g.CmdqEntries {
		if d.held {
			d.Ring() // a queue PostMore filled: those must leave to free a slot
		}
		d.cmdHead = d.r.Load64(uapi.RegCmdqHead)
		if d.cmdTail-d.cmdHead >= d.g.CmdqEntries && d.run != nil {
			d.run.Poll()
			d.cmdHead = d.r.Load64(uapi.RegCmdqHead)
		}
		if d.cmdTail-d.cmdHead >= d.g.CmdqEntries {
			return 0, ErrQueueFull
		}
	}
	idx := d.cmdTail
	slot := d.g.CmdqOff + (idx&(d.g.CmdqEntries-1))*uapi.DescSize
	d.cmdTail++
	if d.run != nil {
		// We run the device: the pass below takes the command itself or,
		// finding another thread's pass running the device, runs a locked
		// instruction (its compare-and-swap) before it looks at
		// DEV_SLEEP, which orders our release stores before that look as
		// a locked store would. So they are release stores: a locked one
		// here waited, in a stream, for the line of the frame the last
		// pass stored into the consumer's ring slot (docs/design.md,
		// "Where a stream of 8-byte messages is bound").
		d.r.WriteDescOwn(slot, c, idx) // publishes it
		d.r.StoreOwn64(uapi.RegCmdqTail, d.cmdTail)
	} else {
		d.r.WriteDesc(slot, c, idx) // publishes it
		d.r.Store64(uapi.RegCmdqTail, d.cmdTail)
	}
	if d.runPost != nil {
		d.runPost.PollPost() // run to completion: the command leaves now, on our thread
		return idx, nil
	}
	if d.run != nil {
		d.run.Poll()
		return idx, nil
	}
	if d.r.Load64(uapi.RegDevSleep) != 0 {
		if err := d.Kick(); err != nil {
			return idx, fmt.Errorf("post command %d: %w: %w", idx, ErrNotRung, err)
		}
	}
	return idx, nil
}

// Progress runs one pass of a device embedded in this process when the
// driver runs it to completion, and reports whether the pass did work; it
// does nothing for a device run elsewhere. A library whose progress loop
// polls statuses without WaitTail (it must also watch its own callers)
// calls it so its device moves on the loop's thread instead of a second
// spinning one.
func (d *Driver) Progress() bool {
	if d.run == nil {
		return false
	}
	return d.run.Poll()
}

// Drive tells an embedded device that this driver's thread runs it from
// now on (true: its engine stands down) or no longer (false), as WaitTail
// does around its spin. A progress loop that calls Progress holds it true
// while busy and false before it sleeps; it does nothing for a device
// run elsewhere.
func (d *Driver) Drive(on bool) {
	if d.run != nil {
		d.run.Drive(on)
	}
}

// Kick rings the doorbell unconditionally.
func (d *Driver) Kick() error {
	d.r.Add64(uapi.RegDoorbell, 1)
	return d.t.Kick()
}

// kickIfAsleep wakes a sleeping device after freeing ring or status space.
// A device this thread can run (run to completion) is run instead: one
// pass uses the space freed (a held frame is placed) where waking its
// engine would add a spinning thread for the next 50 µs.
func (d *Driver) kickIfAsleep() {
	if d.run != nil {
		d.run.Poll()
		return
	}
	if d.r.Load64(uapi.RegDevSleep) != 0 {
		d.Kick()
	}
}

// Push posts an RDMA write of n bytes from local to remote on node dst.
func (d *Driver) Push(dst uint16, local, remote uint64, n uint32, flags uint8, cookie uint64) (uint64, error) {
	return d.Post(&uapi.Desc{Opcode: uapi.OpPUSH, Flags: flags, DstNode: dst, SrcProc: d.GPID(), Length: n,
		LocalAddr: local, RemoteAddr: remote, Cookie: cookie})
}

// IPush posts an indirect push of n bytes from local to process dstGPID on
// node dst; the receiver's device picks the ring. With uapi.FlagDirectAMT,
// amt names the receiver's AMT entry instead.
func (d *Driver) IPush(dst uint16, dstGPID uint32, local uint64, n uint32, flags uint8, amt uint16, cookie uint64) (uint64, error) {
	return d.Post(&uapi.Desc{Opcode: uapi.OpIPUSH, Flags: flags, DstNode: dst, DstProc: dstGPID, SrcProc: d.GPID(),
		Length: n, LocalAddr: local, RemoteAddr: uint64(amt), Cookie: cookie})
}

// Pull posts an RDMA read of n bytes at remote on node dst into local.
func (d *Driver) Pull(dst uint16, local, remote uint64, n uint32, cookie uint64) (uint64, error) {
	return d.Post(&uapi.Desc{Opcode: uapi.OpPULL, DstNode: dst, SrcProc: d.GPID(), Length: n,
		LocalAddr: local, RemoteAddr: remote, Cookie: cookie})
}

// FetchAdd8 posts a remote fetch-and-add: dst's device adds addend to its
// aligned word at remote and the old value lands at local; it completes
// with PULL_DONE, whose Imm is the old value.
func (d *Driver) FetchAdd8(dst uint16, local, remote, addend, cookie uint64) (uint64, error) {
	return d.Post(&uapi.Desc{Opcode: uapi.OpFADD8, DstNode: dst, SrcProc: d.GPID(), Length: 8,
		LocalAddr: local, RemoteAddr: remote, Operand: addend, Cookie: cookie})
}

// CAS8 posts a remote compare-and-swap: dst's device stores swap into its
// aligned word at remote if it equals cmp; the old value lands at local
// and is the PULL_DONE status's Imm.
func (d *Driver) CAS8(dst uint16, local, remote, cmp, swap, cookie uint64) (uint64, error) {
	return d.Post(&uapi.Desc{Opcode: uapi.OpCAS8, DstNode: dst, SrcProc: d.GPID(), Length: 8,
		LocalAddr: local, RemoteAddr: remote, Operand: cmp, Imm: swap, Cookie: cookie})
}

// StatusTail loads the device's status tail: the cheapest way to learn that
// something arrived (the paper's "poll the Status Pointer").
func (d *Driver) StatusTail() uint64 { return d.r.Load64(uapi.RegStatqTail) }

// StatusHead is the driver's consumption count.
func (d *Driver) StatusHead() uint64 { return d.statHead }

// Poll returns the next status entry and consumes it, if there is one.
func (d *Driver) Poll() (uapi.Status, bool) {
	if d.r.Load64(uapi.RegStatqTail) == d.statHead {
		return uapi.Status{}, false
	}
	s := d.r.ReadStatus(d.g.StatqOff + (d.statHead&(d.g.StatqEntries-1))*uapi.StatusSize)
	d.statHead++
	d.publishHead(false)
	if s.Type == uapi.StRingFull {
		d.Flush() // the device waits for ring space: what was released lazily must reach it now
	}
	return s, true
}

// publishHead stores the consumed status count for the device, lazily: a
// store to a line the device reads costs a cache-line transfer on the
// critical path of the next command, and the device needs the head only
// when its ring looks full. It is published every quarter ring, before the
// driver sleeps, and on Flush.
func (d *Driver) publishHead(force bool) {
	if d.statHead == d.statPub || !force && d.statHead-d.statPub < d.g.StatqEntries/4 {
		return
	}
	d.statPub = d.statHead
	d.r.Store64(uapi.RegStatqHead, d.statHead)
	d.kickIfAsleep()
}

// Flush publishes the status head and every ring's released head now, so
// the device sees all the space consumed.
func (d *Driver) Flush() error {
	d.publishHead(true)
	var first error
	for _, r := range d.rings {
		if err := r.publish(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Skip consumes n status entries without reading them (the ping-pong's
// linkmem condition: the arrival is all it needs to know).
func (d *Driver) Skip(n uint64) {
	d.statHead += min(n, d.r.Load64(uapi.RegStatqTail)-d.statHead) // never past the tail
	d.publishHead(false)
}

// DiscardStatuses drops every status waiting in the ring and returns how
// many: a driver taking over a device another driver used starts clean
// instead of reading its predecessor's completions as its own.
func (d *Driver) DiscardStatuses() uint64 {
	n := d.r.Load64(uapi.RegStatqTail) - d.statHead
	d.statHead += n
	d.publishHead(true)
	return n
}

// WaitTail waits until the status tail moves past the driver's head and
// returns it: spin (yielding now and then), then sleep on the interrupt.
// It fails with ErrDeviceStopped or ErrDeviceStale if the device goes away,
// and ErrTimeout after timeoutNs (0: no limit).
func (d *Driver) WaitTail(timeoutNs int64) (uint64, error) {
	if t := d.r.Load64(uapi.RegStatqTail); t != d.statHead {
		return t, nil
	}
	if d.held {
		d.Ring() // a wait for what PostMore held must not strand it
	}
	if d.run != nil {
		d.run.Drive(true)
		if d.runPause != nil {
			defer d.runPause.Pause() // we come back soon: the port stays unparked
		} else {
			defer d.run.Drive(false)
		}
	}
	start := monotime.Now()
	// last is the latest clock read of the loop: the wait's end is taken
	// from it (a clock read after the status is seen is on the path of
	// every message: 50-230 ns on this VM's kvm-clock), off by at most
	// the looks between two reads, which the spin budget does not mind.
	last := start
	d.stats.Waits++
	slept := false
	for i := 1; ; i++ {
		blocked := false
		if d.run != nil {
			// A port that can be blocked on is, from the first look: its
			// wait returns at once for a frame already there.
			if d.frames != nil {
				slice := int64(blockSliceNs)
				if timeoutNs > 0 || d.spinFixed >= 0 {
					end := start + d.blockBudget()
					if timeoutNs > 0 {
						end = min(end, start+timeoutNs)
					}
					slice = max(min(slice, end-monotime.Now()), 0)
				}
				blocked = d.frames.WaitFrame(slice)
			}
			if !blocked {
				d.run.Poll()
			}
		}
		if t := d.r.Load64(uapi.RegStatqTail); t != d.statHead {
			if slept {
				last = monotime.Now() // a sleep is long: its length must count
			}
			d.learnWait(last - start)
			if !slept {
				d.stats.Spun++
			}
			return t, nil
		}
		if blocked {
			now := monotime.Now()
			last = now
			if timeoutNs > 0 && now-start > timeoutNs {
				return 0, ErrTimeout
			}
			if now-start < d.blockBudget() {
				continue
			}
			slept = true
			if err := d.sleep(); err != nil {
				return 0, err
			}
			continue
		}
		if d.osYield && (d.run == nil || i > yieldMod) {
			// Every look: the device's engine is a third process on the
			// hand-off, and a core given up at once is the cheapest way to
			// reach it (8-byte RTT/2 median through a daemon 5-10 µs with a
			// yield every 64 looks, 0.9-1.5 µs with one every look, about
			// the three-process hand-off with sched_yield). A rank that runs
			// its own device spins its first looks first: a peer on the other
			// core answers within them (4 ranks on 2 cores, 8-byte raw PUSH
			// RTT/2 1.1-4.2 µs yielding from the first look, 0.68-0.72 from
			// the 17th; collectives alike).
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
		if i%lookMod != 0 && (!d.osYield || i%yieldMod != 0) {
			continue // a look that yields the core costs more than the clock: every 16th then
		}
		runtime.Gosched()
		now := monotime.Now()
		last = now
		if now-start < d.spinBudget() {
			continue
		}
		if timeoutNs > 0 && now-start > timeoutNs {
			return 0, ErrTimeout
		}
		slept = true
		if err := d.sleep(); err != nil {
			return 0, err
		}
	}
}

// blockBudget is how long WaitTail blocks on the device's port before
// it sleeps on the interrupt: blockNs, or DIMMNET_SPIN_NS's fixed budget.
func (d *Driver) blockBudget() int64 {
	if d.spinFixed >= 0 {
		return d.spinFixed
	}
	return blockNs
}

// YieldsCore reports whether the driver gives its core to the OS at every
// look while it spins (the device's engine in another process, ranks
// outnumbering cores, or DIMMNET_OS_YIELD=1): a library with a progress
// loop of its own waits by the same rule, or the peer it waits for may
// not get a core.
func (d *Driver) YieldsCore() bool { return d.osYield }

// spinBudget is how long WaitTail spins before sleeping: twice the recent
// wait, within [spinNs, maxSpinNs], while waits are short enough for a
// spin to catch; none once they are not. A reply that comes within the
// spin is seen at once; sleeping costs a wake-up through the scheduler,
// tens of µs. Waits longer than half the longest spin mean the other side
// is slow or needs our core (one core, many processes on a few, a guest
// under emulation, where a round trip takes 0.5-1 ms): a spin then only
// holds the core the answer needs. A lab guest blocking on its interrupt
// at once instead of after 50 µs gave a lower 8-byte RTT/2 in 6 of 8
// interleaved `lab pingpong --link udp` runs (medians 420 against 483
// µs).
func (d *Driver) spinBudget() int64 {
	if d.spinFixed >= 0 {
		return d.spinFixed
	}
	if d.avgWait > maxSpinNs/2 {
		return 0
	}
	return min(max(2*d.avgWait, spinNs), maxSpinNs)
}

// learnWait folds one observed wait into the running average, each wait
// counted as at most 2 ms: one wait of seconds (a rank late at a barrier,
// an idle peer) would otherwise keep the average above the no-spin bound
// for dozens of waits, each short reply among them paying a wake-up.
func (d *Driver) learnWait(ns int64) { d.avgWait += (min(ns, 2*maxSpinNs) - d.avgWait) / 8 }

// WaitStats counts how WaitTail's waits ended, so a tool or a test can
// tell a driver that catches its statuses while it spins from one that
// sleeps on every wait, and a sleep the device's interrupt ended from one
// only the timeout ended (a lost wake-up).
type WaitStats struct {
	Waits      uint64 // WaitTail calls that had to wait
	Spun       uint64 // waits that ended while spinning, before any sleep
	Sleeps     uint64 // sleeps on the interrupt
	TimerWakes uint64 // sleeps that ended by their timeout, not by the device's interrupt
}

// WaitStats returns the counts of WaitTail's waits so far. Only the
// goroutine that waits may call it.
func (d *Driver) WaitStats() WaitStats { return d.stats }

// sleep blocks on the interrupt after announcing it, re-checking first.
// A device we drive goes back to its engine meanwhile.
func (d *Driver) sleep() error {
	if d.run != nil {
		d.run.Drive(false)
		defer d.run.Drive(true)
	}
	d.Flush()
	d.r.Store64(uapi.RegDrvWait, 1)
	defer d.clearDrvWait() // 0, unless ArmInterrupt's callers wait too
	if d.r.Load64(uapi.RegStatqTail) != d.statHead {
		return nil
	}
	d.stats.Sleeps++
	if err := d.t.WaitIRQ(sleepMs); err != nil {
		return err
	}
	if tw, ok := d.t.(interface{ TimedOut() bool }); ok && tw.TimedOut() {
		d.stats.TimerWakes++
	}
	return d.Alive()
}

// Alive reports whether the device is running and its heartbeat fresh.
func (d *Driver) Alive() error {
	switch d.r.Load64(uapi.RegState) {
	case uapi.StateRunning:
	case uapi.StateStopped:
		return ErrDeviceStopped
	default:
		return fmt.Errorf("state %d: %w", d.r.Load64(uapi.RegState), ErrDeviceStopped)
	}
	if _, local := d.t.(*localTransport); local {
		return nil // a device in our own process lives as long as we do, however starved its engine
	}
	// ALIVE is the device's clock, which a guest does not share: judge it
	// by whether it moved within staleNs of our own clock.
	now := monotime.Now()
	if a := d.r.Load64(uapi.RegAlive); a != d.aliveSeen || d.aliveAt == 0 {
		d.aliveSeen, d.aliveAt = a, now
	} else if now-d.aliveAt > staleNs {
		return ErrDeviceStale
	}
	return nil
}

// Wait returns the next status entry, waiting as WaitTail does.
func (d *Driver) Wait(timeoutNs int64) (uapi.Status, error) {
	for {
		if s, ok := d.Poll(); ok {
			return s, nil
		}
		if _, err := d.WaitTail(timeoutNs); err != nil {
			return uapi.Status{}, err
		}
	}
}

// CopyOut copies link memory at addr into dst and returns the byte count.
func (d *Driver) CopyOut(dst []byte, addr uint64) int {
	if addr >= uint64(len(d.lm)) {
		return 0
	}
	return copy(dst, d.lm[addr:])
}

// CopyIn copies src into link memory at addr.
func (d *Driver) CopyIn(addr uint64, src []byte) int {
	if addr >= uint64(len(d.lm)) {
		return 0
	}
	return copy(d.lm[addr:], src)
}

// SetWindow exposes [base, base+size) of link memory to remote PUSH/PULL.
func (d *Driver) SetWindow(base, size uint64) {
	d.r.Store64(uapi.RegWinBase, base)
	d.r.Store64(uapi.RegWinSize, size)
}

// SetRingFullMode chooses hold (uapi.RingFullHold) or NACK for full IPUSH rings.
func (d *Driver) SetRingFullMode(m uint64) { d.r.Store64(uapi.RegRingFullMode, m) }

// SetTrace turns the stage timestamps on or off.
func (d *Driver) SetTrace(on bool) {
	v := uint64(0)
	if on {
		v = 1
	}
	d.r.Store64(uapi.RegTraceCtrl, v)
}

// TraceStamp reads stage timestamp i (uapi.TraceTx, ...).
func (d *Driver) TraceStamp(i int) int64 { return int64(d.r.Load64(uapi.RegTrace + 8*uint32(i))) }

// LastError decodes the ERROR register.
func (d *Driver) LastError() (e uapi.Errno, op uapi.Opcode, idx uint32) {
	v := d.r.Load64(uapi.RegError)
	return uapi.Errno(v), uapi.Opcode(v >> 16), uint32(v >> 32)
}
