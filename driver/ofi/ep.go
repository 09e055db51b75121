//go:build dimmnet_ofi

package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// The wire protocol between endpoints, inside the device's IPUSH: every
// message starts with a header in the payload, and the IPUSH's immediate
// carries the tag. An eager message's header is its first 16 bytes (the
// body follows; its length is the packet's less 16); every other kind's
// is all 48.
//
//	0      kind (eager, rts, fin, write)
//	1      flags: hdrTagged, hdrData
//	2..7   reserved (zero)
//	8..15  remote CQ data
//	16..23 message length
//	24..31 rts: the body's link address at the sender
//	32..39 rts, fin: the sender's operation id; rma: the requester's
//	40..47 rma: the address (offset in the registered region); the key
//	       rides in the immediate
const (
	hdrLen = 48
	// eagerHdrLen is the short header of an eager message. With it an
	// 8-byte message's frame (the ring's slot word, 78 bytes of frame
	// headers, 16 + 8) fits the two cache lines the shared-memory ring's
	// consumer has fetched when it sees the slot word; the whole header
	// put its last bytes in a third line, fetched from the sender's core
	// only then: the device's own ping-pong at 64 bytes (three lines)
	// takes 0.10-0.13 µs more than at 32 (two).
	eagerHdrLen = 16

	kindEager = 1
	kindRTS   = 2
	kindFIN   = 3
	// rma.go: requests a target serves from its registered regions
	kindWrite     = 4  // body inline
	kindWriteRTS  = 5  // body offered for PULL
	kindReadReq   = 6  // n bytes at addr wanted
	kindReadResp  = 7  // body inline (data: status)
	kindReadRTS   = 8  // body offered for PULL
	kindAtomicReq = 9  // data: operand, raddr: compare, flags>>4: op
	kindAtomicRsp = 10 // data: the old value
	kindAck       = 11 // data: status (0 or an FI error)

	hdrTagged = 1
	hdrData   = 2
)

// Link memory of an endpoint's device: the receive ring (AMT entry 0)
// first (ringKiB, FI_DIMMNET_RING_KB), then the arena every staging copy
// and rendezvous bounce comes from.
const ringAMT = 0

// The receive ring's default, least and largest sizes in KiB. The ring
// is small because its pages must stay hot: each 8-byte message takes 48
// bytes of it, so a 4 MiB ring came back to a page only after 87,000
// messages (0.2 s of a ping-pong), and on this project's VMs a page left
// that long cost about 15 µs at its next touch, though the guest counted
// no fault: a stall every 85 messages on each side, 0.11 µs of fi_pingpong's
// 8-byte mean (ppstat, 200,000 round trips: 1,867 stalls over 20 µs with
// 4 MiB, 860 with 256 KiB, where libfabric's shm has about 800). The
// receiver copies what no posted receive takes out of the ring at once
// (arrive), so the ring only absorbs the frames that come between two
// progress calls, and a full one holds the sender's frame until the
// provider frees room (a quarter ring at a time). The least holds two
// eager messages of the largest size and their headers, as the device
// requires of a ring.
const (
	ringKiBDefault = 256
	ringKiBMin     = 64
	ringKiBMax     = 64 << 10
)

// ringKiB is the receive ring's size the FI_DIMMNET_RING_KB variable
// asks for, within [ringKiBMin, ringKiBMax] and at most a quarter of the
// region; anything else is the default.
func ringKiB(region int) uint64 {
	s := param("ring_kb")
	if s == "" {
		return ringKiBDefault
	}
	if v, err := strconv.Atoi(s); err == nil && v >= ringKiBMin && v <= ringKiBMax && v<<10 <= region/4 {
		return uint64(v)
	}
	logf("FI_DIMMNET_RING_KB=%q: not a size in [%d, %d] KiB within a quarter of the region: %d KiB", s, ringKiBMin, ringKiBMax, ringKiBDefault)
	return ringKiBDefault
}

// ops' cookie kinds, the top byte of a command's cookie.
const (
	ckSend = iota + 1 // eager send or inject: free staging, complete the send
	ckRTS             // the rendezvous header: free staging
	ckCtl             // fin and other control: free staging
	ckPull            // a rendezvous body being pulled
	ckRMA             // rma and atomics
)

type txOp struct {
	kind      int
	ctx       unsafe.Pointer
	flags     uint64 // completion flags
	n         int
	stage     uint64 // link memory to free on completion
	stageN    uint64
	body      uint64 // rendezvous body, freed on FIN
	bodyN     uint64
	complete  bool // write a CQ entry on success
	tag, data uint64
	rbuf      uint64 // ckRTS: the rendezvous send it announces; ckRMA: the request
	dst       uint64
	inject    bool // FI_INJECT: the caller may reuse the buffer once the call returns
	silent    bool // an inject call: no completion; a failure is reported by injectErr

	lmHdr *lmBuf // linkmem.go: an eager send from the caller's buffer holds its header room
}

type recvOp struct {
	buf         unsafe.Pointer
	size        int
	src         uint64
	tag, ignore uint64
	ctx         unsafe.Pointer
	flags       uint64

	mr   *multiRecv // multirecv.go: a posted FI_MULTI_RECV buffer's state
	from *multiRecv // multirecv.go: the buffer this message's place is in
}

// inMsg is a message that arrived: eager bytes, or a rendezvous offer.
type inMsg struct {
	node   uint16
	tagged bool
	tag    uint64
	hasCQ  bool
	data   uint64
	n      int
	body   []byte // eager
	rts    bool
	raddr  uint64 // rts: body at the sender
	rid    uint64 // rts: the sender's op id
}

