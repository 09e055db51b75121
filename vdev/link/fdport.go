package link

import (
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/dimmnet/dimmnet/vdev/wire"
	"golang.org/x/sys/unix"
)

// sockBufBytes is the kernel buffer asked for on each socket: at the
// device's default window (64 frames of up to 64 KiB) a smaller receive
// buffer drops whole windows on a burst and turns bandwidth into
// retransmissions.
const sockBufBytes = 4 << 20

// maxFree bounds the buffers a port keeps for reuse: enough for a window
// in flight both ways, not so many that an idle port pins megabytes.
const maxFree = 256

// maxRecvTries bounds the frames one Recv may skip (truncated, for another
// station, receive errors) before it gives the engine its turn back.
const maxRecvTries = 64

// rxBatch is how many frames one recvmmsg may bring in: a stream costs one
// system call per batch instead of one per frame, and a call that returns
// fewer frames than it asked for has seen the socket empty, so it doubles
// as the engine's idle look.
const rxBatch = 16

// mmsghdr is struct mmsghdr of recvmmsg(2), which x/sys/unix lacks.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
	_   [4]byte
}

// rxRing is a socket port's batch of receive buffers: recvmmsg fills them,
// Recv hands them out one by one (the caller owns each until Release) and
// the next call refills the slots handed out from the free list.
type rxRing struct {
	bufs      [rxBatch][]byte
	iov       [rxBatch]unix.Iovec
	msgs      [rxBatch]mmsghdr
	names     [rxBatch]unix.RawSockaddrAny // each frame's source, for a port that screens senders
	n, i      int                          // frames the last call brought, next one to hand out
	left      atomic.Bool                  // i < n, for WaitFrame on another goroutine than Recv's
	short     bool                         // the last call brought fewer than asked: the socket was empty then
	streaming bool                         // frames keep coming: the next call is a recvmmsg
	nameLen   uint32                       // recvfrom's source length
}

// waitSlot is the frame a socket port's WaitFrame took with one blocking
// recvfrom, which the next Recv hands out before anything else: a wait
// that ppoll'd and then received cost two system calls where the raw
// ping-pong's blocking recvfrom costs one. WaitFrame writes it only while
// ready is false, on one goroutine at a time (busy), and publishes it by
// storing ready; Recv (under the device's run flag) takes it and clears
// ready.
type waitSlot struct {
	buf     []byte
	n       int // the datagram's length (MSG_TRUNC: longer than the MTU when truncated)
	name    unix.RawSockaddrAny
	nameLen uint32
	ready   atomic.Bool
	busy    atomic.Bool
	timeout int64 // ns of SO_RCVTIMEO now set on the socket (0: none yet)
	// deadline says the wait in progress is to end at the wake timer:
	// the timer's goroutine wakes it only then
	deadline atomic.Bool
	// after says the frame handed out was the slot's: the Recv after it
	// returns nil without a system call (the socket was empty when the
	// wait began; a burst's next pass looks with recvmmsg)
	after bool
}

// txVec is the message SendVec hands the kernel: head and payload.
type txVec struct {
	iov [2]unix.Iovec
	msg unix.Msghdr
}

// fdKind says how a kernel-backed port reads and peeks its descriptor.
type fdKind int

const (
	kindSocket fdKind = iota // recvmmsg with MSG_DONTWAIT; peek with MSG_PEEK
	kindTAP                  // read on a non-blocking fd; peek with poll
)

