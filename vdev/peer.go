package vdev

// Peers: what the device keeps about each other node (peer), who may have
// one (admit: the port's PeerSet or a bounded number of strangers), how a
// frame is sent to one (send), and what happens when the port says one has
// gone (peersDown).

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/transport"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// peer is everything the device keeps about one other node: the two
// halves of the reliable session (package transport, which knows sequence
// numbers only), what each unacknowledged number carries, the commands to
// that node, and the receive-side state of its traffic to us.
type peer struct {
	node uint16
	tx   *transport.Tx
	rx   *transport.Rx

	// sending
	sent  []sentPkt       // sent[i] is what number tx.Acked()+1+i carries
	q     []*job          // commands to this node taken and not completed, in posting order
	pkz   int             // q[:pkz] are wholly packetized
	resp  []*respJob      // PULL responses owed to this node, in order
	pulls map[uint32]*job // our PULLs from this node, by message id
	// the requester's guard on PULLs whose request this node acknowledged:
	// armed while any waits for its data, pushed back by every data frame
	// of this node's session; MaxTimeouts in a row fail them UNREACHABLE
	pullDeadline int64
	pullExpired  uint64 // the engine pass that first saw pullDeadline passed
	pullTimeouts int

	// an ACK field of this peer's data frames not applied yet
	// (Device.deferAck): the latest, and the session it acknowledges
	lazy      bool
	lazyAck   uint32
	lazyEpoch uint16

	// receiving
	owedCtl    []ctl  // NACKs the link could not take yet
	held       []byte // hold mode: the frame this peer sent that we cannot place yet
	pagingHold bool   // its paging request was delivered: place nothing more until PAGE_DONE
	heldRF     bool   // hold mode: this peer's ring-full stall was counted
	rfOwed     bool   // its RING_FULL status still waits for status ring room
	rfAMT      uint16 // the ring that status names
	msg        rxMsg  // the PUSH or IPUSH message of this peer in progress
	// refusals of this peer's packets (its current session) it has not
	// confirmed taking (an ACK with flag Refused), oldest first: no ACK
	// field to it passes one, and each is repeated when it resends
	refusals    []refusal
	refusalPass uint64 // the engine pass that last repeated them

	// stranger: made for a sender no PeerSet vouched for (a shared segment
	// without a key); such peers are bounded,
	// and forgotten when idle. lastHeard is stamped when the stranger is
	// made and when an eviction looks at it after heard said a frame came
	// since: reading the clock for every frame cost a receiving device
	// about an eighth of its time in an 8-byte stream on the shared-memory
	// link (its peers are strangers there), and it was on the latency
	// path. A stranger is still evicted only after strangerIdle without a
	// frame (an eviction that finds heard set spares it and stamps now).
	stranger  bool
	heard     bool  // a frame came after lastHeard was stamped
	lastHeard int64 // ns
}

func (d *Device) peerOf(node uint16) *peer {
	p := d.knownPeer(node)
	if p == nil {
		// The epoch starts from the clock, so a restarted device's packets
		// are known for a new session by the peer that still remembers it.
		p = &peer{node: node, pulls: map[uint32]*job{},
			tx: transport.NewTx(&d.tcfg, &d.book, uint16(d.now()>>24)),
			rx: transport.NewRx(&d.book)}
		d.peers[node] = p
		d.peerList = append(d.peerList, p)
	}
	d.lastPeer = p
	return p
}

// knownPeer is node's peer, or nil when the device has none: the one
// peerOf found last without the map (a stream's commands go to one peer,
// and a ping-pong hears the peer it sends to; the lookup was 7% of a
// sender's samples), else the map's.
func (d *Device) knownPeer(node uint16) *peer {
	if p := d.lastPeer; p != nil && p.node == node {
		return p
	}
	return d.peers[node]
}

// maxStrangers bounds the peers a device keeps for senders its port
// cannot vouch for: each may pin a held frame and owed replies, so a flood
// of made-up node ids must not grow them without limit.
const maxStrangers = 256

// strangerIdle is how long a stranger with nothing outstanding is kept
// after its last frame when its place is wanted.
const strangerIdle = 10_000_000_000

// admit decides whether a frame from node, whose Ethernet source is src,
// may reach the peer table: the source must be the node's own address,
// and the node one the port vouches for, or, when it cannot, one of at
// most maxStrangers. Refusals are counted (RX_SPOOFED, RX_UNKNOWN_PEER)
// and keep nothing.
func (d *Device) admit(node uint16, src []byte) (*peer, bool) {
	if n, ok := wire.MACNode(src); !ok || n != node {
		d.screenSpoofed.Add(1)
		d.mirrorScreen()
		return nil, false
	}
	p := d.knownPeer(node)
	if p != nil {
		if p.stranger {
			p.heard = true
		}
		return p, true
	}
	if d.peerSet != nil {
		if !d.peerSet.KnowsPeer([6]byte(src)) {
			d.screenUnknown.Add(1)
			d.mirrorScreen()
			return nil, false
		}
		return d.peerOf(node), true
	}
	if d.strangers >= maxStrangers && !d.evictStranger() {
		d.screenUnknown.Add(1)
		d.mirrorScreen()
		return nil, false
	}
	p = d.peerOf(node)
	p.stranger, p.lastHeard = true, d.now()
	d.strangers++
	return p, true
}