type pullOp struct {
	msg    *inMsg
	r      *recvOp
	done   func(body []byte) // rma: what to do with the body, instead of a receive
	fail   func(err, prov int)
	bounce uint64
	n      int // bytes pulled (min of message and buffer)
	id     uint64
	direct bool // linkmem.go: pulled straight into the caller's link memory, no bounce
}

// endpoint is one FI_EP_RDM endpoint: one device of its own on the
// chosen medium, one driver, and the matching state.
type endpoint struct {
	c         unsafe.Pointer // its struct dn_ep (C memory): the receive queue (rxq.go); nil in Go tests
	dev       *device
	d         *driver.Driver
	lm        []byte
	ring      *driver.Ring
	ringBytes uint64 // the receive ring's size, at link address 0
	arena     arena
	addr      [addrLen]byte
	node      uint16
	caps      uint64
	txFlags   uint64
	rxFlags   uint64

	txcq, rxcq      *cq
	txSel, rxSel    bool
	txCntr, rxCntr  *cntr
	rdCntr, wrCntr  *cntr
	remWrCntr       *cntr
	av              *av
	enabled, closed bool
	posted          [2][]*recvOp // [0] messages, [1] tagged
	unexp           [2][]*inMsg
	claimed         map[unsafe.Pointer]*inMsg
	ops             map[uint64]*txOp
	rdv             map[uint64]*txOp // rendezvous sends waiting for their FIN
	pulls           map[uint64]*pullOp
	waiting         []*pullOp // pulls waiting for bounce room
	nextID          uint64
	eagerMax        int
	minMultiRecv    int                  // FI_OPT_MIN_MULTI_RECV (multirecv.go)
	rmaOps          map[uint64]*rmaOp    // rma requests waiting for their answer
	rmaBodies       map[uint64][2]uint64 // link memory offered for PULL, freed by the answer
	linkBufs        lmState              // linkmem.go: the caller's link-memory buffers
	inj             injState             // inject.go: unsignalled injects' stagings

	stats     epStats
	driving   bool          // the caller's thread runs the device (drive)
	calls     atomic.Uint64 // calls that progressed: release looks whether it moved
	seen      atomic.Uint64 // calls at release's last look
	releaser  *time.Timer   // hands the device back to its engine (release)
	lastYield int64         // monotime of the caller's last pass through the scheduler (reschedule)

	// Spent operations kept for the next ones: a message costs no garbage
	// (a collection's assists and workers stall the caller's thread).
	txPool pool[txOp]
	rxPool pool[recvOp]
}

// poolMax bounds each free list: what a burst left beyond it goes to the
// collector.
const poolMax = 256

// pool is a bounded free list of one kind of operation: what a burst
// left beyond poolMax goes to the collector.
type pool[T any] struct{ free []*T }

// get returns a zeroed operation.
func (p *pool[T]) get() *T {
	if n := len(p.free); n > 0 {
		x := p.free[n-1]
		p.free = p.free[:n-1]
		return x
	}
	return new(T)
}

// put keeps an operation nothing refers to any more.
func (p *pool[T]) put(x *T) {
	if len(p.free) < poolMax {
		var zero T
		*x = zero
		p.free = append(p.free, x)
	}
}

// newTx returns a zeroed transmit operation.
func (e *endpoint) newTx() *txOp { return e.txPool.get() }

// freeTx keeps a transmit operation nothing refers to any more.
func (e *endpoint) freeTx(op *txOp) { e.txPool.put(op) }

// newRecv returns a receive operation for the caller to fill.
func (e *endpoint) newRecv() *recvOp { return e.rxPool.get() }

// freeRecv keeps a completed receive nothing refers to any more.
func (e *endpoint) freeRecv(r *recvOp) { e.rxPool.put(r) }

func openEndpoint(caps, txFlags, rxFlags uint64) (*endpoint, error) {
	dev, err := openDevice()
	if err != nil {
		return nil, err
	}
	e := &endpoint{dev: dev, d: dev.drv, caps: caps, txFlags: txFlags, rxFlags: rxFlags,
		claimed: map[unsafe.Pointer]*inMsg{}, ops: map[uint64]*txOp{}, rdv: map[uint64]*txOp{},
		pulls: map[uint64]*pullOp{}, rmaOps: map[uint64]*rmaOp{}, rmaBodies: map[uint64][2]uint64{}, addr: dev.addr, node: dev.node}
	e.lm = e.d.LinkMem()
	lmSize := uint64(len(e.lm))
	e.ringBytes = ringKiB(len(e.lm)) << 10
	e.ring, err = e.d.SetRing(ringAMT, 0, e.ringBytes, false)
	if err != nil {
		dev.close()
		return nil, fmt.Errorf("receive ring of %d KiB: %w", e.ringBytes>>10, err)
	}
	e.arena.init(e.ringBytes, lmSize-e.ringBytes)
	e.d.SetWindow(e.ringBytes, lmSize-e.ringBytes)
	e.minMultiRecv = minMultiRecvDefault
	e.eagerMax = e.d.MTU() - eagerHdrLen
	if e.eagerMax > 16<<10 {
		e.eagerMax = 16 << 10
	}
	logf("endpoint on node %d (%s), link memory %d MiB, receive ring %d KiB, eager up to %d", e.node, dev.medium, lmSize>>20, e.ringBytes>>10, e.eagerMax)
	return e, nil
}

