// Package vdev is the device model, the "hardware" of dimmnet: one device is
// one shared region (register page, command queue, LLCM, link memory) plus
// the engines that act on it — the command engine (PUSH, PULL, IPUSH,
// NOP/FENCE, READ_DONE), the receive engine (PUSH placement, IPUSH ring
// placement with the AMT and its Address Table), the receive status ring,
// per-peer sequencing with ACK/NACK, counters and the error register.
//
// A device knows nothing of processes: it sees descriptors in its command
// queue and frames on its link Port, and it writes link memory, status
// entries and registers. Drivers see it only through the region and the
// doorbell and interrupt eventfds (package uapi is the whole contract).
//
// One Engine goroutine serves every device of a process, polling with
// spin-then-sleep, so a 2-core machine running two drivers and two devices
// does not thrash (see docs/design.md).
package vdev

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/region"
	"github.com/dimmnet/dimmnet/vdev/transport"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// Config sizes one device. Zero fields take the defaults.
type Config struct {
	Node          uint16
	RegionSize    int    // power of two >= 1 MiB; default 16 MiB
	ShmPath       string // region file ("%d" becomes the node id); "" = a sealed memfd, which no client can resize
	CmdEntries    int    // command queue slots (power of two); default 1024
	StatusEntries int    // status ring slots (power of two); default 1024
	AMTEntries    int    // default 64
	AMTATEntries  int    // GPIDs the AMT Address Table covers; default 1024
	PageSize      int    // link page frame size for LMMC; default 4096
	Window        int    // unacknowledged packets per peer; default 64
	RingFullMode  int    // uapi.RingFullHold (default) or uapi.RingFullNACK
	Vectors       int    // doorbell eventfds (ivshmem vectors); default 1
	MaxTimeouts   int    // consecutive retransmission timeouts before a peer is unreachable; default 30
	MaxInflight   int    // commands taken and not completed before the device takes no more; default 256
	// Check makes a checked device: it validates the driver's side of
	// the datasheet and reports violations (VIOLATIONS, the violation
	// log), otherwise behaving exactly as an unchecked one.
	Check bool
	// HoldLimit is how long a peer may hold our packets (its ring or
	// status ring full) before the commands fail HOLD_LIMIT; default
	// DefaultHoldLimit, negative: no limit.
	HoldLimit  time.Duration
	KeepRegion bool // leave the region file (ShmPath) behind on Close
}

func (c *Config) defaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.RegionSize, 16<<20)
	def(&c.CmdEntries, 1024)
	def(&c.StatusEntries, 1024)
	def(&c.AMTEntries, 64)
	def(&c.AMTATEntries, 1024)
	def(&c.PageSize, 4096)
	def(&c.Window, 64)
	def(&c.Vectors, 1)
	def(&c.MaxTimeouts, 30)
	def(&c.MaxInflight, 256)
	if c.HoldLimit == 0 {
		c.HoldLimit = DefaultHoldLimit
	}
}

// DefaultHoldLimit is generous: a receiver whose driver is merely slow
// drains its ring well within it, and one that stopped for a minute has
// stopped.
const DefaultHoldLimit = time.Minute

// ErrConfig reports a configuration the device cannot be built with.
var ErrConfig = errors.New("bad device config")

