package link

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// A UDP send on loopback runs the whole receive path of the kernel in the
// sender's system call, so a large frame costs its sender several µs. The
// port's transmit queue hands large frames to a sender goroutine, the way a
// NIC's transmit ring hands them to its DMA engine: the device engine goes
// on receiving and encoding while the frame goes out on another core.
// Small frames (a ping-pong's) are sent inline when the queue is empty, so
// they pay no hand-off.
const (
	// txqDepth is the transmit queue's length in frames: a window.
	txqDepth = 64
	// asyncMin is the smallest payload handed to the sender goroutine.
	asyncMin = 4096
	// txqSpinNs is how long the idle sender goroutine keeps looking before
	// it parks: a stream's next frame comes sooner than a wake-up would.
	txqSpinNs = 50_000
)

// txSlot is one queued frame: its head (a port buffer, released once sent),
// an optional payload gathered from where it lies, and the destination.
type txSlot struct {
	head, payload []byte
	name          string
	sa            unsafe.Pointer
	salen         uintptr
	dst           *txDest // its destination's backlog, nil for none
}

// txDest is one destination's share of the queue: frames queued for it and
// when the last of them left, so a device times out a packet from when it
// went on the wire, not from when it was queued.
type txDest struct {
	queued   atomic.Int64
	lastSent atomic.Int64 // monotonic ns
}

// txq is the transmit queue: a single-producer (the engine), single-consumer
// (the sender goroutine) ring. enq and done count frames queued and frames
// finished; a frame may be sent inline only when they are equal, so frames
// leave in the order they were given.
type txq struct {
	slots  [txqDepth]txSlot
	enq    atomic.Uint64
	done   atomic.Uint64
	parked atomic.Bool
	wake   chan struct{}
	// send transmits one slot, retrying on backpressure until the port
	// closes, and releases its head when it succeeds. The goroutine is
	// started with the first queued frame.
	send    func(*txSlot) error
	started bool
	errs    atomic.Uint64
}

// idle reports that nothing is queued or being sent.
func (q *txq) idle() bool { return q.enq.Load() == q.done.Load() }

// put queues a slot; ErrFull when the ring is full. start runs the sender
// goroutine the first time.
func (q *txq) put(s txSlot, start func()) error {
	e := q.enq.Load()
	if e-q.done.Load() == txqDepth {
		return ErrFull
	}
	q.slots[e%txqDepth] = s
	if s.dst != nil {
		s.dst.queued.Add(1)
	}
	q.enq.Store(e + 1) // publish after the slot is written
	if !q.started {
		q.started = true
		q.wake = make(chan struct{}, 1)
		start()
	}
	if q.parked.Load() {
		select {
		case q.wake <- struct{}{}:
		default:
		}
		// The woken goroutine waits for this core; let it run now rather
		// than when the engine next idles.
		runtime.Gosched()
	}
	return nil
}

// run is the sender goroutine: it sends queued frames in order until
// closed is closed, spinning briefly when the queue empties before parking.
func (q *txq) run(closed <-chan struct{}, now func() int64, release func([]byte)) {
	for {
		d := q.done.Load()
		if d == q.enq.Load() {
			if !q.waitWork(closed, now) {
				return
			}
			continue
		}
		s := &q.slots[d%txqDepth]
		if err := q.send(s); err != nil { // nil: send released the head
			if err == ErrClosed {
				return
			}
			q.errs.Add(1) // the device's retransmission recovers the frame
			release(s.head)
		}
		if s.dst != nil {
			s.dst.lastSent.Store(now())
			s.dst.queued.Add(-1)
		}
		*s = txSlot{} // keep no payload reachable
		q.done.Store(d + 1)
	}
}

// waitWork spins, then parks, until a frame is queued; false when closed.
func (q *txq) waitWork(closed <-chan struct{}, now func() int64) bool {
	start := now()
	for i := 0; ; i++ {
		if q.done.Load() != q.enq.Load() {
			return true
		}
		select {
		case <-closed:
			return false
		default:
		}
		runtime.Gosched()
		if i&15 != 15 || now()-start < txqSpinNs {
			continue
		}
		q.parked.Store(true)
		if q.done.Load() != q.enq.Load() {
			q.parked.Store(false)
			return true
		}
		select {
		case <-q.wake:
		case <-closed:
			q.parked.Store(false)
			return false
		}
		q.parked.Store(false)
		start = now()
	}
}