func (e *endpoint) bind(o any, flags uint64) int {
	if trace {
		logf("bind %T flags %#x", o, flags)
	}
	switch v := o.(type) {
	case *cq:
		if err := e.watch(&v.w); err != 0 {
			return err
		}
		if flags&fTransmit != 0 {
			e.txcq = v
			e.txSel = flags&fSelective != 0
		}
		if flags&fRecv != 0 {
			e.rxcq = v
			e.rxSel = flags&fSelective != 0
		}
		v.eps = appendOnce(v.eps, e)
	case *av:
		if e.av != nil && e.av != v {
			return eInval
		}
		e.av = v
		v.users++
		v.eps = appendOnce(v.eps, e)
		for _, en := range v.entries {
			if en.valid {
				e.admit(en.address)
			}
		}
	case *cntr:
		if err := e.watch(&v.w); err != 0 {
			return err
		}
		if flags&fSend != 0 {
			e.txCntr = v
		}
		if flags&fRecv != 0 {
			e.rxCntr = v
		}
		if flags&fRead != 0 {
			e.rdCntr = v
		}
		if flags&fWrite != 0 {
			e.wrCntr = v
		}
		if flags&fRemWrite != 0 {
			e.remWrCntr = v
		}
		v.eps = appendOnce(v.eps, e)
	default:
		return eInval
	}
	return 0
}

func appendOnce(s []*endpoint, e *endpoint) []*endpoint {
	for _, x := range s {
		if x == e {
			return s
		}
	}
	return append(s, e)
}

func remove(s []*endpoint, e *endpoint) []*endpoint {
	for i, x := range s {
		if x == e {
			return append(s[:i:i], s[i+1:]...)
		}
	}
	return s
}

func (e *endpoint) enable() int {
	if e.av == nil || (e.txcq == nil && e.rxcq == nil) {
		return -C_FI_ENOCQ
	}
	e.enabled = true
	e.setQueueing(true)
	return 0
}

// admit tells the device's medium of a peer fi_av_insert names.
func (e *endpoint) admit(a address) error {
	return e.dev.admit(a)
}

// epStats counts what an endpoint initiated, printed at close with
// FI_DIMMNET_STATS=1 (how a test sees which paths a program took).
type epStats struct {
	Sends, Rendezvous, Recvs, RMAWrites, RMAReads, Atomics int
}

var printStats = os.Getenv("FI_DIMMNET_STATS") == "1"

// close cancels every posted receive into its CQ (so a caller waiting on
// one learns it, never hangs), unbinds and closes the device.
func (e *endpoint) close() {
	if e.closed {
		return
	}
	e.setQueueing(false)
	e.progress() // takes the receives queued in C, which are cancelled below
	for k := range e.posted {
		for _, r := range e.posted[k] {
			if r.mr != nil {
				e.cancelMulti(r, true)
				continue
			}
			e.rxErr(r, errCancel, 0, 0)
		}
		e.posted[k] = nil
	}
	e.closed = true
	if printStats {
		// the device's nonzero counters on a line of their own (retransmits,
		// standalone ACKs, ring-full holds: what a slow run's device did)
		var ctrs strings.Builder
		for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
			if v := e.d.Counter(c); v != 0 {
				fmt.Fprintf(&ctrs, " %v=%d", c, v)
			}
		}
		fmt.Fprintf(os.Stderr, "dimmnet-fi stats: node %d %+v\ndimmnet-fi device: node %d%s\n", e.node, e.stats, e.node, ctrs.String())
		fmt.Fprintf(os.Stderr, "dimmnet-fi linkmem: node %d %+v\n", e.node, e.linkBufs.counts) // linkmem.go
	}
	for _, q := range []*cq{e.txcq, e.rxcq} {
		if q != nil {
			q.eps = remove(q.eps, e)
		}
	}
	for _, c := range []*cntr{e.txCntr, e.rxCntr, e.rdCntr, e.wrCntr, e.remWrCntr} {
		if c != nil {
			c.eps = remove(c.eps, e)
		}
	}
	if e.av != nil {
		e.av.users--
		e.av.eps = remove(e.av.eps, e)
	}
	if e.releaser != nil {
		e.releaser.Stop()
	}
	if e.driving {
		e.d.Drive(false)
		e.driving = false
	}
	e.unwatchAll()
	e.dev.close()
}

// sleep waits for the device, without the provider's lock, for at most d.
func (e *endpoint) sleep(d time.Duration) {
	if e.closed {
		time.Sleep(min(d, time.Millisecond))
		return
	}
	e.d.WaitTail(int64(min(d, 10*time.Millisecond)))
}

func (e *endpoint) id() uint64 {
	e.nextID++
	return e.nextID & (1<<56 - 1)
}

// ---------------------------------------------------------------- sending

func (e *endpoint) peer(fa uint64) (avEntry, bool) {
	return e.av.get(fa)
}

