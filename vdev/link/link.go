// Package link carries encoded Ethernet frames between devices. A device
// sees only a Port: it sends whole frames and polls for received ones, so
// the medium (in-memory here; UDP, TAP and AF_PACKET later) changes nothing
// above it.
package link

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
)

// ErrFull is returned by Send when the medium cannot take the frame now; the
// device keeps the command and tries again (backpressure, never loss).
var ErrFull = errors.New("link: queue full")

// ErrNoRoute is returned when no port on the medium has the destination MAC.
var ErrNoRoute = errors.New("link: no such destination")

// ErrClosed is returned by a port that was closed.
var ErrClosed = errors.New("link: closed")

// Port is one device's attachment to a medium.
type Port interface {
	// MTU is the largest frame (Ethernet header included) the port carries.
	MTU() int
	// MAC is the port's address on the medium.
	MAC() net.HardwareAddr
	// Buffer returns an empty frame buffer of capacity MTU to fill and Send.
	Buffer() []byte
	// Send transmits a frame and takes ownership of it unless it returns an
	// error (then the caller still owns it). ErrFull: try later.
	Send(frame []byte) error
	// Recv returns the next received frame, or nil when none is waiting.
	// The caller owns it until it passes it to Release.
	Recv() []byte
	// Release returns a frame obtained from Recv.
	Release(frame []byte)
	// SetNotify installs a function called (from the sender's goroutine)
	// after a frame is queued for this port, to wake a sleeping engine.
	SetNotify(func())
	// Close detaches the port.
	Close() error
}

// VectorSender is a Port that sends a frame given as its head (built in a
// port Buffer) and a payload left where it lies, gathered by the kernel in
// the same system call, so a large payload is copied once instead of twice.
// SendVec takes ownership of head unless it returns an error, as Send does.
// It reads payload during the call, or, on a port that is also a
// Backlogger, until the frame has left: the device gathers a command's
// first send of a packet, from a buffer the driver keeps stable until the
// command completes, which takes that packet's ACK (resends are copied),
// and a PULL response only on a port that reads it during the call and
// checksums nothing (the memory it reads may change under it).
type VectorSender interface {
	SendVec(head, payload []byte) error
}

// InPlaceReceiver is a Port that can leave a received frame's payload
// where the medium put it (a shared-memory slot), so a receiver that
// copies the payload out anyway, into link memory, reads it once instead
// of copying it into a frame buffer first and out of it again.
type InPlaceReceiver interface {
	// RecvInPlace returns the next frame, or a nil head when none waits:
	// head is its first n bytes (all of it when shorter) copied into a
	// port buffer the caller owns until Release, and rest the bytes after
	// them, still in the medium. rest is read-only and the sender may
	// still write it: read each byte of it at most once and check nothing
	// in it. It stays readable until Done, which the caller calls before
	// it receives again.
	RecvInPlace(n int) (head, rest []byte)
	// Done gives the medium back the memory of the last rest.
	Done()
}

// Backlogger is a Port that queues frames and sends them on its own
// goroutine (a NIC's transmit ring). Backlog reports, for the station dst,
// how many accepted frames have not reached the medium yet and when the
// port last put one of them there (monotonic ns; 0: never). A packet still
// queued is not lost, and one that left late was not sent when queued: the
// device's retransmission timer counts from the later of the two.
type Backlogger interface {
	Backlog(dst [6]byte) (queued int, lastSent int64)
}

// Hub is the in-memory medium: a learning-free switch that delivers a frame
// to the port whose MAC is the frame's destination (all others for
// broadcast). Frames pass by reference: one copy into the frame, one out.
type Hub struct {
	mtu    int
	depth  int
	frames frames // frame buffers to reuse
	mu     sync.RWMutex
	ports  map[[6]byte]*hubPort
}

// NewHub makes an in-memory medium carrying frames of up to mtu bytes, with
// depth frames queued per port before senders see ErrFull.
func NewHub(mtu, depth int) *Hub {
	return &Hub{mtu: mtu, depth: depth, ports: map[[6]byte]*hubPort{}, frames: frames{size: mtu, max: 4 * depth}}
}

// Attach adds a port with the given MAC.
func (h *Hub) Attach(mac net.HardwareAddr) (Port, error) {
	var k [6]byte
	copy(k[:], mac)
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, dup := h.ports[k]; dup {
		return nil, errors.New("link: MAC " + mac.String() + " already attached")
	}
	p := &hubPort{hub: h, mac: append(net.HardwareAddr(nil), mac...), q: make([][]byte, h.depth)}
	h.ports[k] = p
	return p, nil
}

type hubPort struct {
	hub    *Hub
	mac    net.HardwareAddr
	mu     sync.Mutex
	q      [][]byte // ring of queued frames
	head   int
	n      int
	notify func()
	closed bool
	queued atomic.Int32 // mirrors n so an idle poll takes no lock
}

// Pending reports whether a frame waits, without taking the lock.
func (p *hubPort) Pending() bool { return p.queued.Load() > 0 }