// evictStranger forgets the stranger idle longest, if one has nothing
// outstanding either way and was idle for strangerIdle.
func (d *Device) evictStranger() bool {
	now := d.now()
	victim := -1
	for i, p := range d.peerList {
		if p.stranger && p.heard {
			p.heard, p.lastHeard = false, now
		}
		if !p.stranger || now-p.lastHeard < strangerIdle || len(p.q) > 0 || len(p.resp) > 0 || len(p.pulls) > 0 ||
			p.held != nil || p.pagingHold || len(p.owedCtl) > 0 || p.tx.Unacked() > 0 || p.tx.Armed() ||
			p.rx.Pending() || p.msg.open || p.pullDeadline != 0 {
			continue
		}
		if victim < 0 || p.lastHeard < d.peerList[victim].lastHeard {
			victim = i
		}
	}
	if victim < 0 {
		return false
	}
	p := d.peerList[victim]
	delete(d.peers, p.node)
	delete(d.rxBatches, p)
	if d.lastPeer == p {
		d.lastPeer = nil
	}
	d.peerList = slices.Delete(d.peerList, victim, victim+1)
	d.strangers--
	return true
}

// refusal is a packet the receiver refused for good, and why.
type refusal struct {
	seq  uint32
	code uint16
	mask uint64 // PUSHB: the refused sub-messages (the NACK's Imm)
}

// maxRefusals bounds the refusals a receiver keeps per peer. A peer that
// confirms each refusal it takes never comes near it; beyond it the oldest
// is forgotten (its ACK is no longer held back).
const maxRefusals = 256

// rxMsg is the receiver's view of the message a peer is sending: a
// message is reported complete only when every packet of it was placed.
type rxMsg struct {
	open   bool
	id     uint32
	typ    wire.Type
	broken bool // a packet of it was refused: the rest is discarded, no completion
}

// sentPkt is what one sequence number carries, to encode it again.
type sentPkt struct {
	typ   wire.Type
	flags wire.Flags // FlagUnordered, decided when the command started
	j     *job
	batch *pushBatch // PUSHB: the whole PUSHes it carries (j is nil)
	r     *respJob
	off   uint32
	n     uint32
	last  bool
}

// ctl is a control frame (NACK) the link could not take yet.
type ctl struct {
	typ   wire.Type
	seq   uint32
	code  uint16
	flags wire.Flags
	imm   uint64 // a PUSHB refusal's mask of refused sub-messages
}

// send frames a header and payload to p, piggybacking the cumulative ACK
// under the epoch of p's session it acknowledges (Tag): p numbers a new
// session from 1 again, and must tell a late ACK or NACK of the session
// it ended from one of the new. A Tagged PUSH needs Tag for its port, so
// it carries no ACK; the ACK stays owed and goes alone.
// gather: a port that can sends the payload from where it lies.
func (d *Device) send(p *peer, h *wire.Header, payload []byte, gather bool) error {
	if h.Flags&wire.FlagTagged == 0 && p.rx.Known() {
		h.Tag = p.rx.Epoch()
		if ack, ok := p.rx.AckField(); ok {
			h.Flags |= wire.FlagAckValid
			h.Ack = heldAck(p, h, ack)
		}
	}
	if d.crc {
		h.Flags |= wire.FlagCRC
	}
	if gather && d.slots != nil && len(payload) > 0 && !d.crc {
		sent, err := d.sendInSlot(p, h, payload)
		if err != nil {
			return err
		}
		if sent {
			goto sent
		}
	}
	if gather && d.vec != nil && len(payload) > 0 {
		head := wire.AppendHead(d.port.Buffer(), wire.NodeMAC(p.node), d.mac, h, payload)
		if t := d.tracer.Load(); t != nil {
			d.traceTx(t, h, head, payload)
		}
		if err := d.vec.SendVec(head, payload); err != nil {
			d.port.Release(head)
			return err
		}
	} else {
		f := wire.AppendFrame(d.port.Buffer(), wire.NodeMAC(p.node), d.mac, h, payload)
		if t := d.tracer.Load(); t != nil {
			d.traceTx(t, h, f, nil)
		}
		if err := d.port.Send(f); err != nil {
			d.port.Release(f)
			return err
		}
	}
sent:
	if d.trace && tracedType(h.Type) {
		d.stamp(uapi.TraceTx)
	}
	if h.Flags&wire.FlagAckValid != 0 {
		p.rx.AckSent(h.Flags&wire.FlagSack != 0 || h.Type == wire.TypeNack && h.Code == wire.NackSeqErr)
	}
	return nil
}

// sendInSlot builds the frame in the slot the port lends (link.SlotWriter)
// and publishes it; sent false: the port wants it sent otherwise.
func (d *Device) sendInSlot(p *peer, h *wire.Header, payload []byte) (sent bool, err error) {
	mac := wire.NodeMAC(p.node)
	n := wire.FrameOverhead + len(payload)
	b, err := d.slots.Reserve([6]byte(mac), n)
	if b == nil || err != nil {
		return false, err
	}
	head := wire.AppendHead(b[:0:wire.FrameOverhead], mac, d.mac, h, payload)
	copy(b[wire.FrameOverhead:], payload)
	if t := d.tracer.Load(); t != nil {
		d.traceTx(t, h, head, payload)
	}
	return true, d.slots.Commit()
}

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

// pushBatch is the commands a PUSHB frame carries, in posting order
// (behind a pointer: a packet record is copied on every send and ACK).
type pushBatch struct{ jobs []*job }

// rxBatch is how far the receiver got with a peer's PUSHB frame that the
// status ring stopped (placeBatch; Device.rxBatches, not a field of peer:
// 256 bytes is its allocation's size class, and a ping-pong touches it
// on every frame): its sub-messages before next are placed or refused
// (mask), and a retry of frame seq (held, or resent after a NACK) goes on
// from there, so none is placed twice.
type rxBatch struct {
	seq  uint32
	next int
	mask uint64
}