func (e *endpoint) send(buf unsafe.Pointer, n int, dst, tag, data uint64, ctx unsafe.Pointer, flags uint64) int {
	if e.closed || !e.enabled {
		return eInval
	}
	if n < 0 || n > maxMsg || (n > 0 && buf == nil) {
		return eMsgSize
	}
	if flags&dnDefault != 0 {
		flags = flags&^dnDefault | e.txFlags
	}
	if trace {
		logf("send %d bytes to %d tag %#x data %#x flags %#x", n, dst, tag, data, flags)
	}
	tagged := flags&fTagged != 0
	if flags&fInject != 0 && n > injectMax {
		return eMsgSize
	}
	p, ok := e.peer(dst)
	if !ok {
		// a send to an address never inserted: named in an error entry,
		// or refused at once when nothing would carry one (an inject call)
		if flags&dnInjectCall != 0 {
			return eInval
		}
		e.txErr(ctx, flags, n, tag, data, errAddr, 0)
		return 0
	}
	var hflags byte
	if tagged {
		hflags |= hdrTagged
	}
	if flags&fCQData != 0 {
		hflags |= hdrData
	}
	src := unsafe.Slice((*byte)(buf), n)
	if flags&dnInjectCall != 0 && e.txCntr == nil && p.node != e.node && n <= e.eagerMax {
		// an inject nothing completes: copied, posted unsignalled, no
		// operation kept (inject.go)
		e.stats.Sends++
		e.linkBufs.counts.CopiedSends++
		at, ok := e.alloc(uint64(eagerHdrLen + n))
		if !ok {
			return eAgain
		}
		e.putEagerHdr(at, hflags, data)
		copy(e.lm[at+eagerHdrLen:], src)
		return e.injectPush(p.node, at, eagerHdrLen+n, tag)
	}
	op := e.newTx()
	op.ctx, op.n, op.tag, op.data, op.dst = ctx, n, tag, data, dst
	op.flags = fSend | fMsg
	if tagged {
		op.flags = fSend | fTagged
	}
	op.complete = flags&dnInjectCall == 0 && (!e.txSel || flags&fCompletion != 0)
	op.inject = flags&fInject != 0
	op.silent = flags&dnInjectCall != 0
	if p.node == e.node {
		// to ourselves: the device sends nowhere but out, so the message
		// is delivered here, as it would arrive, and finds the receives
		// queued in C before it. A send elsewhere leaves them to the next
		// progress, which takes them before any arrival: fi_pingpong
		// re-posts its receive just before it injects, and taking it
		// here put its posting on the message's path.
		e.takeQueued()
		m := inMsg{node: e.node, tagged: tagged, tag: tag, hasCQ: hflags&hdrData != 0, data: data, n: n, body: src}
		e.arrive(&m)
		e.txDone(op)
		e.freeTx(op)
		return 0
	}
	e.stats.Sends++
	if ret, handled := e.sendLink(op, p, buf, n, hflags); handled {
		return ret
	}
	e.linkBufs.counts.CopiedSends++
	if n <= e.eagerMax {
		at, ok := e.alloc(uint64(eagerHdrLen + n))
		if !ok {
			e.freeTx(op)
			return eAgain
		}
		e.putEagerHdr(at, hflags, data)
		copy(e.lm[at+eagerHdrLen:], src)
		op.kind = ckSend
		op.stage, op.stageN = at, uint64(eagerHdrLen+n)
		if err := e.ipush(p.node, at, eagerHdrLen+n, tag, ckSend, op); err != 0 {
			e.freeTx(op)
			return err
		}
		return 0
	}
	// rendezvous: the body waits in link memory for the receiver to PULL
	e.stats.Rendezvous++
	body, ok := e.alloc(uint64(n))
	if !ok {
		e.freeTx(op)
		return eAgain
	}
	at, ok := e.alloc(hdrLen)
	if !ok {
		e.arena.free(body, uint64(n))
		e.freeTx(op)
		return eAgain
	}
	copy(e.lm[body:], src)
	id := e.id()
	op.kind = ckSend
	op.body, op.bodyN = body, uint64(n)
	e.rdv[id] = op
	e.putHdr(at, kindRTS, hflags, data, uint64(n), body, id)
	rts := e.newTx()
	rts.kind, rts.stage, rts.stageN, rts.rbuf = ckRTS, at, hdrLen, id
	if err := e.ipush(p.node, at, hdrLen, tag, ckRTS, rts); err != 0 {
		delete(e.rdv, id)
		e.arena.free(body, uint64(n))
		e.freeTx(op)
		return err
	}
	return 0
}

func (e *endpoint) alloc(n uint64) (uint64, bool) {
	at, ok := e.arena.alloc(n)
	if !ok {
		e.progress() // completions free staging
		at, ok = e.arena.alloc(n)
	}
	if !ok && e.inj.held > 0 {
		e.injectFence() // unsignalled injects' stagings wait for a DONE
		e.progress()
		at, ok = e.arena.alloc(n)
	}
	return at, ok
}

// putEagerHdr writes an eager message's short header at link address at.
func (e *endpoint) putEagerHdr(at uint64, flags byte, data uint64) {
	h := e.lm[at : at+eagerHdrLen]
	clear(h[:8])
	h[0], h[1] = kindEager, flags
	binary.LittleEndian.PutUint64(h[8:], data)
}

func (e *endpoint) putHdr(at uint64, kind, flags byte, data, n, raddr, id uint64) {
	h := e.lm[at : at+hdrLen]
	clear(h[40:])
	clear(h[:8])
	h[0], h[1] = kind, flags
	binary.LittleEndian.PutUint64(h[8:], data)
	binary.LittleEndian.PutUint64(h[16:], n)
	binary.LittleEndian.PutUint64(h[24:], raddr)
	binary.LittleEndian.PutUint64(h[32:], id)
}

// ipush posts one IPUSH of n bytes at link address at to node's ring; op
// is completed (or failed) by its DONE or ERROR status.
func (e *endpoint) ipush(node uint16, at uint64, n int, imm uint64, kind int, op *txOp) int {
	id := e.id()
	_, err := e.d.Post(&uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagSignal | uapi.FlagDirectAMT | uapi.FlagPktStatus,
		DstNode: node, SrcProc: e.d.GPID(), Length: uint32(n), LocalAddr: at, RemoteAddr: ringAMT,
		Imm: imm, Cookie: uint64(kind)<<56 | id})
	if postFailed("post", node, err) {
		e.arena.free(op.stage, op.stageN)
		return postErr("post", node, err)
	}
	e.ops[id] = op
	return 0
}