// fdPort is what the UDP, AF_PACKET and TAP ports share: a non-blocking
// descriptor polled directly with system calls (so an engine that spins
// never waits for the Go netpoller, which runs rarely when every core is
// busy), a free list of frame buffers, and a watcher goroutine parked in the
// runtime poller that wakes a sleeping engine when a frame arrives.
//
// Its calls that cannot block (MSG_DONTWAIT, a non-blocking descriptor, a
// zero-timeout poll) are raw system calls: they do not tell the scheduler
// that the goroutine entered a system call, so sysmon does not hand its P
// to another thread meanwhile, and the call's return does not wait for a P.
// A driver thread of the libfabric provider (a C thread running Go
// callbacks) made two such calls per message over UDP, and the hand-offs
// they caused (sysmon's retake, an M started and parked again) woke the
// runtime's threads several times a message, each taking a core from the
// spinning caller or its peer on a 2-core host. Only WaitFrame's calls,
// which block, say that they do.
//
// The watcher notifies once per burst: after calling the notify function it
// waits until Recv or Pending has seen the descriptor empty before it arms
// again, so frames sitting unread never make it spin. It watches only while
// the engine sleeps (link.Parker): a thread that polls the port (a driver
// running its device, or the engine awake) reads each frame itself, and a
// watcher woken per frame, then again by the drain, cost each message two
// thread wake-ups in the runtime's poller that took a core from the
// spinning caller or its peer.
type fdPort struct {
	mtu    int
	mac    net.HardwareAddr
	key    [6]byte
	kind   fdKind
	filter bool // drop unicast frames addressed to other stations (shared segments)
	fd     int
	rc     syscall.RawConn // the same descriptor, registered with the runtime poller
	conn   io.Closer

	frames frames
	rx     rxRing   // kindSocket only
	slot   waitSlot // kindSocket only: the frame a blocking WaitFrame received
	tx     txVec    // SendVec's message, kept so a send allocates nothing

	notify  atomic.Pointer[func()]
	watchEp int           // the watcher's epoll instance (leavePoller), or -1: it waits on fd
	watchOn atomic.Bool   // the engine sleeps: the watcher watches (Park)
	arm     chan struct{} // Park(true) wakes a watcher that stood down
	refs    atomic.Int32  // raw system calls in progress on fd
	closed  atomic.Bool
	waiting atomic.Bool   // the watcher notified and waits for a drain
	drained chan struct{} // Recv or Pending saw the descriptor empty
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	waitFn  func(uintptr) bool // made once: parking allocates nothing
	// blockRecv: the socket is in blocking mode, so WaitFrame receives
	// the frame it waits for (waitSlot)
	blockRecv bool
	// selfWake: the port can end its own blocking recvfrom with an empty
	// datagram to its own address (UDP): WaitFrame's deadlines use it.
	// Atomic: WaitFrame runs outside the device's pass that reads it.
	selfWake atomic.Bool
	// self is the socket's own address (UDP, set at creation): where the
	// wake timer's datagram goes and the only source it is taken from
	self  unix.Sockaddr
	waker *wakeTimer // made by the first wait to a deadline

	dropped atomic.Uint64
	// screen, when set, judges each received frame by its source address
	// (the UDP port binds node ids to addresses); false drops it, counted
	// by the screen itself
	screen func(f []byte, from *unix.RawSockaddrAny) bool
}

// init finishes a port whose mtu, mac, kind, fd, rc and conn are set, and
// starts its watcher.
func (p *fdPort) init() {
	p.frames.size, p.frames.max = p.mtu, maxFree
	copy(p.key[:], p.mac)
	p.drained = make(chan struct{}, 1)
	p.arm = make(chan struct{}, 1)
	p.done = make(chan struct{})
	p.watchOn.Store(true) // until the device says it polls (Park)
	p.watchEp = -1
	// A watcher that stood down (Park(false)) while parked in the poller
	// returns at the next frame without a notice.
	p.waitFn = func(uintptr) bool { return p.closed.Load() || !p.watchOn.Load() || p.readable() }
	_ = p.leavePoller() // on failure the watcher waits on the descriptor itself, as before
	// Every system call on a socket port says MSG_DONTWAIT but WaitFrame's
	// recvfrom, which blocks (bounded by SO_RCVTIMEO); a TAP keeps
	// O_NONBLOCK (its read has no flags).
	p.blockRecv = p.kind == kindSocket && unix.SetNonblock(p.fd, false) == nil
	p.wg.Add(1)
	go p.watch()
}

