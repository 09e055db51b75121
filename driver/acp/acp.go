// Package acp is the basic layer of ACP, Advanced Communication
// Primitives (Saga et al., "Implementations and Evaluations of ACP Basic
// Layer", IPSJ 2014), on the dimmnet driver: a global address space made
// of memory each rank registers, copies between any two global addresses
// (a rank may copy between two others), and remote atomics, for
// programs that want one-sided communication without MPI's windows and
// epochs. Names follow the released acp.h: acp_init is Init,
// acp_register_memory RegisterMemory, acp_copy Copy, acp_cas8 CAS8.
//
// A rank is one process (or, in tests, one goroutine) with one device and
// one Driver; the library never imports the device model. Init starts a
// communication goroutine that owns the driver; callers hand it commands
// through a queue of QueueEntries entries (the paper's 4.1: a caller side
// and a communication thread). The goroutine's command station dequeues
// commands and starts them, its delegate station executes what other
// ranks delegate: copies between two remote ranks are delegated to the
// source's owner, which sends the bytes (up to 16 inside the message,
// more by PUSH) and has the destination's owner answer, and atomics to the source word's owner (4.2).
// Delegation messages travel as IPUSHes into one ring per rank, shared by
// every sender, so what a rank allocates does not grow with the number
// of ranks. docs/acp.md has the layout, the global address split and the
// paths.
package acp

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
)

// Errors callers test with errors.Is; every error wraps one of these (or
// a driver error) with what was being done.
var (
	ErrConfig       = errors.New("acp: bad configuration")
	ErrNotInit      = errors.New("acp: not initialised or finalised")
	ErrRank         = errors.New("acp: rank out of range")
	ErrUnregistered = errors.New("acp: global address not in registered memory")
	ErrNotLinkMem   = errors.New("acp: memory outside the device's link memory (get it from Malloc)")
	ErrAlign        = errors.New("acp: atomic on a misaligned word")
	ErrHandle       = errors.New("acp: handle never issued")
	ErrInFlight     = errors.New("acp: operations still in flight")
	ErrNoMemory     = errors.New("acp: link memory exhausted")
	ErrKey          = errors.New("acp: address translation key not registered")
	ErrColor        = errors.New("acp: color out of range")
	ErrSize         = errors.New("acp: size too large")
	ErrPeer         = errors.New("acp: peer rank unreachable")
	ErrDevice       = errors.New("acp: device refused a command")
	ErrProtocol     = errors.New("acp: peer broke the delegation protocol")
	ErrInitTimeout  = errors.New("acp: peers did not answer Init")
)

// GA is a global address: rank, color, segment and offset packed in 64
// bits with a split chosen at Init (see Split). GANull is never valid.
type GA uint64

// Key is an address translation key: a registration's GA at offset 0.
type Key uint64

// Handle names an operation in flight: the free-running number of its
// command queue entry (the entry is Handle mod QueueEntries), from 1.
type Handle int64

// acp.h's reserved values.
const (
	GANull     GA     = 0
	KeyNull    Key    = 0
	HandleNull Handle = 0
	HandleAll  Handle = -1 // every handle issued so far
	HandleCont Handle = -2 // as order: after the previous command
)

// QueueEntries is the depth of the command queue, the paper's 4,096.
const QueueEntries = 4096

// Defaults of Options.
const (
	DefaultStarterSize = 64 << 10
	DefaultRingBytes   = QueueEntries * msgSize
	DefaultBounce      = 1 << 20
	maxSegBits         = 8
	outSlots           = 4096
	resolveSlots       = 256
	tableEntry         = 16
)

// Options set up a rank. Every rank of a job must give the same Procs,
// StarterSize and region size: a global address is read the same way
// everywhere, and Init checks that the layouts agree.
type Options struct {
	Rank, Procs int
	// Nodes is the device node id of each rank at Init (default rank+1).
	Nodes []uint16
	// StarterSize is the bytes of starter memory each rank gets, segment
	// 1 of every rank (acprun's --acp-size-smem; default 64 KiB). Reset
	// zeroes it and keeps its size, as acp_reset takes only the rank.
	StarterSize int
	// RingBytes is the delegation ring (default 4,096 messages).
	RingBytes int
	// AMT is the AMT entry of that ring (default 0).
	AMT uint16
	// Bounce is the staging buffer of copies whose addresses are not
	// 8-byte aligned (the device moves aligned ranges only).
	Bounce int
	// InitTimeout bounds how long Init waits for every peer (default 60 s).
	InitTimeout time.Duration
	// DeviceAtomics has Add8 and CAS8 whose result goes to the caller's
	// memory done by the target's device (FADD8, CAS8) instead of by
	// delegation; SetDeviceAtomics changes it later.
	DeviceAtomics bool
}