// Device is one dimmnet device.
type Device struct {
	cfg  Config
	shm  *region.Region
	r    uapi.Region
	g    uapi.Geometry // the device's own copy: never re-read from the page a driver can scribble on
	lm   []byte        // link memory
	node uint16
	mac  net.HardwareAddr

	doorbells []*eventfd.FD          // one per vector: drivers signal one after publishing while DEV_SLEEP=1
	irq       *eventfd.FD            // in-process driver's interrupt: signalled after a status while DRV_WAIT=1
	irqMu     sync.Mutex             // guards irqs; held while signalling, so a removed fd is never written
	irqs      []int                  // every interrupt eventfd to signal (irq, plus attached clients')
	irqChans  []chan struct{}        // in-process drivers' interrupts (WatchInterrupt), guarded by irqMu
	wake      atomic.Pointer[func()] // the engine's wake-up, for an in-process doorbell (Doorbell)

	port    link.Port
	vec     link.VectorSender    // the port gathers payloads from link memory; nil: copy into the frame
	slots   link.SlotWriter      // the port lends its slot to build a frame in; nil: built in a Buffer
	inPlace link.InPlaceReceiver // the port lends received payloads where they lie; nil: Recv copies
	backlog link.Backlogger      // the port queues frames to send later; nil: sent when Send returns
	parker  link.Parker          // the port's peers signal it only while the engine sleeps
	waiter  link.FrameWaiter     // a driver's thread can block on the port (WaitFrame)
	peeker  link.Peeker          // the port tells whether a frame waits; nil: it cannot (never sleep on it)
	// the port's own counters, mirrored into LINK_RX_DROPPED and LINK_TX_ERRORS (nil: it keeps none)
	linkRxDropped, linkTxErrors func() uint64
	peerSet                     link.PeerSet           // the port vouches for its senders; nil: strangers are bounded here
	screener                    link.Screener          // the port refuses senders itself and counts them
	strangers                   int                    // peers made for senders no PeerSet vouched for
	chk                         *checker               // Config.Check; nil: unchecked
	tracer                      atomic.Pointer[tracer] // live trace watchers (Watch); nil: none
	traceMu                     sync.Mutex             // serialises Watch and Stop
	crc                         bool
	ackPolicy                   transport.AckPolicy // when an owed ACK goes alone (AttachPort: by the medium)
	driverStep                  bool                // a driver's thread runs this full pass (flushAcks: a reply may follow)
	wasCut                      bool                // the last full pass ended at its status (cutShort)
	maxPayload                  uint32
	parser                      *wire.Parser

	// the device's own refusals of senders (RX_SPOOFED, RX_UNKNOWN_PEER),
	// added to the port's: counted in passes, read by the engine's
	// heartbeat, which holds no pass
	screenSpoofed, screenUnknown atomic.Uint64

	amtat    []uint32 // AMT Address Table: GPID -> AMTATValid|index, inside the device
	amtatSeq uint64   // last AMTAT_CTRL value executed

	// command engine
	cmdHead  uint64
	cmdAhead cmdAhead
	fence    *job // a FENCE waiting for the commands before it
	compQ    []uapi.Status
	inflight int // commands taken and not completed
	sending  int // peers with commands not wholly packetized
	freeJobs []*job
	msgID    uint32

	// status ring
	statTail  uint64
	statHead  uint64 // cached driver head, refreshed when the ring looks full
	statFull  bool   // a stall is being counted
	irqWanted bool

	// per-peer reliability (package transport) and receive engine
	tcfg     transport.Config
	book     transport.Book
	peers    map[uint16]*peer
	peerList []*peer // the same, in the order first seen: passes visit peers in a fixed order
	// peers with an ACK deferAck kept for the next pass (each may appear
	// more than once, or settled already: settleAck looks at peer.lazy)
	lazyPeers []*peer
	lastPeer  *peer // the peer peerOf found last, while in peers
	holding   int   // peers with a held frame (hold mode)
	rings     []ringState
	trace     bool
	respJobs  int    // PULL responses not yet fully acknowledged
	owed      int    // control frames owed to peers (link was full)
	pass      uint64 // engine passes, to age owed ACKs
	// the engine's watch over a driven device (watchDriven)
	watchedPass uint64 // pass at the watch's last look
	watchBusy   bool   // the watch's last pass did work: look again at once

	clock func() int64 // the transport's clock (ns); nil: the monotonic clock
	gone  downs        // peers the port saw go away, for the next pass

	// Who runs the device (drive.go): one goroutine at a time holds
	// running for a pass; driven counts drivers polling it themselves.
	running   runFlag
	driven    atomic.Int32
	drove     atomic.Bool // a driver drove it since the engine last looked
	away      atomic.Bool // the engine sleeps longer than watchNs: Pause parks the port (drive.go)
	polls     uint64      // Poll passes, to advance ALIVE now and then (under running)
	lastAlive int64       // when Poll last advanced ALIVE (under running)

	eng       *Engine   // the engine serving it, told when it fails
	portClose sync.Once // the engine closes a failed device's port, Close the others'
	portErr   error
	failure   atomic.Pointer[error] // why a fault in its region failed it (regionfault.go)

	// PUSHB (requester.go coalesce), last: fields added in the middle
	// move the hot ones above across cache lines.
	freeBatches []*pushBatch      // PUSHB job lists to reuse (newBatch)
	batchBuf    []byte            // a PUSHB payload being built (transmit)
	rxBatches   map[*peer]rxBatch // PUSHB frames the status ring stopped part way, by sender
}