// leavePoller takes the port's descriptor out of the runtime's poller,
// which registers every socket and pollable file for writability too,
// edge-triggered, and whether or not anyone waits: each frame the device
// sent woke the thread parked in the poller once its buffer was freed,
// and each one it received did too (fi_pingpong across two network
// namespaces over UDP: wake-ups every message in each process, on a host
// whose two cores the ping-pong's two spinning threads hold). The watcher
// waits instead on an epoll instance of the port's own, registered with
// the runtime's poller in the descriptor's place, that asks for input
// once (EPOLLONESHOT) each time the watcher arms it (armWatch); the
// descriptor is a duplicate the runtime never saw, and the original is
// closed.
func (p *fdPort) leavePoller() (err error) {
	nfd, err := unix.FcntlInt(uintptr(p.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("dup: %w", err)
	}
	ep := -1 // ours to close until an os.File owns it
	defer func() {
		if err != nil {
			if ep >= 0 {
				unix.Close(ep)
			}
			unix.Close(nfd)
		}
	}()
	if ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		ep = -1
		return fmt.Errorf("epoll_create1: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLONESHOT, Fd: int32(nfd)}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, nfd, &ev); err != nil {
		return fmt.Errorf("epoll_ctl: %w", err)
	}
	if err := unix.SetNonblock(ep, true); err != nil {
		return fmt.Errorf("epoll non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(ep), "dimmnet-port-watch") // non-blocking: in the runtime's poller
	epfd := ep
	ep = -1
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fmt.Errorf("epoll raw conn: %w", err)
	}
	old := p.conn
	p.fd, p.rc, p.conn, p.watchEp = nfd, rc, &watchedFD{watch: f, fd: nfd}, epfd
	old.Close() // the socket lives on in nfd
	return nil
}

// watchedFD closes a port's descriptor that left the runtime's poller
// and the epoll instance its watcher waits on (which wakes the watcher).
type watchedFD struct {
	watch *os.File
	fd    int
}

// Close closes the watch instance, then the descriptor.
func (w *watchedFD) Close() error {
	err := w.watch.Close()
	if e := unix.Close(w.fd); err == nil {
		err = e
	}
	return err
}

// setSockBufs asks for sockBufBytes of send and receive buffer. The FORCE
// variants pass net.core.rmem_max/wmem_max when privileged; otherwise the
// plain ones get whatever the limit allows.
func setSockBufs(fd int) {
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], sockBufBytes) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], sockBufBytes)
		}
	}
}

// rawFD returns the descriptor behind rc.
func rawFD(rc syscall.RawConn) (int, error) {
	fd := -1
	if err := rc.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return -1, err
	}
	return fd, nil
}

// acquire guards a raw system call on fd against Close; release ends it.
func (p *fdPort) acquire() bool {
	p.refs.Add(1)
	if p.closed.Load() {
		p.refs.Add(-1)
		return false
	}
	return true
}

func (p *fdPort) release() { p.refs.Add(-1) }

// MTU is the largest frame, Ethernet header included, the port carries.
func (p *fdPort) MTU() int { return p.mtu }

// MAC is the address the port answers to.
func (p *fdPort) MAC() net.HardwareAddr { return p.mac }

// NeedsCRC is true: a real medium can corrupt or truncate a frame, and the
// Ethernet FCS is gone by the time a socket sees it.
func (p *fdPort) NeedsCRC() bool { return true }

// Dropped counts received frames the port discarded itself: truncated
// (longer than the MTU), unicast to another station, or receive errors.
func (p *fdPort) Dropped() uint64 { return p.dropped.Load() }

// SetNotify installs the function the watcher calls when a frame arrives.
// It re-arms the watcher, so frames already waiting are announced to f.
func (p *fdPort) SetNotify(f func()) {
	if f == nil {
		p.notify.Store(nil)
	} else {
		p.notify.Store(&f)
	}
	p.sawEmpty()
}

// Buffer returns an empty frame buffer of capacity MTU, reused when one is free.
func (p *fdPort) Buffer() []byte { return p.frames.get() }

// Release keeps a frame buffer for reuse, so steady traffic allocates nothing.
func (p *fdPort) Release(f []byte) { p.frames.put(f) }