// Queued is how many frames wait for this port: what a test stepping
// devices by hand looks at to see what left the other side.
func (p *hubPort) Queued() int { return int(p.queued.Load()) }

// Lossless is true: the hub refuses a frame (ErrFull) rather than lose it,
// so a device's retransmission timer there only waits for a peer that
// stopped.
func (p *hubPort) Lossless() bool { return true }

func (p *hubPort) MTU() int              { return p.hub.mtu }
func (p *hubPort) MAC() net.HardwareAddr { return p.mac }
func (p *hubPort) SetNotify(f func())    { p.mu.Lock(); p.notify = f; p.mu.Unlock() }

func (p *hubPort) Buffer() []byte { return p.hub.frames.get() }

// Release keeps the buffer for reuse (bounded by the queue depths), so
// steady traffic allocates no frames.
func (p *hubPort) Release(f []byte) { p.hub.frames.put(f) }

func (p *hubPort) Send(f []byte) error {
	if len(f) < 14 {
		return errors.New("link: runt frame")
	}
	var k [6]byte
	copy(k[:], f[:6])
	h := p.hub
	h.mu.RLock()
	if k == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} {
		var err error
		for _, q := range h.ports {
			if q != p {
				c := append(q.Buffer(), f...)
				if e := q.enqueue(c); e != nil {
					err = e
				}
			}
		}
		h.mu.RUnlock()
		p.Release(f)
		return err
	}
	q := h.ports[k]
	h.mu.RUnlock()
	if q == nil {
		return ErrNoRoute
	}
	return q.enqueue(f)
}

func (p *hubPort) enqueue(f []byte) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.n == len(p.q) {
		p.mu.Unlock()
		return ErrFull
	}
	p.q[(p.head+p.n)%len(p.q)] = f
	p.n++
	p.queued.Add(1)
	fn := p.notify
	p.mu.Unlock()
	if fn != nil {
		fn()
	}
	return nil
}

func (p *hubPort) Recv() []byte {
	if p.queued.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	if p.n == 0 {
		p.mu.Unlock()
		return nil
	}
	f := p.q[p.head]
	p.q[p.head] = nil
	p.head = (p.head + 1) % len(p.q)
	p.n--
	p.queued.Add(-1)
	p.mu.Unlock()
	return f
}

func (p *hubPort) Close() error {
	var k [6]byte
	copy(k[:], p.mac)
	p.hub.mu.Lock()
	delete(p.hub.ports, k)
	p.hub.mu.Unlock()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return nil
}

// PeerSet is a Port that knows which stations may send on it (the UDP
// port's peers file, a keyed port's authenticated sessions): the device
// drops a frame from any other station before it keeps anything of it,
// so strangers cost no per-peer state. A port that cannot tell (a shared
// Ethernet segment without a key) is not a PeerSet; the device bounds
// what it keeps for such senders instead.
type PeerSet interface {
	KnowsPeer(mac [6]byte) bool
	// Vouches reports whether KnowsPeer is to be believed: a wrapper
	// (faults, a capture) has the method whatever it wraps, and says here
	// whether the port under it can tell.
	Vouches() bool
}

// VouchesFor is p as a PeerSet that can tell its senders, or nil: what a
// wrapper forwards.
func VouchesFor(p Port) PeerSet {
	if s, ok := p.(PeerSet); ok && s.Vouches() {
		return s
	}
	return nil
}

// ScreenCounts are the frames a port refused for their sender before the
// device saw them, mirrored into the device's counters of the same names.
type ScreenCounts struct {
	UnknownPeer  uint64 // from stations the port does not know (RX_UNKNOWN_PEER)
	Spoofed      uint64 // from an address that is not the claimed station's (RX_SPOOFED)
	AuthFail     uint64 // keyed: no valid authentication code (AUTH_FAIL)
	AuthReplay   uint64 // keyed: seen before, or older than the replay window (AUTH_REPLAY)
	AuthSessions uint64 // keyed: sessions established (AUTH_SESSIONS)
}

// Add sums two counts, for a wrapper that screens on top of its port.
func (c ScreenCounts) Add(o ScreenCounts) ScreenCounts {
	return ScreenCounts{c.UnknownPeer + o.UnknownPeer, c.Spoofed + o.Spoofed, c.AuthFail + o.AuthFail,
		c.AuthReplay + o.AuthReplay, c.AuthSessions + o.AuthSessions}
}

// Screener is a Port that refuses frames for who sent them and counts it.
type Screener interface {
	Screened() ScreenCounts
}

// Vouches is true: a frame on the hub comes from an attached port.
func (p *hubPort) Vouches() bool { return true }

// KnowsPeer reports whether a port with mac is attached: on the hub a
// frame can only come from one, so no station is a stranger.
func (p *hubPort) KnowsPeer(mac [6]byte) bool {
	p.hub.mu.RLock()
	defer p.hub.mu.RUnlock()
	return p.hub.ports[mac] != nil
}
