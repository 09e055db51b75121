package acp

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"golang.org/x/sys/unix"
)

// station is the communication goroutine's state: the command station
// (queue head, device commands in flight, outgoing message slots) and the
// delegate station (the ring, segment lookups, Sync and hello). Only the
// goroutine touches it.
type station struct {
	c        *ACP
	ring     *driver.Ring
	head     int64 // the last handle dequeued
	doneBits [QueueEntries]bool
	doneUpTo int64

	pend    map[uint64]func(error) // device commands in flight, by cookie
	cookie  uint64
	backlog []uapi.Status
	outFree []uint64
	outWait []outMsg
	resFree []uint64
	resWait []func()

	cache     map[uint64]segEnt // peers' segments, by rank<<8|seg
	resolving map[uint64][]func(segEnt, error)

	bounceBusy bool
	bounceWait []func()

	epoch     uint32
	rank      int
	rankNode  []uint16
	atomicDst map[int64]atomicDst

	syncSeq  uint32
	arrivals map[uint32]int
	syncFin  map[uint32]func()

	hello  *helloState
	heard  map[uint16]int // node -> rank, hellos of this epoch
	future []inMsg        // messages of a later epoch (a peer reset first)

	stats Stats
}

// Stats counts what the delegate station did.
type Stats struct {
	// Delegated counts messages executed for other ranks (COPY, ATOMIC, PUT).
	Delegated uint64
	// Stale counts messages of an earlier epoch dropped after a Reset.
	Stale uint64
	// Protocol counts messages that failed to decode (must stay 0).
	Protocol uint64
	// Resolves counts PULLs of a peer's registration table entry.
	Resolves uint64
	// DeviceAtomics counts FADD8 and CAS8 this rank had a device perform.
	DeviceAtomics uint64
	// NotRung counts device commands posted while the doorbell could not
	// be rung (driver.ErrNotRung): they ran at the device's next look
	// instead of at once, and completed as any other. A count that grows
	// says the attachment's doorbell is broken, which slows every
	// operation but fails none.
	NotRung uint64
}

type outMsg struct {
	node uint16
	m    msg
	done func(error)
}

type inMsg struct {
	m    msg
	node uint16
}

type segEnt struct{ base, size uint64 }

type atomicDst struct {
	g     GA
	width uint8
}

type helloState struct {
	fin      func(error)
	acked    []bool
	retryAt  []int64
	deadline int64
	bad      error
}

func (st *station) init(c *ACP, ring *driver.Ring) {
	*st = station{c: c, ring: ring, pend: map[uint64]func(error){}, cache: map[uint64]segEnt{},
		resolving: map[uint64][]func(segEnt, error){}, epoch: 1, rank: c.o.Rank, atomicDst: map[int64]atomicDst{},
		arrivals: map[uint32]int{}, syncFin: map[uint32]func(){}, heard: map[uint16]int{}}
	for i := uint64(0); i < outSlots; i++ {
		st.outFree = append(st.outFree, i)
	}
	for i := uint64(0); i < resolveSlots; i++ {
		st.resFree = append(st.resFree, i)
	}
}

// Stats returns the delegate station's counts so far; the goroutine
// counts with atomic adds, so any goroutine may ask at any time.
func (c *ACP) Stats() Stats {
	return Stats{Delegated: atomic.LoadUint64(&c.st.stats.Delegated), Stale: atomic.LoadUint64(&c.st.stats.Stale),
		Protocol: atomic.LoadUint64(&c.st.stats.Protocol), Resolves: atomic.LoadUint64(&c.st.stats.Resolves),
		DeviceAtomics: atomic.LoadUint64(&c.st.stats.DeviceAtomics), NotRung: atomic.LoadUint64(&c.st.stats.NotRung)}
}

// Idle thresholds of the loop (ns since the last work): spin running
// the device, yielding the core to the OS from yieldIdle on; from
// sleepIdle on sleep sleepFor between looks. Ranks on one host outnumber
// its cores: an idle rank that spun (even yielding, or in the driver's
// WaitTail) took a core from two busy ones and made their 8-byte copies
// 17-20 µs instead of 2-4. A delegation to a sleeping rank waits for its
// next look, a first command after a pause as long. When the driver
// yields at every look (ranks outnumber cores) the loop yields from its
// first idle look: a third-party copy with 3 ranks on 2 cores went from
// 21.6-21.8 µs to 9.1-9.3, two-party 8-byte operations 0.3-0.5 µs slower.
const (
	yieldIdle = 5_000
	sleepIdle = 200_000
	sleepFor  = 100 * time.Microsecond
)

