package vdev

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// downs collects the stations a port reported gone (link.PeerWatcher), on
// the port's goroutine, for the engine to act on in its next pass.
type downs struct {
	any   atomic.Bool
	mu    sync.Mutex
	nodes []uint16
}

// add queues mac's node; foreign addresses are ignored.
func (s *downs) add(mac [6]byte) {
	n, ok := wire.MACNode(mac[:])
	if !ok {
		return
	}
	s.mu.Lock()
	s.nodes = append(s.nodes, n)
	s.mu.Unlock()
	s.any.Store(true)
}

// take returns the queued nodes and empties the queue.
func (s *downs) take() []uint16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.any.Store(false)
	n := s.nodes
	s.nodes = nil
	return n
}

// peersDown fails every command to a peer the port saw go away, at once,
// with UNREACHABLE: a process that exited is not coming back to
// acknowledge them, and thirty timeouts would take seconds.
func (d *Device) peersDown() bool {
	if !d.gone.any.Load() {
		return false
	}
	// What the peer wrote before it went is visible once its departure
	// is: read it first (the pass's receive may have looked just before
	// the notice), so an ACK it sent as it exited completes our command.
	d.pollRx()
	for _, n := range d.gone.take() {
		if p := d.peers[n]; p != nil {
			d.failPeer(p, uapi.EUnreachable)
		}
	}
	return true
}

// sendErrno is what a command fails with when its port refuses a frame for
// good: a peer known to be gone is UNREACHABLE; a station nobody on the
// medium has is a bad node.
func sendErrno(err error) uapi.Errno {
	if errors.Is(err, link.ErrPeerDown) {
		return uapi.EUnreachable
	}
	return uapi.EBadNode
}