// Recv returns the next frame or nil. A socket port receives in batches
// (recvmmsg); when the last batch came up short, the call after its last
// frame returns nil without a system call, since that batch already saw
// the socket empty, and so does the call after a lone frame (recvBatch).
func (p *fdPort) Recv() []byte {
	if !p.acquire() {
		return nil
	}
	defer p.release()
	if p.kind == kindTAP {
		return p.recvOne()
	}
	r := &p.rx
	for range maxRecvTries {
		if p.slot.ready.Load() {
			w := &p.slot
			b := w.buf
			w.buf = nil
			w.after = true
			w.ready.Store(false)
			if f := p.accept(b, w.n, false, &w.name); f != nil {
				return f
			}
			continue
		}
		if r.i < r.n {
			i := r.i
			r.i++
			if r.i == r.n {
				r.left.Store(false)
			}
			b, m := r.bufs[i], &r.msgs[i]
			r.bufs[i] = nil
			if f := p.accept(b, int(m.n), m.hdr.Flags&unix.MSG_TRUNC != 0, &r.names[i]); f != nil {
				return f
			}
			continue
		}
		if r.short || p.slot.after {
			r.short, p.slot.after = false, false
			return nil
		}
		if !p.recvBatch() {
			return nil
		}
	}
	return nil
}

// accept returns a received datagram of n bytes in b as a frame, or nil
// (b released) for one the port drops: truncated, a runt, for another
// station, or refused by the screen (which counts it).
func (p *fdPort) accept(b []byte, n int, trunc bool, from *unix.RawSockaddrAny) []byte {
	if n == 0 && p.selfWake.Load() && p.fromSelf(from) {
		p.Release(b) // a wake timer's datagram that came after its wait ended
		return nil
	}
	if trunc || n > p.mtu || n < 14 {
		p.dropped.Add(1)
		p.Release(b)
		return nil
	}
	f := b[:n]
	if p.forOther(f) {
		p.dropped.Add(1)
		p.Release(b)
		return nil
	}
	if p.screen != nil && !p.screen(f, from) {
		p.Release(b)
		return nil
	}
	return f
}

// recvBatch refills the ring's empty slots and receives into them; false
// when the socket was empty. The first call after the socket was seen empty
// takes one frame with recvfrom (a lone frame, a ping-pong's, costs no
// more than before batching; recvmmsg costs it more here) and ends the
// pass's looking; the calls that follow while frames keep coming take up
// to rxBatch with one recvmmsg.
func (p *fdPort) recvBatch() bool {
	r := &p.rx
	for i := range r.bufs {
		if r.bufs[i] == nil {
			b := p.Buffer()[:p.mtu]
			r.bufs[i] = b
			r.iov[i].Base = &b[0]
			r.iov[i].SetLen(p.mtu)
			r.msgs[i].hdr.Iov = &r.iov[i]
			r.msgs[i].hdr.SetIovlen(1)
			r.msgs[i].hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		}
		r.msgs[i].hdr.Flags, r.msgs[i].n = 0, 0
		r.msgs[i].hdr.Namelen = unix.SizeofSockaddrAny
	}
	r.i, r.n = 0, 0
	for {
		var got uintptr
		var errno unix.Errno
		if r.streaming {
			got, _, errno = unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&r.msgs[0])), rxBatch, unix.MSG_DONTWAIT, 0, 0)
		} else {
			b := r.bufs[0]
			r.nameLen = unix.SizeofSockaddrAny
			got, _, errno = unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(p.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), unix.MSG_DONTWAIT|unix.MSG_TRUNC,
				uintptr(unsafe.Pointer(&r.names[0])), uintptr(unsafe.Pointer(&r.nameLen)))
			if errno == 0 {
				r.msgs[0].n = uint32(min(got, uintptr(p.mtu)+1)) // longer than the MTU: truncated
				got = 1
			}
		}
		switch errno {
		case 0:
			r.n = int(got)
			r.left.Store(r.n > 0)
			// A lone frame (recvfrom) ends the pass's looking, as the
			// blocking wait's does (waitSlot.after): the pass hands it
			// on at once, and a ping-pong's empty look, which cost the
			// frame's answer a recvmmsg, comes in the next pass, while
			// the peer is still answering. That look is a recvmmsg, so a
			// burst that began with this frame is taken in batches.
			lone := !r.streaming
			r.short = lone || r.n < rxBatch
			if !lone && r.short || r.n == 0 {
				p.sawEmpty()
			}
			r.streaming = lone || !r.short
			return r.n > 0
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			r.streaming = false
			p.sawEmpty()
			return false
		}
		p.dropped.Add(1) // a pending socket error (an ICMP report) is consumed: look again
		return true
	}
}