// cmd kinds.
const (
	kCopy = iota + 1
	kAtomic
	kSync
	kReset
	kHello
)

// cmd is one command queue entry, written by a caller under the enqueue
// lock and published by the atomic store of the queue's tail.
type cmd struct {
	kind      uint8
	op, width uint8
	dst, src  GA
	size      uint64
	a, b      uint64
	order     Handle
	rank      int
}

// ACP is one rank's ACP basic layer.
type ACP struct {
	d     *driver.Driver
	o     Options
	lm    []byte
	reg   uapi.Region
	lmOff uint64
	split Split

	ringBase, outBase, resolveBase, bounceBase, tableBase, starterBase, heapBase uint64

	rank       atomic.Int32
	live       atomic.Bool
	devAtomics atomic.Bool
	finalizing atomic.Bool // hellos are no longer answered: a peer's next Init must not take this life's answer

	qmu   sync.Mutex
	q     [QueueEntries]cmd
	tail  atomic.Int64 // the last handle issued
	done  atomic.Int64 // every handle up to this one is complete
	errMu sync.Mutex
	errs  map[Handle]error

	regMu  sync.RWMutex
	segs   []segment // [seg]; 0 unused, 1 the starter memory
	segRR  int
	merges int
	heap   heap

	stop    atomic.Bool
	stopped chan struct{}
	fatal   atomic.Pointer[error]
	st      station
}

// segment is one registration.
type segment struct {
	base, size uint64 // link address and bytes
	color      int
	refs       int
}

// Init starts ACP on this rank's device (acp_init): it lays out the
// delegation ring, the outgoing message slots, the registration table
// and the starter memory, starts the communication goroutine and
// exchanges a hello with every other rank, so that no rank delegates to a
// peer that has not laid out its ring. The driver stays the caller's; no
// other user may touch it until Finalize.
func Init(d *driver.Driver, o Options) (*ACP, error) {
	if o.Procs <= 0 || o.Rank < 0 || o.Rank >= o.Procs {
		return nil, fmt.Errorf("acp init: rank %d of %d: %w", o.Rank, o.Procs, ErrConfig)
	}
	if o.Nodes == nil {
		for r := range o.Procs {
			o.Nodes = append(o.Nodes, uint16(r+1))
		}
	}
	if len(o.Nodes) != o.Procs || o.Nodes[o.Rank] != d.Node() {
		return nil, fmt.Errorf("acp init: rank %d, nodes %v, device node %d: %w", o.Rank, o.Nodes, d.Node(), ErrConfig)
	}
	o.StarterSize = defaultInt(o.StarterSize, DefaultStarterSize)
	o.RingBytes = defaultInt(o.RingBytes, DefaultRingBytes)
	o.Bounce = defaultInt(o.Bounce, DefaultBounce)
	if o.InitTimeout == 0 {
		o.InitTimeout = 60 * time.Second
	}
	if o.StarterSize%8 != 0 || o.RingBytes%msgSize != 0 || o.Bounce%8 != 0 || o.Bounce < 64 {
		return nil, fmt.Errorf("acp init: starter %d, ring %d, bounce %d bytes: want multiples of 8 (ring: of %d): %w",
			o.StarterSize, o.RingBytes, o.Bounce, msgSize, ErrConfig)
	}
	g := d.Geometry()
	c := &ACP{d: d, o: o, lm: d.LinkMem(), reg: d.Region(), lmOff: g.LinkMemOff, errs: map[Handle]error{}, stopped: make(chan struct{})}
	sp, err := NewSplit(o.Procs, 1, g.LinkMemSize)
	if err != nil {
		return nil, fmt.Errorf("acp init: %w", err)
	}
	c.split = sp
	a := layoutFor(o, sp)
	c.ringBase, c.outBase, c.resolveBase, c.bounceBase = a.Ring.Addr, a.Out.Addr, a.Resolve.Addr, a.Bounce.Addr
	c.tableBase, c.starterBase, c.heapBase = a.Table.Addr, a.Starter.Addr, a.Heap
	if a.Heap > uint64(len(c.lm)) {
		return nil, fmt.Errorf("acp init: areas need %d bytes, link memory has %d: %w", a.Heap, len(c.lm), ErrNoMemory)
	}
	clear(c.lm[c.tableBase:c.heapBase])
	c.heap = newHeap(c.heapBase, uint64(len(c.lm)))
	c.segs = make([]segment, 1<<sp.SegBits)
	c.segs[1] = segment{base: c.starterBase, size: uint64(o.StarterSize), refs: 1}
	c.publishSeg(1)
	c.segRR = 1
	c.rank.Store(int32(o.Rank))
	c.devAtomics.Store(o.DeviceAtomics)
	// Remote PUSH and PULL may reach the registration table and user
	// memory, never the ring, the outgoing slots or the bounce buffer.
	d.SetWindow(c.tableBase, uint64(len(c.lm))-c.tableBase)
	d.DiscardStatuses()
	ring, err := d.SetRing(o.AMT, c.ringBase, uint64(o.RingBytes), false)
	if err != nil {
		return nil, fmt.Errorf("acp init: delegation ring: %w", err)
	}
	c.st.init(c, ring)
	c.live.Store(true)
	c.finalizing.Store(false)
	go c.loop()
	h, err := c.enqueue(cmd{kind: kHello})
	if err == nil {
		err = c.Complete(h)
	}
	if err != nil {
		c.shutdown()
		return nil, fmt.Errorf("acp init: %w", err)
	}
	return c, nil
}

