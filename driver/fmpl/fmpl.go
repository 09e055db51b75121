// Package fmpl is FMPL (Tatebe et al., "Design and Implementation of
// FMPL", IPSJ 2002) on the dimmnet driver: zero-copy message passing by
// sender-side matching, a buffered mode switched by a timeout, an
// any-source domain with receiver-side matching over IPUSH, communicators
// and tree collectives. It is for programmers who place their buffers in
// link memory (the SR8000's remote DMA areas) and want the device's
// latency and bandwidth, not MPI's generality.
//
// A rank is one process with one device and one Driver; the library never
// imports the device model: the caller opens the device (package
// driver/ranks embeds one per process) and hands Init the driver.
// A World is owned by one goroutine, like the Driver under it.
//
// The tag of a message is the index of a matching area. Recv writes the
// message header (the receive buffer's link address and size) into the
// sender's matching area for the pair by one PUSH on a descriptor built
// once at Init; Send waits for that header, PUSHes the body straight into
// the receive buffer, resets the area, and PUSHes the receiver's
// completion flag. No queue, no search, no allocation on the path.
// docs/fmpl.md has the layout, the TAG_ANY mechanism and why the flag
// always lands after the body.
package fmpl

import (
	"errors"
	"fmt"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
)

// Errors callers test with errors.Is. Every error a call returns wraps one
// of these (or a driver error) with what was being done.
var (
	ErrConfig      = errors.New("fmpl: bad configuration")
	ErrNotInit     = errors.New("fmpl: not initialised or finalised")
	ErrRank        = errors.New("fmpl: rank out of range")
	ErrIndex       = errors.New("fmpl: matching area index out of range")
	ErrInFlight    = errors.New("fmpl: matching area index already in flight for this pair")
	ErrTruncated   = errors.New("fmpl: message larger than the posted receive buffer")
	ErrPeerDead    = errors.New("fmpl: peer rank is gone")
	ErrNoPending   = errors.New("fmpl: no such operation posted")
	ErrNoMemory    = errors.New("fmpl: link memory exhausted")
	ErrSpoolFull   = errors.New("fmpl: send spool full")
	ErrComm        = errors.New("fmpl: bad communicator")
	ErrCommKey     = errors.New("fmpl: inconsistent CommCreate keys")
	ErrUserOp      = errors.New("fmpl: user reduce function panicked")
	ErrCount       = errors.New("fmpl: bad element count or buffer size")
	ErrInitTimeout = errors.New("fmpl: peers did not answer Init")
	ErrDevice      = errors.New("fmpl: device refused a command")
	ErrProtocol    = errors.New("fmpl: peer broke the protocol")
)

// TagAny on a receive matches a send of any index from that source (2.5).
const TagAny = -1

// Comm is a communicator: a group of world ranks (3.3). CommWorld holds
// every rank and exists from Init.
type Comm int

// CommWorld is the predefined communicator of all ranks.
const CommWorld Comm = 0

// Defaults.
const (
	DefaultCount   = 64
	DefaultAnyRing = 256 << 10
	DefaultStaging = 256 << 10
	// InlineMax is the largest body a send copies into the library's
	// staging ring so that it completes when posted: a zero-copy send of a
	// few bytes would otherwise wait a whole acknowledgement for its
	// buffer, and a ping-pong would pay a round trip more per message.
	// 16 KiB: the copy costs about a microsecond, the wait a round trip
	// (an 8 KB bcast or reduce is one such send per tree edge).
	InlineMax = 16 << 10
	// ImmMax is the largest body that travels in the immediate of the
	// flag's PUSH instead of a PUSH of its own: one frame per message
	// instead of two, as RDMA's write-with-immediate.
	ImmMax = 8
	// internalIdx are the matching areas per pair kept for collectives
	// (beyond Count), plus one for TagAny.
	internalIdx = 4
)

// Internal matching-area indices (added to Count).
const (
	idxColl = iota // tree collectives
	idxBarrier
	idxComm
	idxSpare
	idxAny // the TagAny slot of a pair
)