// forOther reports a unicast frame for another station on a shared segment.
func (p *fdPort) forOther(f []byte) bool {
	return p.filter && f[0]&1 == 0 && [6]byte(f[:6]) != p.key
}

// recvOne reads one frame from a TAP, whose descriptor has no recvmmsg.
func (p *fdPort) recvOne() []byte {
	buf := p.Buffer()
	b := buf[:p.mtu]
	for range maxRecvTries {
		n, errno := p.read(b)
		switch {
		case errno == unix.EAGAIN:
			p.Release(buf)
			p.sawEmpty()
			return nil
		case errno == unix.EINTR:
			continue
		case errno != 0, n > p.mtu, n < 14:
			p.dropped.Add(1) // the error (or the bad frame) is consumed: look again
			continue
		}
		f := b[:n]
		if p.forOther(f) {
			p.dropped.Add(1)
			continue
		}
		return f
	}
	p.Release(buf)
	return nil
}

// read is one non-blocking read from a TAP into b.
func (p *fdPort) read(b []byte) (int, unix.Errno) {
	r, _, errno := unix.RawSyscall(unix.SYS_READ, uintptr(p.fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(r), errno
}

// readable peeks whether a frame (or an error Recv should consume) waits.
func (p *fdPort) readable() bool {
	if p.kind == kindTAP {
		pfd := [1]unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
		_, _, errno := unix.RawSyscall(unix.SYS_POLL, uintptr(unsafe.Pointer(&pfd[0])), 1, 0)
		return errno != 0 || pfd[0].Revents != 0
	}
	_, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(p.fd), 0, 0, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	return errno != unix.EAGAIN
}

// preciseNs is the shortest bound WaitFrame leaves to SO_RCVTIMEO, which
// counts in the kernel's ticks (4 ms at HZ=250), rounding up: a driver's
// slice (a millisecond) is only a look-again, where a tick late does no
// harm, but a shorter bound is a retransmission deadline (vdev bounds a
// wait by its timers), and a tail-loss probe due 100 µs after a lost
// packet left went 4-10 ms late, so each loss at 1% cost that (UDP 8-byte
// RTT/2 p99 6-8 ms at loss=0.01). A UDP port ends such a wait with its
// wake timer (armWake, wakeMinNs). ppoll, which keeps to the microsecond
// by itself, woke 2-4x slower than a blocking recvfrom when the frame
// came (8-byte loopback ping-pong in C here: RTT/2 median 16-27 µs
// against 5-7), and a lossy request-reply exchange has a deadline inside
// every wait.
const preciseNs = 1_000_000

// wakeMinNs is the earliest a UDP port's wake timer ends a wait: a timer
// armed 100 µs ahead at every wait cost each wake-up by a frame more than
// one 1 ms ahead (udp 8-byte RTT/2 median at loss=0.01 29.6-32.0 against
// 14.0-17.7 µs; their means alike, 52-87 µs): a deadline inside the wait
// is kept to the millisecond, not to the microsecond, still 4-10 times
// sooner than the tick.
const wakeMinNs = 1_000_000

// WaitFrame blocks the calling thread until a frame waits or timeoutNs
// passes (link.FrameWaiter): on a socket with one blocking recvfrom that
// keeps the frame (waitRecv; a bound under preciseNs ended on time by the
// wake timer on UDP), otherwise (a TAP, a bound under 1 µs which
// SO_RCVTIMEO cannot say, or under preciseNs off UDP) in ppoll. Close
// waits for it, so callers bound timeoutNs (a millisecond).
func (p *fdPort) WaitFrame(timeoutNs int64) bool {
	if p.rx.left.Load() || p.slot.ready.Load() {
		return true // taken by the last batch or wait, not handed out yet
	}
	if !p.acquire() {
		return false
	}
	defer p.release()
	if p.blockRecv && p.slot.busy.CompareAndSwap(false, true) {
		defer p.slot.busy.Store(false)
		switch {
		case timeoutNs >= preciseNs:
			if arrived, ok := p.waitRecv(timeoutNs); ok {
				return arrived
			}
		case timeoutNs >= 1000 && p.selfWake.Load() && p.armWake(max(timeoutNs, wakeMinNs)):
			// A deadline: the blocking recvfrom keeps its slice, and the
			// wake timer ends it (at wakeMinNs at the earliest). Should
			// the wake not land (its send found the socket's buffer
			// full), the slice, at most wakeFallbackNs, still does.
			arrived, ok := p.waitRecv(min(max(p.slot.timeout, preciseNs), wakeFallbackNs))
			p.slot.deadline.Store(false)
			if ok {
				return arrived
			}
		}
	}
	ts := unix.NsecToTimespec(max(timeoutNs, 0))
	pfd := [1]unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	for {
		// ppoll writes the time left back into ts: EINTR resumes the wait.
		n, _, errno := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd[0])), 1, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
		if errno == unix.EINTR {
			continue
		}
		return errno != 0 || n > 0
	}
}