// loop is the communication goroutine.
func (c *ACP) loop() {
	defer close(c.stopped)
	st := &c.st
	d := c.d
	d.Drive(true)
	defer d.Drive(false)
	yieldAfter := int64(yieldIdle)
	if d.YieldsCore() {
		yieldAfter = 0
	}
	last := monotime.Now()
	for i := 0; ; i++ {
		worked := d.Progress()
		worked = st.dispatchAll() || worked
		worked = st.station() || worked
		if st.hello != nil {
			st.helloTick()
		}
		if c.stop.Load() && len(st.pend) == 0 && len(st.outWait) == 0 {
			return
		}
		if worked {
			last = -1
			if i%16 == 0 {
				runtime.Gosched()
			}
			continue
		}
		runtime.Gosched()
		now := monotime.Now()
		if last < 0 {
			last = now
		}
		// Idle with nothing of ours in flight for a while: give the core
		// to the OS, not only to our goroutines, as ranks on one host
		// often outnumber its cores and a peer whose delegate station we
		// need may be waiting for one. Never while a completion is due:
		// this thread runs the device that reports it.
		if now-last > yieldAfter {
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
		if now-last < sleepIdle {
			continue
		}
		// Asleep: the device's own engine places what arrives meanwhile.
		d.Drive(false)
		time.Sleep(sleepFor)
		d.Drive(true)
		if err := d.Alive(); err != nil {
			e := fmt.Errorf("acp: device: %w", err)
			c.fatal.Store(&e)
			return
		}
	}
}

// dispatchAll consumes every status the device published.
func (st *station) dispatchAll() bool {
	worked := false
	for len(st.backlog) > 0 {
		s := st.backlog[0]
		st.backlog = st.backlog[1:]
		st.dispatch(&s)
		worked = true
	}
	for {
		s, ok := st.c.d.Poll()
		if !ok {
			return worked
		}
		st.dispatch(&s)
		worked = true
	}
}

func (st *station) dispatch(s *uapi.Status) {
	c := st.c
	switch s.Type {
	case uapi.StDone, uapi.StPULLDone, uapi.StError:
		fn := st.pend[s.Cookie]
		if fn == nil {
			return
		}
		delete(st.pend, s.Cookie)
		if s.Type != uapi.StError {
			fn(nil)
			return
		}
		err := fmt.Errorf("%v to node %d: %v: %w", s.Opcode, s.SrcNode, s.Err, ErrDevice)
		if s.Err == uapi.EUnreachable {
			err = fmt.Errorf("%v: %w", s.Opcode, ErrPeer)
		}
		fn(err)
	case uapi.StIPUSHMsg, uapi.StIPUSHPkt:
		if s.AMT != c.o.AMT {
			return
		}
		var b [msgSize]byte
		ok := s.Length == msgSize && s.Flags&uapi.StFlagWrapped == 0 && s.Addr+msgSize <= uint64(len(c.lm))
		if ok {
			for i := uint64(0); i < 8; i++ {
				w := c.reg.Load64At(c.lmOff + s.Addr + 8*i) // the device wrote it: an atomic load
				for j := uint64(0); j < 8; j++ {
					b[8*i+j] = byte(w >> (8 * j))
				}
			}
		}
		st.ring.Release(s.End)
		if !ok {
			atomic.AddUint64(&st.stats.Protocol, 1)
			return
		}
		m, err := decodeMsg(b[:])
		if err != nil {
			atomic.AddUint64(&st.stats.Protocol, 1)
			return
		}
		st.handle(m, s.SrcNode)
	}
}

// post publishes a signalled device command whose completion calls fn,
// consuming statuses into the backlog while the device's queue is full.
// A command whose doorbell could not be rung (driver.ErrNotRung) is
// posted: it stays pending and its completion calls fn, as any other's.
// Taken for a failure, it freed a message slot the device was still to
// read (the next message overwrote it) and failed a handle whose
// operation went on to happen.
func (st *station) post(dsc uapi.Desc, fn func(error)) {
	st.cookie++
	dsc.Cookie = st.cookie
	dsc.Flags |= uapi.FlagSignal
	dsc.SrcProc = st.c.d.GPID()
	st.pend[dsc.Cookie] = fn
	for {
		_, err := st.c.d.Post(&dsc)
		if driver.Posted(err) {
			if err != nil {
				atomic.AddUint64(&st.stats.NotRung, 1)
			}
			return
		}
		if !errors.Is(err, driver.ErrQueueFull) {
			delete(st.pend, dsc.Cookie)
			fn(fmt.Errorf("post %v to node %d: %w", dsc.Opcode, dsc.DstNode, err))
			return
		}
		st.c.d.Progress()
		for {
			s, ok := st.c.d.Poll()
			if !ok {
				break
			}
			st.backlog = append(st.backlog, s)
		}
		runtime.Gosched()
	}
}

// sendNode IPUSHes m into node's delegation ring; done (if not nil)
// learns the outcome once the device knows it.
func (st *station) sendNode(node uint16, m msg, done func(error)) {
	if len(st.outFree) == 0 {
		st.outWait = append(st.outWait, outMsg{node, m, done})
		return
	}
	c := st.c
	slot := st.outFree[len(st.outFree)-1]
	st.outFree = st.outFree[:len(st.outFree)-1]
	m.epoch = st.epoch
	addr := c.outBase + slot*msgSize
	for i, w := range m.words() {
		c.reg.Store64At(c.lmOff+addr+8*uint64(i), w)
	}
	st.post(uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagDirectAMT, DstNode: node, DstProc: uapi.GPID(node, 0),
		Length: msgSize, LocalAddr: addr, RemoteAddr: uint64(c.o.AMT)}, func(err error) {
		st.outFree = append(st.outFree, slot)
		if done != nil {
			done(err)
		}
		for len(st.outWait) > 0 && len(st.outFree) > 0 {
			o := st.outWait[0]
			st.outWait = st.outWait[1:]
			st.sendNode(o.node, o.m, o.done)
		}
	})
}