// postFailed reports whether a command's post failed: it was not
// published, and what it would have read may be freed. A doorbell that
// could not be rung (driver.ErrNotRung) is logged: that command is
// posted, and runs when the device next looks.
func postFailed(what string, node uint16, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrNotRung) {
		logf("%s to node %d: %v", what, node, err)
		return false
	}
	return true
}

// postErr is what a call returns when the device refused its command: a
// full command queue is -FI_EAGAIN (the caller tries again); anything
// else is logged, naming what was posted, and is -FI_EIO.
func postErr(what string, node uint16, err error) int {
	if errors.Is(err, driver.ErrQueueFull) {
		return eAgain
	}
	logf("%s to node %d: %v", what, node, err)
	return -errIO
}

func (e *endpoint) txDone(op *txOp) {
	if e.txCntr != nil && op.flags&fSend != 0 {
		e.txCntr.val++
	}
	if op.complete && e.txcq != nil {
		e.txcq.push(cqEntry{ctx: op.ctx, flags: op.flags, src: notAvail})
	}
}

func (e *endpoint) txErr(ctx unsafe.Pointer, flags uint64, n int, tag, data uint64, err, prov int) {
	if e.txCntr != nil {
		e.txCntr.errs++
	}
	f := fSend | fMsg
	if flags&fTagged != 0 {
		f = fSend | fTagged
	}
	if e.txcq != nil {
		e.txcq.push(cqEntry{ctx: ctx, flags: f, len: n, tag: tag, data: data, err: err, provErr: prov, src: notAvail})
	}
}

// ---------------------------------------------------------------- receiving

func (e *endpoint) recv(r *recvOp) int {
	if e.closed || !e.enabled {
		return eInval
	}
	if r.size < 0 || (r.size > 0 && r.buf == nil) {
		return eInval
	}
	if r.flags&dnDefault != 0 {
		r.flags = r.flags&^dnDefault | e.rxFlags
		if r.flags&fTagged != 0 {
			r.flags &^= fMultiRecv // the endpoint's default is for fi_recv: fi_trecv has no multi-receive (1.17)
		}
	}
	if trace {
		logf("recv %d bytes from %d tag %#x ignore %#x flags %#x ctx %p", r.size, r.src, r.tag, r.ignore, r.flags, r.ctx)
	}
	k := 0
	if r.flags&fTagged != 0 {
		k = 1
	}
	if e.caps&fDirected == 0 {
		r.src = addrUnspec
	}
	if r.flags&fMultiRecv != 0 {
		if r.flags&(fTagged|fPeek|fClaim) != 0 {
			return eInval // untagged receives only, never a look at one message
		}
		return e.postMulti(r)
	}
	if r.flags&fPeek != 0 {
		e.progress()
		i := e.findUnexp(k, r)
		if i < 0 {
			e.rxErr(r, errNoMsg, 0, 0)
			return 0
		}
		m := e.unexp[k][i]
		if r.flags&(fClaim|fDiscard) != 0 {
			e.unexp[k] = append(e.unexp[k][:i], e.unexp[k][i+1:]...)
		}
		if r.flags&fClaim != 0 {
			e.claimed[r.ctx] = m
		}
		if r.flags&fDiscard != 0 && r.flags&fClaim == 0 && m.rts {
			e.sendFIN(m) // the sender's body is not wanted: free it
		}
		e.rxComplete(r, m, m.n, 0, true)
		return 0
	}
	if r.flags&fClaim != 0 {
		m, ok := e.claimed[r.ctx]
		if !ok {
			return eInval
		}
		delete(e.claimed, r.ctx)
		if r.flags&fDiscard != 0 {
			if m.rts {
				e.sendFIN(m)
			}
			e.rxComplete(r, m, 0, 0, true)
			return 0
		}
		e.deliver(r, m)
		return 0
	}
	e.stats.Recvs++
	if i := e.findUnexp(k, r); i >= 0 {
		m := e.unexp[k][i]
		e.unexp[k] = append(e.unexp[k][:i], e.unexp[k][i+1:]...)
		e.deliver(r, m)
		return 0
	}
	e.posted[k] = append(e.posted[k], r)
	return 0
}

func (e *endpoint) matches(r *recvOp, m *inMsg) bool {
	if r.src != addrUnspec {
		p, ok := e.av.get(r.src)
		if !ok || p.node != m.node {
			return false
		}
	}
	return !m.tagged || (m.tag^r.tag)&^r.ignore == 0
}

func (e *endpoint) findUnexp(k int, r *recvOp) int {
	for i, m := range e.unexp[k] {
		if e.matches(r, m) {
			return i
		}
	}
	return -1
}

// arrive matches a message that came with the posted receives, or keeps
// a copy of it until one is posted: m itself is not kept.
func (e *endpoint) arrive(m *inMsg) {
	k := 0
	if m.tagged {
		k = 1
	}
	for i, r := range e.posted[k] {
		if e.matches(r, m) {
			if r.mr != nil {
				e.arriveMulti(i, m) // multirecv.go
				return
			}
			e.posted[k] = append(e.posted[k][:i], e.posted[k][i+1:]...)
			e.deliver(r, m)
			return
		}
	}
	e.keep(m)
}

// keep keeps a copy of message m, which no receive took, until one is
// posted.
func (e *endpoint) keep(m *inMsg) {
	k := 0
	if m.tagged {
		k = 1
	}
	kept := new(inMsg) // m is the caller's (on its stack)
	*kept = *m
	if !m.rts {
		kept.body = append([]byte(nil), m.body...) // it lay in the ring, which is released
	}
	e.unexp[k] = append(e.unexp[k], kept)
}