// waitRecv is WaitFrame on a blocking socket: one recvfrom that blocks up
// to timeoutNs (SO_RCVTIMEO, set again only when the bound changes) and
// keeps what it received in the slot. ok is false when it could not set
// the bound: the caller ppolls instead.
func (p *fdPort) waitRecv(timeoutNs int64) (arrived, ok bool) {
	w := &p.slot
	if w.timeout != timeoutNs {
		tv := unix.NsecToTimeval(timeoutNs)
		if unix.SetsockoptTimeval(p.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv) != nil {
			return false, false
		}
		w.timeout = timeoutNs
	}
	if w.buf == nil {
		w.buf = p.Buffer()[:p.mtu]
	}
	w.nameLen = unix.SizeofSockaddrAny
	got, _, errno := unix.Syscall6(unix.SYS_RECVFROM, uintptr(p.fd), uintptr(unsafe.Pointer(&w.buf[0])), uintptr(len(w.buf)), unix.MSG_TRUNC,
		uintptr(unsafe.Pointer(&w.name)), uintptr(unsafe.Pointer(&w.nameLen)))
	switch {
	case errno == 0 && got == 0:
		if !p.fromSelf(&w.name) {
			p.dropped.Add(1) // anyone else's empty datagram: a runt
		}
		return false, true // the wake timer's empty datagram: the deadline came (or a runt's: the caller waits again)
	case errno == 0:
		w.n = int(min(got, uintptr(p.mtu)+1)) // longer than the MTU: truncated
		w.ready.Store(true)
		return true, true
	case errno == unix.EAGAIN, errno == unix.EINTR:
		return false, true // the bound passed, or a signal: the caller's pass looks at the timers
	}
	return true, true // a socket error (an ICMP report) waits: Recv's recvmmsg consumes it
}

// WaitsFrames is true: a kernel descriptor can be blocked on.
func (p *fdPort) WaitsFrames() bool { return true }

// Pending reports whether a frame waits, for the engine's last look before
// it sleeps. Seeing the descriptor empty re-arms the watcher.
func (p *fdPort) Pending() bool {
	if p.rx.i < p.rx.n || p.slot.ready.Load() {
		return true // received, not handed out yet
	}
	if !p.acquire() {
		return false
	}
	defer p.release()
	if p.readable() {
		return true
	}
	p.sawEmpty()
	return false
}

// sawEmpty tells a watcher waiting for the drain that it may arm again.
func (p *fdPort) sawEmpty() {
	if p.waiting.Load() && p.waiting.CompareAndSwap(true, false) {
		select {
		case p.drained <- struct{}{}:
		default:
		}
	}
}

// Park says whether the engine sleeps (link.Parker): the watcher watches
// the descriptor only then. The engine calls Park(true) before its last
// look and sleep, so a frame that came before is that look's and one that
// comes after is the watcher's.
func (p *fdPort) Park(sleeping bool) {
	if p.watchOn.Swap(sleeping) == sleeping || !sleeping {
		return
	}
	select {
	case p.arm <- struct{}{}:
	default:
	}
}