// New creates a device and its region. Attach a port and add it to an
// Engine to make it run.
func New(cfg Config) (*Device, error) {
	cfg.defaults()
	pow2 := func(n int) bool { return n > 0 && n&(n-1) == 0 }
	if !pow2(cfg.CmdEntries) || !pow2(cfg.StatusEntries) {
		return nil, fmt.Errorf("node %d: queue sizes %d/%d must be powers of two: %w", cfg.Node, cfg.CmdEntries, cfg.StatusEntries, ErrConfig)
	}
	if cfg.AMTEntries < 1 || cfg.AMTEntries > 1<<16 || cfg.AMTATEntries < 1 || cfg.AMTATEntries > 1<<20 || cfg.Window < 1 || cfg.Window > 1<<15 || cfg.MaxInflight < 1 {
		return nil, fmt.Errorf("node %d: AMT entries %d, window %d or in-flight bound %d out of range: %w", cfg.Node, cfg.AMTEntries, cfg.Window, cfg.MaxInflight, ErrConfig)
	}
	g := uapi.Geometry{
		RegionSize:   uint64(cfg.RegionSize),
		CmdqOff:      uapi.RegPageSize,
		CmdqEntries:  uint64(cfg.CmdEntries),
		StatqEntries: uint64(cfg.StatusEntries),
		AMTEntries:   uint64(cfg.AMTEntries),
		AMTATEntries: uint64(cfg.AMTATEntries),
		PageSize:     uint64(cfg.PageSize),
	}
	g.LLCMOff = g.CmdqOff + g.CmdqEntries*uapi.DescSize
	g.StatqOff = g.LLCMOff
	g.AMTOff = g.StatqOff + g.StatqEntries*uapi.StatusSize
	g.AMTATMirOff = roundUp(g.AMTOff+g.AMTEntries*uapi.AMTSize, 64)
	g.FrameTagOff = roundUp(g.AMTATMirOff+g.AMTATEntries*4, 64)
	g.ScratchOff = roundUp(g.FrameTagOff+4*g.RegionSize/g.PageSize, 64) // room for every frame link memory can hold
	g.LinkMemOff = roundUp(g.ScratchOff+16<<10, g.PageSize)
	g.ScratchSize = g.LinkMemOff - g.ScratchOff
	g.LLCMSize = g.LinkMemOff - g.LLCMOff
	if g.LinkMemOff+1<<16 > g.RegionSize {
		return nil, fmt.Errorf("node %d: region of %d bytes leaves no link memory: %w", cfg.Node, cfg.RegionSize, ErrConfig)
	}
	g.LinkMemSize = g.RegionSize - g.LinkMemOff
	path := cfg.ShmPath
	if strings.Contains(path, "%d") { // one pattern for every node of a daemon
		path = fmt.Sprintf(path, cfg.Node)
	}
	reg, err := region.Create(fmt.Sprintf("dimmnet-node%d", cfg.Node), path, cfg.RegionSize)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", cfg.Node, err)
	}
	d := &Device{
		cfg: cfg, shm: reg, r: uapi.Region(reg.Mem), g: g, node: cfg.Node,
		mac:    wire.NodeMAC(cfg.Node),
		lm:     reg.Mem[g.LinkMemOff:],
		parser: wire.NewParser(),
		amtat:  make([]uint32, cfg.AMTATEntries),
		peers:  map[uint16]*peer{},
		rings:  make([]ringState, cfg.AMTEntries),
		tcfg:   transport.Config{Window: cfg.Window, MaxTimeouts: cfg.MaxTimeouts, HoldLimit: max(0, cfg.HoldLimit.Nanoseconds())},
	}
	for i := 0; i < cfg.Vectors && err == nil; i++ {
		var e *eventfd.FD
		if e, err = eventfd.New(); err == nil {
			d.doorbells = append(d.doorbells, e)
		}
	}
	if err == nil {
		d.irq, err = eventfd.New()
	}
	if err == nil {
		d.irqs = []int{d.irq.Int()}
	}
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("node %d: %w", cfg.Node, err)
	}
	r := d.r
	for _, w := range []struct {
		off uint32
		v   uint64
	}{
		{uapi.RegABIVersion, uapi.ABIVersion},
		{uapi.RegFeatures, features(cfg)},
		{uapi.RegNodeID, uint64(cfg.Node)},
		{uapi.RegRegionSize, g.RegionSize},
		{uapi.RegCmdqOff, g.CmdqOff}, {uapi.RegCmdqEntries, g.CmdqEntries},
		{uapi.RegStatqOff, g.StatqOff}, {uapi.RegStatqEntries, g.StatqEntries},
		{uapi.RegAMTOff, g.AMTOff}, {uapi.RegAMTEntries, g.AMTEntries},
		{uapi.RegAMTATEntries, g.AMTATEntries},
		{uapi.RegLLCMOff, g.LLCMOff}, {uapi.RegLLCMSize, g.LLCMSize},
		{uapi.RegScratchOff, g.ScratchOff}, {uapi.RegScratchSize, g.ScratchSize},
		{uapi.RegLinkMemOff, g.LinkMemOff}, {uapi.RegLinkMemSize, g.LinkMemSize},
		{uapi.RegPageSizeReg, g.PageSize}, {uapi.RegProcsPerNode, uapi.ProcsPerNode},
		{uapi.RegAMTATMirOff, g.AMTATMirOff}, {uapi.RegVectors, uint64(cfg.Vectors)},
		{uapi.RegFrameTagOff, g.FrameTagOff},
		{uapi.RegMaxInflight, uint64(cfg.MaxInflight)},
		{uapi.RegRingFullMode, uint64(cfg.RingFullMode)},
		{uapi.RegWinBase, 0}, {uapi.RegWinSize, g.LinkMemSize},
		{uapi.RegMTU, 64},
		{uapi.RegAlive, uint64(monotime.Now())},
	} {
		r.Store64(w.off, w.v)
	}
	if cfg.Check {
		d.chk = newChecker(d)
		d.chk.snap()
	}
	r.Store64(uapi.RegMagic, uapi.Magic) // last: a driver that sees the magic sees a whole page
	return d, nil
}