// deliver moves message m into receive r: copied now if it came eagerly,
// pulled from the sender's link memory if it is a rendezvous offer. r is
// spent once completed; m is not kept.
func (e *endpoint) deliver(r *recvOp, m *inMsg) {
	if !m.rts {
		n := min(m.n, r.size)
		if n > 0 {
			copy(unsafe.Slice((*byte)(r.buf), n), m.body[:n])
		}
		e.rxComplete(r, m, n, m.n-n, false)
		e.freeRecv(r)
		return
	}
	if min(m.n, r.size) == 0 {
		e.sendFIN(m)
		e.rxComplete(r, m, 0, m.n, false)
		e.freeRecv(r)
		return
	}
	kept := new(inMsg) // the pull outlives the caller's m
	*kept = *m
	e.startPull(&pullOp{msg: kept, r: r, n: min(m.n, r.size)})
}

func (e *endpoint) startPull(p *pullOp) {
	if e.pullLink(p) {
		return
	}
	at, ok := e.arena.alloc(uint64(p.n))
	if !ok {
		e.injectFence() // held inject stagings may be what keeps the room
		e.waiting = append(e.waiting, p)
		return
	}
	p.bounce = at
	p.id = e.id()
	_, err := e.d.Pull(p.msg.node, at, p.msg.raddr, uint32(p.n), uint64(ckPull)<<56|p.id)
	if postFailed("pull", p.msg.node, err) {
		e.arena.free(at, uint64(p.n))
		if errors.Is(err, driver.ErrQueueFull) {
			e.waiting = append(e.waiting, p)
			return
		}
		if p.fail != nil {
			p.fail(errIO, 0)
		} else {
			e.rxErr(p.r, errIO, 0, 0)
		}
		return
	}
	e.pulls[p.id] = p
}

func (e *endpoint) pullDone(p *pullOp, s *uapi.Status) {
	delete(e.pulls, p.id)
	if p.direct {
		e.pullLinkDone(p, s)
		return
	}
	if p.done != nil {
		if s.Type == uapi.StError {
			p.fail(errFor(s), int(s.Err))
		} else {
			p.done(e.lm[p.bounce : p.bounce+uint64(p.n)])
		}
		e.arena.free(p.bounce, uint64(p.n))
		return
	}
	if s.Type == uapi.StError {
		e.arena.free(p.bounce, uint64(p.n))
		e.rxErrMsg(p.r, p.msg, errFor(s), int(s.Err))
		e.freeRecv(p.r)
		return
	}
	copy(unsafe.Slice((*byte)(p.r.buf), p.n), e.lm[p.bounce:p.bounce+uint64(p.n)])
	e.linkBufs.counts.CopiedPulls++
	e.arena.free(p.bounce, uint64(p.n))
	e.sendFIN(p.msg)
	e.rxComplete(p.r, p.msg, p.n, p.msg.n-p.n, false)
	e.freeRecv(p.r)
}

// sendFIN tells a rendezvous sender its body may go.
func (e *endpoint) sendFIN(m *inMsg) {
	at, ok := e.alloc(hdrLen)
	if !ok {
		logf("no link memory for a FIN to node %d: its sender keeps its body", m.node)
		return
	}
	e.putHdr(at, kindFIN, 0, 0, 0, 0, m.rid)
	op := e.newTx()
	op.kind, op.stage, op.stageN = ckCtl, at, hdrLen
	if e.ipush(m.node, at, hdrLen, 0, ckCtl, op) != 0 {
		e.freeTx(op)
	}
}

func (e *endpoint) rxCQFlags(r *recvOp, m *inMsg) uint64 {
	f := fRecv | fMsg
	if r.flags&fTagged != 0 {
		f = fRecv | fTagged
	}
	if m != nil && m.hasCQ {
		f |= fCQData
	}
	return f
}

// rxComplete writes receive r's completion: n bytes of m landed, over
// bytes did not fit (an FI_ETRUNC error entry then).
func (e *endpoint) rxComplete(r *recvOp, m *inMsg, n, over int, peek bool) {
	src := e.av.source(m.node)
	var release uint64 // FI_MULTI_RECV: the last message of a released multi-receive buffer
	if r.from != nil && e.placedDone(r) {
		release = fMultiRecv
	}
	if over > 0 {
		if e.rxCntr != nil {
			e.rxCntr.errs++
		}
		if e.rxcq != nil {
			e.rxcq.push(cqEntry{ctx: r.ctx, flags: e.rxCQFlags(r, m), len: n, buf: r.buf, data: m.data, tag: m.tag,
				olen: over, err: errTrunc, src: src})
		}
		if release != 0 {
			e.releaseEntry(r.ctx)
		}
		return
	}
	if e.rxCntr != nil {
		e.rxCntr.val++
	}
	if e.rxcq != nil && (!e.rxSel || r.flags&fCompletion != 0 || peek) {
		var buf unsafe.Pointer
		if !peek {
			buf = r.buf
		}
		e.rxcq.push(cqEntry{ctx: r.ctx, flags: e.rxCQFlags(r, m) | release, len: n, buf: buf, data: m.data, tag: m.tag, src: src})
	} else if release != 0 {
		e.releaseEntry(r.ctx) // written even when the receive's completions are suppressed
	}
}

func (e *endpoint) rxErr(r *recvOp, err, over, prov int) {
	if e.rxCntr != nil {
		e.rxCntr.errs++
	}
	if e.rxcq != nil {
		e.rxcq.push(cqEntry{ctx: r.ctx, flags: e.rxCQFlags(r, nil), buf: r.buf, tag: r.tag, olen: over, err: err, provErr: prov, src: notAvail})
	}
	if r.from != nil && e.placedDone(r) {
		e.releaseEntry(r.ctx)
	}
}