func defaultInt(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func alignUp(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

// Finalize ends ACP on this rank (acp_finalize): it completes every
// operation, waits at a Sync so no rank leaves while another may still
// delegate to it, waits until every device command it posted has
// completed, stops the communication goroutine, invalidates the ring and
// restores the device's window. Everything Init made is released without
// relying on process exit: Init may run again on the same driver.
func (c *ACP) Finalize() error {
	if !c.live.Load() {
		return ErrNotInit
	}
	c.finalizing.Store(true)
	err := c.Complete(HandleAll)
	if e := c.Sync(); e != nil {
		err = errors.Join(err, e)
	}
	c.shutdown()
	if err != nil {
		return fmt.Errorf("acp finalize: %w", err)
	}
	return nil
}

// shutdown stops the communication goroutine once its device commands
// have completed and undoes what Init set on the device.
func (c *ACP) shutdown() {
	c.stop.Store(true)
	<-c.stopped
	c.live.Store(false)
	g := c.d.Geometry()
	c.reg.Store64At(g.AMTOff+uint64(c.o.AMT)*uapi.AMTSize+uapi.AMTCfg, 0)
	c.d.SetWindow(0, g.LinkMemSize)
}

// Reset re-initialises ACP with this process as rank (acp_reset): after
// a Sync of the old ranks every registration but the starter memory is
// released, the starter memory is zeroed and the ranks exchange hellos
// again under their new numbers. Every rank must call it, each with a
// different rank; it fails with ErrInFlight while this rank's operations
// are not complete.
func (c *ACP) Reset(rank int) error {
	if !c.live.Load() {
		return ErrNotInit
	}
	if rank < 0 || rank >= c.o.Procs {
		return fmt.Errorf("acp reset to rank %d of %d: %w", rank, c.o.Procs, ErrRank)
	}
	if t, d := c.tail.Load(), c.done.Load(); t != d {
		return fmt.Errorf("acp reset: %d operations not complete: %w", t-d, ErrInFlight)
	}
	h, err := c.enqueue(cmd{kind: kReset, rank: rank})
	if err == nil {
		err = c.Complete(h)
	}
	if err != nil {
		return fmt.Errorf("acp reset: %w", err)
	}
	return nil
}

// Sync returns once every rank has called it (acp_sync).
func (c *ACP) Sync() error {
	h, err := c.enqueue(cmd{kind: kSync})
	if err == nil {
		err = c.Complete(h)
	}
	if err != nil {
		return fmt.Errorf("acp sync: %w", err)
	}
	return nil
}

// SetDeviceAtomics chooses the path of Add8 and CAS8 whose old value goes
// to the caller's memory: the target device's receive engine (true) or
// the target's delegate station (false). Either is atomic against the
// other: both use the processor's atomic instructions on the word.
// Commands already enqueued keep the path they were started with.
func (c *ACP) SetDeviceAtomics(on bool) { c.devAtomics.Store(on) }

// Rank is this process's rank (acp_rank).
func (c *ACP) Rank() int { return int(c.rank.Load()) }

// Procs is the number of ranks (acp_procs).
func (c *ACP) Procs() int { return c.o.Procs }

// Colors is the number of colors (acp_colors): one, as a rank has one
// device. acp.h's colors name the network interfaces a GMA may use.
func (c *ACP) Colors() int { return 1 }

// Driver is the driver ACP runs on, for counters; only the communication
// goroutine may use it until Finalize.
func (c *ACP) Driver() *driver.Driver { return c.d }

// enqueue publishes a command and returns its handle, waiting while the
// queue is full (every entry issued and not complete).
func (c *ACP) enqueue(m cmd) (Handle, error) {
	if !c.live.Load() {
		return HandleNull, ErrNotInit
	}
	c.qmu.Lock()
	defer c.qmu.Unlock()
	h := Handle(c.tail.Load() + 1)
	for i := 0; int64(h)-c.done.Load() > QueueEntries; i++ {
		if err := c.fatalErr(); err != nil {
			return HandleNull, err
		}
		backoff(i)
	}
	if m.order == HandleCont {
		m.order = h - 1
	}
	c.q[int64(h)%QueueEntries] = m
	c.tail.Store(int64(h)) // publishes the entry to the command station
	return h, nil
}

// backoff is how a caller waits for the communication goroutine: yield
// at first (on one core the goroutine needs ours), then sleep once the
// wait is long, so a rank blocked for seconds (a Sync) costs no core.
func backoff(i int) {
	switch {
	case i < 20000:
		runtime.Gosched()
	case i < 21000:
		time.Sleep(50 * time.Microsecond)
	default:
		time.Sleep(time.Millisecond)
	}
}

func (c *ACP) fatalErr() error {
	if p := c.fatal.Load(); p != nil {
		return *p
	}
	return nil
}

// Complete waits until every operation up to h has completed (acp_complete
// with HandleAll: every one issued so far) and returns their errors.
func (c *ACP) Complete(h Handle) error {
	if h == HandleAll {
		if h = Handle(c.tail.Load()); h == HandleNull {
			return nil // nothing issued: nothing to wait for
		}
	}
	if h <= HandleNull || int64(h) > c.tail.Load() {
		return fmt.Errorf("complete %d (issued %d): %w", h, c.tail.Load(), ErrHandle)
	}
	for i := 0; c.done.Load() < int64(h); i++ {
		if err := c.fatalErr(); err != nil {
			return err
		}
		backoff(i)
	}
	return c.takeErrs(h)
}

// Inquire reports whether every operation up to h has completed
// (acp_inquire returns 0 then), and their errors once it has.
func (c *ACP) Inquire(h Handle) (bool, error) {
	if h == HandleAll {
		h = Handle(c.tail.Load())
	}
	if h <= HandleNull || int64(h) > c.tail.Load() {
		return false, fmt.Errorf("inquire %d (issued %d): %w", h, c.tail.Load(), ErrHandle)
	}
	if c.done.Load() < int64(h) {
		return false, c.fatalErr()
	}
	return true, c.takeErrs(h)
}

func (c *ACP) takeErrs(h Handle) error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	var errs []error
	for k, e := range c.errs {
		if k <= h {
			errs = append(errs, e)
			delete(c.errs, k)
		}
	}
	return errors.Join(errs...)
}

// Split is how a global address divides its 64 bits, chosen at Init from
// the number of ranks and the link memory size, as the paper's Tables 3
// (Tofu) and 4 (UDP) do: from the top, rank, color, segment (the
// registration's entry in the owner's table) and offset in the segment.
// Segment 0 is never registered, so GANull (0) is never a valid address;
// segment 1 of every rank is its starter memory.
type Split struct {
	RankBits, ColorBits, SegBits, OffBits uint
}

// NewSplit chooses the split for procs ranks, colors colors and segments
// of at most linkMem bytes.
func NewSplit(procs, colors int, linkMem uint64) (Split, error) {
	s := Split{RankBits: uint(max(1, bits.Len(uint(procs-1)))), ColorBits: uint(bits.Len(uint(colors - 1))),
		OffBits: uint(bits.Len64(linkMem - 1))}
	left := 64 - int(s.RankBits+s.ColorBits+s.OffBits)
	if left < 2 {
		return Split{}, fmt.Errorf("%d ranks and %d bytes of link memory leave %d segment bits: %w", procs, linkMem, left, ErrConfig)
	}
	s.SegBits = uint(min(left, maxSegBits))
	return s, nil
}

// GA packs an address.
func (s Split) GA(rank, color, seg int, off uint64) GA {
	return GA(uint64(rank)<<(s.ColorBits+s.SegBits+s.OffBits) | uint64(color)<<(s.SegBits+s.OffBits) |
		uint64(seg)<<s.OffBits | off)
}

// Parts unpacks an address.
func (s Split) Parts(g GA) (rank, color, seg int, off uint64) {
	v := uint64(g)
	off = v & (1<<s.OffBits - 1)
	seg = int(v >> s.OffBits & (1<<s.SegBits - 1))
	color = int(v >> (s.SegBits + s.OffBits) & (1<<s.ColorBits - 1))
	rank = int(v >> (s.ColorBits + s.SegBits + s.OffBits))
	return
}

// Split is the address split this rank chose at Init.
func (c *ACP) Split() Split { return c.split }

// word is a pointer into link memory for sync/atomic.
func (c *ACP) word(addr uint64) unsafe.Pointer { return unsafe.Pointer(&c.lm[addr]) }