// features are the FEATURES bits of a device made with cfg.
func features(cfg Config) uint64 {
	f := uint64(uapi.FeatIPUSH | uapi.FeatAMTAT | uapi.FeatDirectAMT | uapi.FeatPULL | uapi.FeatPktStatus |
		uapi.FeatDevHead | uapi.FeatHold | uapi.FeatNACK | uapi.FeatTrace | uapi.FeatReliable)
	if cfg.Check {
		f |= uapi.FeatCheck
	}
	return f
}

func roundUp(v, a uint64) uint64 { return (v + a - 1) / a * a }

// AttachPort connects the device to a medium. The device's MTU (largest
// packet payload) follows from the port's frame size.
func (d *Device) AttachPort(p link.Port) {
	d.port = p
	d.vec, _ = p.(link.VectorSender)
	d.slots, _ = p.(link.SlotWriter)
	d.inPlace, _ = p.(link.InPlaceReceiver)
	d.backlog, _ = p.(link.Backlogger)
	d.parker, _ = p.(link.Parker)
	d.waiter = d.boundWaiter(link.FrameWaiterOf(p))
	d.peeker, _ = p.(link.Peeker)
	d.linkRxDropped, d.linkTxErrors = nil, nil
	d.peerSet = link.VouchesFor(p)
	d.screener, _ = p.(link.Screener)
	if c, ok := p.(link.DropCounter); ok {
		d.linkRxDropped = c.Dropped
	}
	if c, ok := p.(link.TxErrorCounter); ok {
		d.linkTxErrors = c.TxErrors
	}
	// A stream is ACKed every window/8 frames at the end of a receive
	// burst, not held for a reply: a streaming sender's window must keep
	// moving.
	d.ackPolicy = transport.AckPolicy{Every: max(1, d.cfg.Window/8), HoldPasses: 1, HoldNs: transport.AckHold}
	if l, ok := p.(link.LosslessMedium); ok && l.Lossless() {
		d.tcfg.RTOFloor, d.tcfg.Lossless = transport.LosslessRTO, true
		// An ACK alone costs a slot store, not a system call: held for
		// passes, not time (no clock read per message).
		d.ackPolicy.HoldPasses, d.ackPolicy.HoldNs = transport.AckHoldPasses, 0
	}
	if w, ok := p.(link.PeerWatcher); ok {
		w.SetPeerDown(d.gone.add)
		d.tcfg.PeerWatched = true // the port names a peer gone; timeouts need not guess
	}
	if c, ok := p.(link.ChecksumNeeder); ok {
		d.crc = c.NeedsCRC()
	}
	if s, ok := p.(link.MemorySharer); ok {
		// Peers that map it copy large payloads straight out of it: one
		// copy instead of two. On failure (a region that is a plain file)
		// the port carries them as before.
		s.ShareMemory(d.shm.FD, int64(d.g.LinkMemOff), d.lm)
	}
	mp := uint32(p.MTU()-wire.FrameOverhead) &^ 7
	d.maxPayload = mp
	d.r.Store64(uapi.RegMTU, uint64(mp))
	d.r.Store64(uapi.RegState, uapi.StateRunning)
	if d.chk != nil {
		d.chk.snap() // before the engine runs: the device's own stores
	}
}