// send is sendNode to a rank.
func (st *station) send(rank int, m msg, done func(error)) {
	if rank < 0 || rank >= len(st.rankNode) || st.rankNode[rank] == 0 {
		if done != nil {
			done(fmt.Errorf("send to rank %d: %w", rank, ErrRank))
		}
		return
	}
	st.sendNode(st.rankNode[rank], m, done)
}

// fail records an error no handle owns (the layer's own traffic failed):
// every waiting caller returns it.
func (st *station) fail(err error) {
	if err != nil {
		e := fmt.Errorf("acp: %w", err)
		st.c.fatal.CompareAndSwap(nil, &e)
	}
}

// complete marks handle h done and advances the completed prefix.
func (st *station) complete(h int64, err error) {
	c := st.c
	if err != nil {
		c.errMu.Lock()
		c.errs[Handle(h)] = fmt.Errorf("handle %d: %w", h, err)
		c.errMu.Unlock()
	}
	st.doneBits[h%QueueEntries] = true
	for st.doneUpTo < st.head && st.doneBits[(st.doneUpTo+1)%QueueEntries] {
		st.doneUpTo++
		st.doneBits[st.doneUpTo%QueueEntries] = false
	}
	c.done.Store(st.doneUpTo)
}

// station is the command station: it starts the next command unless its
// order handle has not completed yet.
func (st *station) station() bool {
	c := st.c
	if st.head >= c.tail.Load() {
		return false
	}
	h := st.head + 1
	m := c.q[h%QueueEntries]
	if m.order > 0 && int64(m.order) < h && st.doneUpTo < int64(m.order) {
		return false
	}
	st.head = h
	switch m.kind {
	case kCopy:
		st.doCopy(m.dst, m.src, m.size, st.rank, uint64(h), func(err error) { st.complete(h, err) })
	case kAtomic:
		st.startAtomic(h, m)
	case kSync:
		st.syncStart(func() { st.complete(h, nil) })
	case kReset:
		st.syncStart(func() {
			st.reset(m.rank)
			st.helloStart(func(err error) { st.complete(h, err) })
		})
	case kHello:
		st.helloStart(func(err error) { st.complete(h, err) })
	}
	return true
}

