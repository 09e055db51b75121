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
	// Recv returns the next received frame, or nil to end this look: none
	// is waiting, or the port ends the look early (a socket port after a
	// lone frame; the next call looks again). The engine asks Pending
	// before it sleeps. The caller owns a frame until it passes it to
	// Release.
	Recv() []byte
	// Release returns a frame obtained from Recv.
	Release(frame []byte)
	// SetNotify installs a function called (from the sender's goroutine)
	// after a frame is queued for this port, to wake a sleeping engine.
	SetNotify(func())
	// Close detaches the port.
	Close() error
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
	return &Hub{mtu: mtu, depth: depth, ports: map[[6]byte]*hubPort{}, frames: frames{ownedFrames: ownedFrames{size: mtu, max: 4 * depth}}}
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

// Vouches is true: a frame on the hub comes from an attached port.
func (p *hubPort) Vouches() bool { return true }

// KnowsPeer reports whether a port with mac is attached: on the hub a
// frame can only come from one, so no station is a stranger.
func (p *hubPort) KnowsPeer(mac [6]byte) bool {
	p.hub.mu.RLock()
	defer p.hub.mu.RUnlock()
	return p.hub.ports[mac] != nil
}