// mirrorLink copies the port's own counters into the register page.
func (d *Device) mirrorLink() {
	if d.linkRxDropped != nil {
		d.r.Store64(uapi.CtrLinkRxDropped.Off(), d.linkRxDropped())
	}
	if d.linkTxErrors != nil {
		d.r.Store64(uapi.CtrLinkTxErrors.Off(), d.linkTxErrors())
	}
	d.mirrorScreen()
}

// mirrorScreen stores the refusals of senders, the port's and the
// device's own, into their counters.
func (d *Device) mirrorScreen() {
	c := link.ScreenCounts{UnknownPeer: d.screenUnknown.Load(), Spoofed: d.screenSpoofed.Load()}
	if d.screener != nil {
		c = c.Add(d.screener.Screened())
	}
	for _, w := range []struct {
		ctr uapi.Counter
		v   uint64
	}{
		{uapi.CtrRxUnknownPeer, c.UnknownPeer}, {uapi.CtrRxSpoofed, c.Spoofed},
		{uapi.CtrAuthFail, c.AuthFail}, {uapi.CtrAuthReplay, c.AuthReplay},
		{uapi.CtrAuthSessions, c.AuthSessions},
	} {
		d.r.Store64(w.ctr.Off(), w.v)
	}
}

// RemotePeers reports whether the device's link reaches devices in other
// processes of this host (the shared-memory link): a driver spinning on
// one of the host's cores then holds a core those processes need.
func (d *Device) RemotePeers() bool {
	c, ok := d.port.(link.CrossProcessMedium)
	return ok && c.CrossProcess()
}