// watch parks in the runtime poller until the descriptor is readable,
// calls the notify function, and waits for the drain before parking again.
// While the engine polls (Park(false)) it stands down.
func (p *fdPort) watch() {
	defer p.wg.Done()
	for {
		if !p.watchOn.Load() {
			select {
			case <-p.arm:
			case <-p.done:
				return
			}
			continue
		}
		p.armWatch(true)
		if err := p.rc.Read(p.waitFn); err != nil || p.closed.Load() {
			return
		}
		p.armWatch(false)
		if !p.watchOn.Load() {
			continue // stood down while parked: the poller reads the frame
		}
		select { // a drain seen before this frame arrived is stale
		case <-p.drained:
		default:
		}
		p.waiting.Store(true)
		if f := p.notify.Load(); f != nil {
			(*f)()
		}
		select {
		case <-p.drained:
		case <-p.done:
			return
		}
	}
}

// armWatch asks the watcher's epoll instance for one notice of input
// (on), or takes the notice it gave, so that nothing more wakes the
// runtime's poller until the next arming (off). Without the instance
// (leavePoller failed) the watcher waits on the descriptor itself.
func (p *fdPort) armWatch(on bool) {
	if p.watchEp < 0 || !p.acquire() {
		return
	}
	defer p.release()
	ev := unix.EpollEvent{Events: unix.EPOLLONESHOT, Fd: int32(p.fd)} // off: disarmed whether or not it fired
	if on {
		ev.Events |= unix.EPOLLIN
	}
	_ = unix.EpollCtl(p.watchEp, unix.EPOLL_CTL_MOD, p.fd, &ev)
}

// Close stops the watcher and closes the descriptor once no system call
// uses it. Closing twice is harmless.
func (p *fdPort) Close() error {
	var err error
	p.once.Do(func() {
		p.closed.Store(true)
		close(p.done)
		for p.refs.Load() != 0 {
			runtime.Gosched()
		}
		err = p.conn.Close() // wakes the watcher out of the poller
		if p.waker != nil {
			p.waker.f.Close() // and the wake timer's goroutine
		}
		p.wg.Wait()
	})
	return err
}

// sendFrame checks a frame and writes it whole with write (one
// non-blocking system call on the port's descriptor); the AF_PACKET and TAP
// ports differ only in that call. See sendChecked.
func (p *fdPort) sendFrame(what, ifname string, f []byte, write func(fd int, f []byte) unix.Errno) error {
	return p.sendChecked(what, ifname, f, len(f), func() unix.Errno { return write(p.fd, f) })
}

// sendVec sends a frame given as head and payload with one gathering
// sendmsg to the raw socket address name (nil: the socket's own binding).
// Only the UDP port uses it: an AF_PACKET frame sent in two pieces crossed
// a veth slower than one copied whole (640 against 850 MB/s for 1 MiB here).
func (p *fdPort) sendVec(what, ifname string, name unsafe.Pointer, namelen uintptr, head, payload []byte) error {
	v := &p.tx
	v.iov[0].Base = &head[0]
	v.iov[0].SetLen(len(head))
	niov := 1
	if len(payload) > 0 {
		v.iov[1].Base = &payload[0]
		v.iov[1].SetLen(len(payload))
		niov = 2
	}
	v.msg = unix.Msghdr{Name: (*byte)(name), Namelen: uint32(namelen), Iov: &v.iov[0]}
	v.msg.SetIovlen(niov)
	defer func() { v.iov[1].Base = nil }() // keep no payload reachable from the port
	return p.sendChecked(what, ifname, head, len(head)+len(payload), func() unix.Errno {
		_, _, errno := unix.RawSyscall(unix.SYS_SENDMSG, uintptr(p.fd), uintptr(unsafe.Pointer(&v.msg)), unix.MSG_DONTWAIT)
		return errno
	})
}

// sendChecked checks a frame of n bytes starting with head and sends it
// with call (one non-blocking system call on the port's descriptor),
// retrying on EINTR. head is released on success; ErrFull leaves it to the
// caller.
func (p *fdPort) sendChecked(what, ifname string, head []byte, n int, call func() unix.Errno) error {
	if len(head) < wire.EthHeaderLen {
		return fmt.Errorf("link: %s on %s: runt frame", what, ifname)
	}
	if n > p.mtu {
		return fmt.Errorf("link: %s on %s: frame of %d bytes exceeds mtu %d", what, ifname, n, p.mtu)
	}
	if !p.acquire() {
		return ErrClosed
	}
	defer p.release()
	for {
		switch errno := call(); errno {
		case 0:
			p.Release(head)
			return nil
		case unix.EINTR:
			continue
		default:
			if err := sendErr(errno); err == ErrFull {
				return err
			}
			return fmt.Errorf("link: %s on %s: %w", what, ifname, errno)
		}
	}
}