// Config sets up a rank. Every rank of a job must give the same Size,
// Count and areas: a receiver computes where its header goes in the
// sender's link memory from them, and Init checks that they agree.
type Config struct {
	Rank, Size int
	// Nodes is the device node id of each world rank (default rank+1).
	Nodes []uint16
	// Count is the number of matching areas per pair (the paper's count):
	// the tags 0..Count-1 and the bound on operations outstanding per pair.
	Count int
	// MatchArea and FlagArea are the link addresses of the matching areas
	// and the receive-completion flags (fmpl_init's ma and fa). Zero lets
	// the library put them at the start of link memory. They need
	// MatchBytes and FlagBytes.
	MatchArea, FlagArea uint64
	// AnyRing is the bytes of the IPUSH ring of the any-source domain.
	AnyRing int
	// AnyAMT is the AMT entry of that ring (default 0).
	AnyAMT uint16
	// Staging is the bytes of the ring small sends are copied into.
	Staging int
	// InitTimeout bounds how long Init waits for every peer (default 60 s).
	InitTimeout time.Duration
	// ProbeAfter is how long a wait on one peer goes before the library
	// checks the peer is still there (default 20 ms).
	ProbeAfter time.Duration
}

// slots is the matching areas per pair: the user's, the internal ones and
// the TagAny slot.
func (c *Config) slots() int { return c.Count + internalIdx + 1 }

// MatchBytes is the link memory the matching areas of one rank take:
// 16 bytes per (peer, index). It grows with ranks times Count.
func MatchBytes(size, count int) uint64 { return uint64(size) * uint64(count+internalIdx+1) * hdrBytes }

// FlagBytes is the link memory of one rank's receive-completion flags.
func FlagBytes(size, count int) uint64 { return uint64(size) * uint64(count+internalIdx+1) * 8 }

const hdrBytes = 16

// Flag word bits: the completion flag the sender PUSHes after the body.
const (
	flagValid    = 1 << 63
	flagTrunc    = 1 << 62
	flagPoison   = 1 << 61
	flagImm      = 1 << 60 // the body (at most 8 bytes) rides in the flag PUSH's immediate
	flagIdxShift = 32
	flagIdxMask  = 1<<24 - 1
	sizeMask     = 1<<32 - 1
)

// cookie kinds (top byte of a command's cookie): what a DONE or ERROR
// status is about; the peer's world rank is in bits 32..55.
const (
	ckHeader = iota + 1
	ckBody
	ckFlag
	ckProbe
	ckHello
	ckAny
)

func cookie(kind, rank int) uint64 { return uint64(kind)<<56 | uint64(rank)<<32 }

// World is one rank's FMPL instance.
type World struct {
	d     *driver.Driver
	cfg   Config
	rank  int
	size  int
	nsl   int // slots per pair
	lmOff uint64
	lm    []byte
	reg   uapi.Region

	match, flags, hdrOut uint64 // link addresses of this rank's areas
	probe                uint64 // 8-byte sink remote probes write
	probeSrc             uint64
	helloSrc             uint64

	peers []peer
	slots []slot // [peer*nsl + idx]

	staging stagingRing
	heap    heap
	anyRing *driver.Ring
	anyBase uint64
	reasm   *driver.Reassembler
	anyQ    []anyMsg

	spool   spool
	timeout time.Duration // SendBufSet's; <0: none (synchronous)

	comms   []*commInfo
	commSeq int
	stages  Stages
	barTok  [63][8]byte // the barrier's posted receives, one per round
	stats   Stats
	bdOn    bool
	bd      Breakdown
	tHdr    int64 // Table 1 stamps: header seen by a send, header posted by a receive
	tPost   int64
	live    bool       // between Init and Finalize
	hdrq    []readyHdr // headers that came, to match with sends
	backlog []uapi.Status
	proto   int // protocol violations seen (a flag for nothing posted, ...)
	errs    []error

	nodeRank                                      map[uint16]int
	helloAcked, helloRetry, helloFrom, helloAfter []bool
	helloPending                                  bool
	helloBad                                      error
}

type readyHdr struct{ peer, idx int }

type peer struct {
	node    uint16
	done    uint64 // one past the highest command index to this peer known complete
	dead    error
	probing bool
	lastSig uint64      // one past the last signalled command posted to this peer
	hdrDesc []uapi.Desc // pre-built header PUSHes, one per slot (the paper's reused TCW)
	waiting []*sendOp   // sends to this peer waiting for a header, oldest first
}

type slot struct {
	hdr     bool // a header from the peer's receive is in our matching area
	hdrAddr uint64
	hdrSize uint32
	send    *sendOp // our Isend on this (peer, index), until IsendWait
	recv    *recvOp // our Irecv on this (peer, index), until IrecvWait

	sendStore sendOp // what send and recv point at: one of each per slot
	recvStore recvOp
}

type sendOp struct {
	peer, idx int
	addr      uint64 // link address of the body (the caller's, or a copy)
	size      int
	tmp       extent // a heap copy of a host buffer, freed at completion
	host      []byte // a small host buffer, copied into staging when sent
	spoolExt  extent
	posted    bool
	inline    bool   // body copied to staging: complete when posted
	cmd       uint64 // the flag PUSH's command index
	poison    bool
	spooled   bool
	err       error
}