// Geometry is the layout the device was built with (its own copy: reading
// it touches no region).
func (d *Device) Geometry() uapi.Geometry { return d.g }

// Node is the device's node id.
func (d *Device) Node() uint16 { return d.node }

// MAC is the device's address on its link.
func (d *Device) MAC() net.HardwareAddr { return d.mac }

// Region is the device's shared region, for in-process attach and inspection.
func (d *Device) Region() []byte { return d.shm.Mem }

// ShmFD is the region's file, for handing to ivshmem clients.
func (d *Device) ShmFD() int { return d.shm.FD }

// DoorbellFD is the eventfd a driver signals to wake the device.
func (d *Device) DoorbellFD() int { return d.doorbells[0].Int() }

// DoorbellFDs are the device's doorbell eventfds, one per vector: peer 0's
// eventfds in the ivshmem protocol.
func (d *Device) DoorbellFDs() []int {
	fds := make([]int, len(d.doorbells))
	for i, e := range d.doorbells {
		fds[i] = e.Int()
	}
	return fds
}

// AddInterrupt makes the device signal eventfd fd too when a sleeping
// driver needs waking (an attached ivshmem client's vector 0). The device
// does not own fd.
func (d *Device) AddInterrupt(fd int) {
	d.irqMu.Lock()
	defer d.irqMu.Unlock()
	d.irqs = append(d.irqs, fd)
}

// Doorbell is an in-process driver's doorbell: it wakes the device's engine
// directly. An eventfd is heard only when the Go runtime polls its
// descriptors, which, while every core runs a spinning goroutine, is the
// system monitor's look every 10 ms.
func (d *Device) Doorbell() {
	d.countShared(uapi.CtrDoorbells, 1)
	if t := d.tracer.Load(); t != nil {
		t.emit(d, Event{Kind: EvDoorbell})
	}
	if d.driven.Load() == 0 {
		d.wakeEngine()
	}
}

// WatchInterrupt makes the device signal ch too (without blocking: give it
// room for one) whenever it interrupts a sleeping driver, for a driver in
// this process, which a channel wakes at once where an eventfd waits for
// the runtime poller (see Doorbell). stop undoes it; the device will not send
// on ch once stop returns.
func (d *Device) WatchInterrupt(ch chan struct{}) (stop func()) {
	d.irqMu.Lock()
	defer d.irqMu.Unlock()
	d.irqChans = append(d.irqChans, ch)
	return func() {
		d.irqMu.Lock()
		defer d.irqMu.Unlock()
		d.irqChans = slices.DeleteFunc(d.irqChans, func(c chan struct{}) bool { return c == ch })
	}
}

// RemoveInterrupt stops signalling fd (its client left). When it returns
// the device will not write fd again, so the caller may close it.
func (d *Device) RemoveInterrupt(fd int) {
	d.irqMu.Lock()
	defer d.irqMu.Unlock()
	d.irqs = slices.DeleteFunc(d.irqs, func(f int) bool { return f == fd })
}

// MarkStopped publishes STATE=stopped, so drivers (guests get no
// interrupt) notice the device going away and fail with a named error.
// A failed device's region is not touched.
func (d *Device) MarkStopped() {
	d.guard(func() { d.r.Store64(uapi.RegState, uapi.StateStopped) })
}

// InterruptFD is the eventfd the device signals to wake a sleeping driver.
func (d *Device) InterruptFD() int { return d.irq.Int() }