// handle acts on one delegation message from node.
func (st *station) handle(m msg, node uint16) {
	if m.epoch < st.epoch {
		atomic.AddUint64(&st.stats.Stale, 1)
		return
	}
	if m.epoch > st.epoch {
		st.future = append(st.future, inMsg{m, node})
		return
	}
	parent := int(m.parent)
	if parent >= st.c.o.Procs {
		atomic.AddUint64(&st.stats.Protocol, 1)
		return
	}
	switch m.typ {
	case msgHello:
		if st.c.finalizing.Load() {
			return // this life ends: the hello is for the peer's next Init of ours
		}
		st.onHello(m, node)
		st.sendNode(node, msg{typ: msgHelloOK}, nil)
	case msgHelloOK:
		st.onHelloOK(node)
	case msgSync:
		st.arrivals[m.seq]++
		st.checkSync(m.seq)
	case msgRelease:
		if fin := st.syncFin[m.seq]; fin != nil {
			delete(st.syncFin, m.seq)
			fin()
		}
	case msgEnd:
		st.onEnd(int64(m.handle), codeErr(m.op), m.a)
	case msgCopy:
		atomic.AddUint64(&st.stats.Delegated, 1)
		rank, _, _, _ := st.c.split.Parts(GA(m.dst))
		if m.a > uapi.MaxXfer {
			st.reply(parent, m.handle, fmt.Errorf("delegated copy of %d bytes: %w", m.a, ErrSize), 0)
			return
		}
		srank, _, _, _ := st.c.split.Parts(GA(m.src))
		switch {
		case rank == st.rank:
			st.doCopy(GA(m.dst), GA(m.src), m.a, parent, m.handle, func(err error) { st.reply(parent, m.handle, err, 0) })
		case srank == st.rank:
			st.pushCopy(GA(m.dst), GA(m.src), m.a, parent, m.handle)
		default:
			st.reply(parent, m.handle, fmt.Errorf("delegated copy between ranks %d and %d: %w", srank, rank, ErrRank), 0)
		}
	case msgLanded:
		atomic.AddUint64(&st.stats.Delegated, 1)
		st.reply(parent, m.handle, nil, 0)
	case msgData:
		atomic.AddUint64(&st.stats.Delegated, 1)
		var b [inlineMax]byte
		st.reply(parent, m.handle, st.storeBytes(GA(m.dst), m.inlined(&b)), 0)
	case msgAtomic:
		atomic.AddUint64(&st.stats.Delegated, 1)
		st.execAtomic(parent, m.handle, m.op, m.width, GA(m.dst), GA(m.src), m.a, m.b)
	case msgPut:
		atomic.AddUint64(&st.stats.Delegated, 1)
		st.reply(parent, m.handle, st.storeLocal(GA(m.dst), m.width, m.a), 0)
	}
}

// reply tells parent that its handle is done, with value (an atomic's old
// value) when parent stores it itself.
func (st *station) reply(parent int, handle uint64, err error, value uint64) {
	if parent == st.rank {
		st.onEnd(int64(handle), err, value)
		return
	}
	st.send(parent, msg{typ: msgEnd, op: errCode(err), parent: uint32(parent), handle: handle, a: value}, func(e error) { st.fail(e) })
}

// onEnd completes handle h, first storing an atomic's old value where the
// caller asked when that is this rank's memory.
func (st *station) onEnd(h int64, err error, value uint64) {
	if h <= st.doneUpTo || h > st.head || st.doneBits[h%QueueEntries] {
		// Never issued, or completed already (a second END: the first
		// decided, and a later one must not turn a success into an error
		// or the other way round).
		atomic.AddUint64(&st.stats.Protocol, 1)
		return
	}
	if ad, ok := st.atomicDst[h]; ok {
		delete(st.atomicDst, h)
		if err == nil {
			err = st.storeLocal(ad.g, ad.width, value)
		}
	}
	st.complete(h, err)
}

func errCode(err error) uint8 {
	switch {
	case err == nil:
		return endOK
	case errors.Is(err, ErrUnregistered):
		return endUnregistered
	case errors.Is(err, ErrAlign):
		return endAlign
	case errors.Is(err, ErrRank):
		return endRank
	}
	return endDevice
}

func codeErr(code uint8) error {
	switch code {
	case endOK:
		return nil
	case endUnregistered:
		return fmt.Errorf("delegate: %w", ErrUnregistered)
	case endAlign:
		return fmt.Errorf("delegate: %w", ErrAlign)
	case endRank:
		return fmt.Errorf("delegate: %w", ErrRank)
	}
	return fmt.Errorf("delegate: %w", ErrDevice)
}