type recvOp struct {
	addr   uint64
	size   int
	host   []byte // copy out here at completion (the buffer was not in link memory)
	tmp    extent
	done   bool
	got    int
	idx    int // the sender's index (differs from the slot for TagAny)
	trunc  bool
	poison bool
}

// Init starts FMPL on this rank's device (fmpl_init): it lays out the
// matching areas, the flags, the pre-built header descriptors, the staging
// ring and the any-source ring, then exchanges a hello with every other
// rank so that no rank writes into a peer that has not laid out its
// areas, and checks that every rank has the same layout.
func Init(d *driver.Driver, cfg Config) (*World, error) {
	if cfg.Size <= 0 || cfg.Rank < 0 || cfg.Rank >= cfg.Size {
		return nil, fmt.Errorf("fmpl init: rank %d of %d: %w", cfg.Rank, cfg.Size, ErrConfig)
	}
	if cfg.Count == 0 {
		cfg.Count = DefaultCount
	}
	if cfg.Count < 0 || cfg.Count > flagIdxMask-internalIdx-1 {
		return nil, fmt.Errorf("fmpl init: count %d: %w", cfg.Count, ErrConfig)
	}
	if cfg.Nodes == nil {
		for r := 0; r < cfg.Size; r++ {
			cfg.Nodes = append(cfg.Nodes, uint16(r+1))
		}
	}
	if len(cfg.Nodes) != cfg.Size {
		return nil, fmt.Errorf("fmpl init: %d node ids for %d ranks: %w", len(cfg.Nodes), cfg.Size, ErrConfig)
	}
	if cfg.Nodes[cfg.Rank] != d.Node() {
		return nil, fmt.Errorf("fmpl init: rank %d is node %d, the device is node %d: %w", cfg.Rank, cfg.Nodes[cfg.Rank], d.Node(), ErrConfig)
	}
	if cfg.AnyRing == 0 {
		cfg.AnyRing = DefaultAnyRing
	}
	if cfg.Staging == 0 {
		cfg.Staging = DefaultStaging
	}
	if cfg.InitTimeout == 0 {
		cfg.InitTimeout = 60 * time.Second
	}
	if cfg.ProbeAfter == 0 {
		cfg.ProbeAfter = 20 * time.Millisecond
	}
	g := d.Geometry()
	w := &World{d: d, cfg: cfg, rank: cfg.Rank, size: cfg.Size, nsl: cfg.slots(), lmOff: g.LinkMemOff,
		lm: d.LinkMem(), reg: d.Region(), timeout: -1}
	mb, fb := MatchBytes(cfg.Size, cfg.Count), FlagBytes(cfg.Size, cfg.Count)
	next := uint64(0)
	place := func(n uint64) uint64 { a := next; next = align(next+n, 64); return a }
	if cfg.MatchArea == 0 && cfg.FlagArea == 0 {
		cfg.MatchArea, cfg.FlagArea = place(mb), place(fb)
		w.cfg = cfg
	} else {
		next = align(max(cfg.MatchArea+mb, cfg.FlagArea+fb), 64)
	}
	if cfg.MatchArea%8 != 0 || cfg.FlagArea%8 != 0 || overlap(cfg.MatchArea, mb, cfg.FlagArea, fb) {
		return nil, fmt.Errorf("fmpl init: areas at %#x and %#x overlap or are misaligned: %w", cfg.MatchArea, cfg.FlagArea, ErrConfig)
	}
	w.match, w.flags = cfg.MatchArea, cfg.FlagArea
	w.hdrOut = place(mb)
	w.probe = place(8)
	w.probeSrc = place(8)
	w.helloSrc = place(layoutWords * 8) // its own: a hello may still be in flight when Init returns
	w.anyBase = place(uint64(cfg.AnyRing))
	stBase := place(uint64(cfg.Staging))
	if next >= uint64(len(w.lm)) {
		return nil, fmt.Errorf("fmpl init: areas need %d bytes, link memory has %d: %w", next, len(w.lm), ErrNoMemory)
	}
	for a := uint64(0); a < next; a += 8 {
		w.store(a, 0)
	}
	w.staging = stagingRing{base: stBase, size: uint64(cfg.Staging)}
	w.heap = newHeap(next, uint64(len(w.lm)))
	w.peers = make([]peer, cfg.Size)
	w.nodeRank = map[uint16]int{}
	for r, n := range cfg.Nodes {
		if _, dup := w.nodeRank[n]; dup {
			return nil, fmt.Errorf("fmpl init: node %d given to two ranks: %w", n, ErrConfig)
		}
		w.nodeRank[n] = r
	}
	w.slots = make([]slot, cfg.Size*w.nsl)
	for r := range w.peers {
		p := &w.peers[r]
		p.node = cfg.Nodes[r]
		if r == w.rank {
			continue
		}
		p.hdrDesc = make([]uapi.Desc, w.nsl)
		for i := range p.hdrDesc {
			p.hdrDesc[i] = uapi.Desc{Opcode: uapi.OpPUSH, DstNode: p.node, SrcProc: d.GPID(), Length: hdrBytes,
				LocalAddr: w.hdrOut + w.slotOff(r, i)*hdrBytes, RemoteAddr: w.match + w.slotOff(w.rank, i)*hdrBytes,
				Cookie: cookie(ckHeader, r)}
		}
	}
	ring, err := d.SetRing(cfg.AnyAMT, w.anyBase, uint64(cfg.AnyRing), false)
	if err != nil {
		return nil, fmt.Errorf("fmpl init: any-source ring: %w", err)
	}
	w.anyRing = ring
	w.reasm = driver.NewReassembler()
	w.comms = []*commInfo{worldComm(cfg.Size, cfg.Rank)}
	if err := w.hello(); err != nil {
		return nil, err
	}
	w.live = true
	return w, nil
}