func (e *endpoint) rxErrMsg(r *recvOp, m *inMsg, err, prov int) {
	if e.rxCntr != nil {
		e.rxCntr.errs++
	}
	if e.rxcq != nil {
		e.rxcq.push(cqEntry{ctx: r.ctx, flags: e.rxCQFlags(r, m), buf: r.buf, tag: m.tag, data: m.data, err: err, provErr: prov, src: e.av.source(m.node)})
	}
	if r.from != nil && e.placedDone(r) {
		e.releaseEntry(r.ctx)
	}
}

func (e *endpoint) cancel(ctx unsafe.Pointer) int {
	e.takeQueued()
	for k := range e.posted {
		for i, r := range e.posted[k] {
			if r.ctx == ctx {
				e.posted[k] = append(e.posted[k][:i], e.posted[k][i+1:]...)
				if r.mr != nil {
					e.cancelMulti(r, false)
					return 0
				}
				e.rxErr(r, errCancel, 0, 0)
				return 0
			}
		}
	}
	return eNoEnt
}

// ---------------------------------------------------------------- progress

// progress runs the device on the calling thread and takes every status
// it published: the provider's whole progress model (FI_PROGRESS_MANUAL).
func (e *endpoint) progress() bool {
	if e.closed {
		return false
	}
	d := e.d
	e.takeQueued()
	e.drive()
	worked := d.Progress()
	for {
		s, ok := d.Poll()
		if !ok {
			break
		}
		worked = true
		e.status(&s)
	}
	if len(e.waiting) > 0 {
		w := e.waiting
		e.waiting = nil
		for _, p := range w {
			e.startPull(p)
		}
	}
	return worked
}

// The caller's thread runs the endpoint's device (run to completion)
// from its first call into the provider until it has stayed away for a
// whole releaseNs: a caller spinning on fi_cq_read keeps the device on its
// own thread, with the device's engine standing down, and a caller gone
// elsewhere (computing, or in its own socket exchange) leaves it to the
// engine within one to two releaseNs (inside a lossless link's 5 ms
// retransmission floor), so peers' frames are still acknowledged and
// their PULLs served. While calls come they push the timer out
// (releasePush), so it does not fire. Handing the device over at every
// call instead woke the engine at every fi_cq_read: fi_pingpong -S 8 took
// 365-410 µs a round trip against 24 µs held, on the same loaded machine
// (load average 22).
const releaseNs = 2_000_000

// releasePush is how many calls push the hand-back timer out by a whole
// releaseNs: a caller making them faster than one per 2 µs (a ping-pong
// makes 10-30 a round trip of 3 µs) never lets it fire, and one slower
// than that is looked at by the timer as before. A timer reset reads the
// clock and takes the timer's lock (about 0.1-0.3 µs here), so not at
// every call. A firing ran a goroutine that took a core from the
// spinning caller or its peer; the runtime's poller still wakes at a
// deadline the timer had before a push (it learns of the push then), so
// a thread of the runtime still wakes about every releaseNs.
//
// A kernel timer (timerfd) pushed out wakes nobody, but it handed the
// device back whenever the host preempted the caller for 2 ms (the
// timer's thread, just woken, runs first), and the engine then spun
// beside the caller and its peer: 5 times as many 1-5 ms stalls (ppstat,
// interleaved, load average 8), so it is not used.
const releasePush = 1024

// drive counts the call and takes the device onto the caller's thread.
// Counting is all a busy caller pays: no clock read, and release looks at
// the count without the provider's lock.
func (e *endpoint) drive() {
	if c := e.calls.Add(1); e.driving {
		if c%yieldCheck == 0 {
			e.reschedule()
			if c%releasePush == 0 {
				// Calls keep coming: push the hand-back out, so the timer
				// does not fire (a goroutine and a thread woken, taking a
				// core from the spinning caller or its peer) while they do.
				e.releaser.Reset(releaseNs)
			}
		}
		return
	}
	e.d.Drive(true)
	e.driving = true
	e.seen.Store(e.calls.Load())
	if e.releaser == nil {
		e.releaser = time.AfterFunc(releaseNs, e.release)
	} else {
		e.releaser.Reset(releaseNs)
	}
}

// yieldNs is how often a caller that keeps calling passes through the Go
// scheduler (reschedule): under sysmon's forcePreemptNS (10 ms), so that
// no 10 ms between two of sysmon's looks lacks a pass. Every 4 ms, checked
// every 1,024 calls, made the one-way mean 0.05-0.08 µs longer than this
// (ppstat, 4 alternated rounds, load average 0.7-2).
const yieldNs = 8_000_000

// yieldCheck is how many calls go by between two looks at the clock for
// reschedule: a spinning caller's 256 calls take tens of µs. One making
// fewer than about 130,000 calls a second may pass later than sysmon's
// 10 ms, which costs it what every caller paid before (sysmon's retake).
const yieldCheck = 256

// reschedule passes the caller's goroutine through the scheduler when
// yieldNs went by since it last did. A C thread calling into Go runs one
// goroutine that the scheduler never picks again, so every 10 ms sysmon
// finds its P "running" on one schedule tick, takes it while the thread
// is in C, and, having taken a P, polls every 20 µs for the next
// millisecond: wake-ups that preempt a spinning caller or its peer.
func (e *endpoint) reschedule() {
	if now := monotime.Now(); now-e.lastYield >= yieldNs {
		e.lastYield = now
		runtime.Gosched()
	}
}