// sendErr maps a failed non-blocking send: a full queue is backpressure.
func sendErr(errno unix.Errno) error {
	switch errno {
	case unix.EAGAIN, unix.ENOBUFS, unix.EINTR:
		return ErrFull
	}
	return errno
}

// wakeTimer ends a UDP port's blocking recvfrom at a deadline finer than
// SO_RCVTIMEO's tick: a timerfd, armed (relative, one raw system call)
// for each wait to a deadline, read by a goroutine parked in the runtime
// poller, which sends an empty datagram to the port's own address when it
// fires during such a wait. It fires only when the deadline passes with
// no frame (a loss, or a slow peer): an armed timer that a frame made
// stale is re-armed by the next wait before it runs out, or fires into no
// wait and is ignored. A Go timer reset at every wait would instead leave
// the runtime's poller waking at each stale deadline, and a reset that
// moves a timer earlier wakes the poller at once.
type wakeTimer struct {
	fd   int
	f    *os.File
	spec unix.ItimerSpec
}

// wakeFallbackNs bounds a deadline wait whose wake never lands.
const wakeFallbackNs = 4 * preciseNs

// fromSelf reports whether a datagram's source is the port's own socket:
// the wake timer's. A port bound to every address gets it from loopback.
func (p *fdPort) fromSelf(from *unix.RawSockaddrAny) bool {
	switch s := p.self.(type) {
	case *unix.SockaddrInet4:
		a := (*unix.RawSockaddrInet4)(unsafe.Pointer(from))
		return a.Family == unix.AF_INET && ntohs(a.Port) == s.Port &&
			(a.Addr == s.Addr || a.Addr == [4]byte{127, 0, 0, 1})
	case *unix.SockaddrInet6:
		a := (*unix.RawSockaddrInet6)(unsafe.Pointer(from))
		return a.Family == unix.AF_INET6 && ntohs(a.Port) == s.Port &&
			(a.Addr == s.Addr || a.Addr == [16]byte{15: 1})
	}
	return false
}

// ntohs reads a port as a raw socket address stores it (network order).
func ntohs(v uint16) int {
	b := (*[2]byte)(unsafe.Pointer(&v))
	return int(b[0])<<8 | int(b[1])
}

// armWake arms the wake timer to fire in ns (making it on first use); false
// when the port cannot have one.
func (p *fdPort) armWake(ns int64) bool {
	if p.waker == nil && !p.startWaker() {
		p.selfWake.Store(false) // ppoll from now on
		return false
	}
	w := p.waker
	w.spec.Value = unix.NsecToTimespec(ns)
	if _, _, errno := unix.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(w.fd), 0, uintptr(unsafe.Pointer(&w.spec)), 0, 0, 0); errno != 0 {
		return false
	}
	p.slot.deadline.Store(true)
	return true
}

// startWaker makes the wake timer and its goroutine.
func (p *fdPort) startWaker() bool {
	if p.self == nil {
		return false
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(fd), "dimmnet-wake-timer")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return false
	}
	p.waker = &wakeTimer{fd: fd, f: f}
	p.wg.Add(1)
	go p.wake(rc)
	return true
}

// wake waits for the wake timer to fire and ends the wait it was armed
// for, if that wait still runs.
func (p *fdPort) wake(rc syscall.RawConn) {
	defer p.wg.Done()
	var n [8]byte
	for {
		err := rc.Read(func(fd uintptr) bool {
			_, _, errno := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&n[0])), 8)
			return errno != unix.EAGAIN
		})
		if err != nil || p.closed.Load() {
			return
		}
		if p.slot.deadline.Load() && p.acquire() {
			_ = unix.Sendto(p.fd, nil, unix.MSG_DONTWAIT, p.self)
			p.release()
		}
	}
}