func align(v, a uint64) uint64 { return (v + a - 1) &^ (a - 1) }

func overlap(a, an, b, bn uint64) bool { return a < b+bn && b < a+an }

// slotOff is the slot number of (peer, idx) in an area indexed by peer.
func (w *World) slotOff(peer, idx int) uint64 { return uint64(peer*w.nsl + idx) }

// load and store access words of link memory the device (and through it a
// peer) writes: always atomically.
func (w *World) load(addr uint64) uint64     { return w.reg.Load64At(w.lmOff + addr) }
func (w *World) store(addr uint64, v uint64) { w.reg.Store64At(w.lmOff+addr, v) }

// Rank is this process's rank in CommWorld.
func (w *World) Rank() int { return w.rank }

// Size is the number of ranks in CommWorld.
func (w *World) Size() int { return w.size }

// Count is the number of matching areas (tags) per pair.
func (w *World) Count() int { return w.cfg.Count }

// Driver is the driver FMPL runs on, for counters and stage stamps.
func (w *World) Driver() *driver.Driver { return w.d }

// Finalize ends FMPL on this rank (fmpl_finalize): it performs the sends
// still spooled once their receives are posted, waits at a barrier so no
// rank leaves while another still needs it, and waits until every command
// it posted has completed. The driver stays the caller's.
func (w *World) Finalize() error {
	if !w.live {
		return ErrNotInit
	}
	if err := w.Barrier(CommWorld); err != nil {
		w.live = false
		return fmt.Errorf("fmpl finalize: %w", err)
	}
	for w.spool.count() > 0 {
		if err := w.waitFor(-1, func() bool { return w.spool.count() == 0 }, 0); err != nil {
			w.live = false
			return fmt.Errorf("fmpl finalize: spooled sends: %w", err)
		}
	}
	err := w.drain()
	w.live = false
	if err != nil {
		return fmt.Errorf("fmpl finalize: %w", err)
	}
	return nil
}

// Quiesce waits until every command this rank posted has completed, so
// that a caller may use the driver directly (a raw baseline) without
// taking a completion FMPL still needs.
func (w *World) Quiesce() error {
	if !w.live {
		return ErrNotInit
	}
	w.progress()
	return w.drain()
}

// Pass hands FMPL a status the caller consumed from the driver itself
// while using it directly (a raw baseline): FMPL acts on it at its next
// call, so no completion it waits for is lost.
func (w *World) Pass(s uapi.Status) { w.backlog = append(w.backlog, s) }

// Stats counts what a rank did.
type Stats struct {
	Sends, Recvs, Spooled uint64
	// NotRung counts commands posted while the device's doorbell could
	// not be rung (driver.ErrNotRung): they ran at the device's next
	// look (within 100 ms) instead of at once, and their operations
	// succeeded. A count that grows says the attachment's doorbell is
	// broken, which slows every operation but fails none.
	NotRung uint64
	// Protocol counts statuses that fit no posted operation (must stay 0).
	Protocol int
}

// Stats returns the rank's counts so far.
func (w *World) Stats() Stats {
	s := w.stats
	s.Protocol = w.proto
	return s
}