// release hands the device back to its engine once a whole releaseNs
// passed without a call (on a timer's goroutine). While calls come it
// only looks at their count and rearms, without the provider's lock: a
// caller spinning on fi_cq_read holds that lock nearly all the time, and
// a timer goroutine waiting for it parked the caller's thread on every
// hand-back (the C thread's goroutine is locked to it, so the runtime
// passed it between threads through futexes: stalls of tens to hundreds
// of µs on a busy 2-core host).
func (e *endpoint) release() {
	if c := e.calls.Load(); c != e.seen.Load() {
		e.seen.Store(c)
		e.releaser.Reset(releaseNs)
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if e.closed || !e.driving {
		return
	}
	if c := e.calls.Load(); c != e.seen.Load() { // a call came while we took the lock
		e.seen.Store(c)
		e.releaser.Reset(releaseNs)
		return
	}
	e.d.Drive(false)
	e.driving = false
}

func errFor(s *uapi.Status) int {
	if s.Err == uapi.EUnreachable {
		return errUnreach
	}
	return errRemote
}

func (e *endpoint) status(s *uapi.Status) {
	switch s.Type {
	case uapi.StIPUSHPkt, uapi.StIPUSHMsg:
		e.packet(s)
	case uapi.StDone, uapi.StError, uapi.StPULLDone:
		kind, id := int(s.Cookie>>56), s.Cookie&(1<<56-1)
		switch kind {
		case ckInject:
			e.injectDone(s)
			return
		case ckFence:
			e.fenceDone()
			return
		}
		if kind == ckPull {
			if p := e.pulls[id]; p != nil {
				e.pullDone(p, s)
			}
			return
		}
		op := e.ops[id]
		if op == nil {
			return
		}
		delete(e.ops, id)
		defer e.freeTx(op)
		e.arena.free(op.stage, op.stageN)
		op.linkSendDone()
		failed := s.Type == uapi.StError
		switch kind {
		case ckSend:
			if failed && op.silent {
				logf("an inject failed: %v", s.Err)
				e.injectErr(op.flags, op.n, errFor(s), int(s.Err))
			} else if failed {
				e.txErr(op.ctx, op.flags, op.n, op.tag, op.data, errFor(s), int(s.Err))
			} else {
				e.txDone(op)
			}
		case ckRMA:
			if failed {
				e.rmaFail(op.rbuf, errFor(s), int(s.Err))
			}
		case ckLinkRMA:
			e.linkRMADone(op, s)
		case ckRTS:
			if failed {
				if so := e.rdv[op.rbuf]; so != nil {
					delete(e.rdv, op.rbuf)
					e.arena.free(so.body, so.bodyN)
					if so.silent {
						e.injectErr(so.flags, so.n, errFor(s), int(s.Err))
					} else {
						e.txErr(so.ctx, so.flags, so.n, so.tag, so.data, errFor(s), int(s.Err))
					}
					e.freeTx(so)
				}
			}
		}
	case uapi.StRingFull:
		e.d.Flush()
	}
}

// packet takes one IPUSH packet out of the ring: every message is one
// packet (eager bodies fit the MTU; rendezvous and FIN are headers only).
func (e *endpoint) packet(s *uapi.Status) {
	data := e.ring.Data(s)
	if data == nil {
		data = make([]byte, s.Length)
		e.ring.Copy(data, s)
	}
	defer e.ring.Release(s.End)
	hl := hdrLen
	if len(data) > 0 && data[0] == kindEager {
		hl = eagerHdrLen
	}
	if s.Flags&(uapi.StFlagFirst|uapi.StFlagLast) != uapi.StFlagFirst|uapi.StFlagLast && s.Type == uapi.StIPUSHPkt || len(data) < hl {
		logf("dropped a malformed packet from node %d (%d bytes, flags %#x)", s.SrcNode, len(data), s.Flags)
		return
	}
	h := data[:hl]
	kind, flags := h[0], h[1]
	if trace {
		logf("packet kind %d flags %d from node %d tag %#x, %d bytes", kind, flags, s.SrcNode, s.Imm, len(data))
	}
	m := inMsg{node: s.SrcNode, tagged: flags&hdrTagged != 0, tag: s.Imm, hasCQ: flags&hdrData != 0,
		data: binary.LittleEndian.Uint64(h[8:])}
	if kind == kindEager {
		m.body = data[eagerHdrLen:] // copied by arrive unless a receive takes it now
		m.n = len(m.body)
		e.arrive(&m)
		return
	}
	n := binary.LittleEndian.Uint64(h[16:])
	id := binary.LittleEndian.Uint64(h[32:])
	m.n = int(n)
	switch kind {
	case kindRTS:
		if n > maxMsg {
			logf("dropped a rendezvous offer of %d bytes from node %d", n, s.SrcNode)
			return
		}
		m.rts = true
		m.raddr = binary.LittleEndian.Uint64(h[24:])
		m.rid = id
		e.arrive(&m)
	case kindFIN:
		if op := e.rdv[id]; op != nil {
			delete(e.rdv, id)
			e.arena.free(op.body, op.bodyN)
			e.txDone(op)
			e.freeTx(op)
		}
	case kindWrite, kindWriteRTS, kindReadReq, kindReadResp, kindReadRTS, kindAtomicReq, kindAtomicRsp, kindAck:
		e.rmaPacket(kind, flags, s.SrcNode, s.Imm, h, data[hdrLen:])
	default:
		logf("dropped a packet of kind %d from node %d", kind, s.SrcNode)
	}
}

// C_FI_ENOCQ is -FI_ENOCQ's magnitude, for enable without a CQ or AV.
const C_FI_ENOCQ = 266