// Close marks the device stopped and releases its region and eventfds. Stop
// its Engine first.
func (d *Device) Close() error {
	var errs []error
	// The port first: a port that sends on its own goroutine may still
	// gather a queued frame's payload from the region. What we placed is
	// acknowledged before we go: a peer must not fail a command whose
	// data arrived because our process exited right after reading it.
	if d.port != nil && d.book.AcksOwed > 0 && d.running.acquire() {
		d.guard(func() {
			d.pass++ // an ACK owed since the last pass goes now (transport.Rx.AckWanted)
			d.ackPolicy.HoldPasses, d.ackPolicy.HoldNs = 1, 0
			d.flushAcks(false)
		})
		d.running.release()
	}
	errs = append(errs, d.closePort())
	if d.shm != nil {
		d.MarkStopped()
		errs = append(errs, d.shm.Close(!d.cfg.KeepRegion))
		d.shm = nil
	}
	for _, e := range append(d.doorbells, d.irq) {
		if e != nil {
			errs = append(errs, e.Close())
		}
	}
	return errors.Join(errs...)
}

// closePort closes the device's port, once: a failed device's at once,
// so its peers' frames stop queueing for it, and every other one in Close.
func (d *Device) closePort() error {
	if d.port == nil {
		return nil
	}
	d.portClose.Do(func() { d.portErr = d.port.Close() })
	return d.portErr
}

// countShared adds n to a counter counted outside the device's passes (the
// doorbells, the engine's sleeps, the checker's violations): a locked add.
func (d *Device) countShared(c uapi.Counter, n uint64) { d.r.Add64(c.Off(), n) }

// now reads the clock the transport's timers run on: the monotonic clock,
// or a test's virtual one, so a test stepping devices by hand decides
// when a timer runs out instead of racing the machine's speed.
func (d *Device) now() int64 {
	if d.clock != nil {
		return d.clock()
	}
	return monotime.Now()
}

// tracedType reports whether frames of type t move the trace's Tx and Rx
// stamps: the data packets of a message (PUSH, IPUSH) and PUSHB frames,
// which carry whole messages.
func tracedType(t wire.Type) bool {
	return t <= wire.TypeIPush || t == wire.TypePushBatch
}

func (d *Device) stamp(i int) {
	d.r.Store64(uapi.RegTrace+8*uint32(i), uint64(monotime.Now()))
}

// serviceAMTAT executes a pending AMT Address Table register access.
func (d *Device) serviceAMTAT() bool {
	ctrl := d.r.Load64(uapi.RegAMTATCtrl)
	if ctrl == d.amtatSeq {
		return false
	}
	d.amtatSeq = ctrl
	seq, op := ctrl>>8, ctrl&0xff
	sel := d.r.Load64(uapi.RegAMTATSel)
	res := uint64(uapi.AMTATResultOK)
	switch {
	case sel >= uint64(len(d.amtat)):
		res = uapi.AMTATResultErr
	case op == uapi.AMTATOpRead:
		d.r.Store64(uapi.RegAMTATData, uint64(d.amtat[sel]))
	case op == uapi.AMTATOpWrite:
		v := d.r.Load64(uapi.RegAMTATData)
		if v&uapi.AMTATValid != 0 && v&0xffff >= d.g.AMTEntries || v&^(uapi.AMTATValid|0xffff) != 0 {
			res = uapi.AMTATResultErr
		} else {
			d.amtat[sel] = uint32(v)
			d.r.Store32At(d.g.AMTATMirOff+4*sel, uint32(v)) // read-only mirror for inspectors
		}
	default:
		res = uapi.AMTATResultErr
	}
	d.r.Store64(uapi.RegAMTATDone, seq<<8|res)
	return true
}

func (d *Device) inLinkMem(addr uint64, n uint32) bool {
	return addr <= d.g.LinkMemSize && uint64(n) <= d.g.LinkMemSize-addr
}
