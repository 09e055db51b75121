package link

// The shared-memory medium's one-copy path. A frame's payload crosses the
// ring twice otherwise: the sender copies it into a slot and the receiver
// copies it out, into its link memory. When two processes meet, each also
// offers the other its device's link memory (ShareMemory: a read-only
// descriptor of the sealed memfd behind it, sent over their connection),
// and the other maps it read-only. A frame whose payload lies in the
// sender's link memory and that the peer said it mapped then crosses the
// ring as a referring frame: its head, with the EtherType shmRefType, and
// the payload's place (offset and length in that memory) instead of the
// payload. The receiver's RecvInPlace lends the payload where it lies in
// its mapping of the sender's memory, and the device's placement copies it
// from there into its own link memory: the one copy.
//
// The referring form exists only inside a ring: the device never sees it
// (RecvInPlace and Recv hand out the frame as if it had been carried), a
// capture or trace records the frame whole, and no other medium has it.
// Its rules:
//   - only a payload in the memory the port shares is referred to, and
//     only one the device sends with SendVec: a command's first send of a
//     packet, whose bytes the driver keeps unchanged until the command
//     completes, which needs that packet's ACK, which the receiver sends
//     after it copied them; or a PULL response, whose bytes the receiver
//     then reads when it places them instead of when the frame was sent, as
//     any remote read racing a writer may see them. Resends are carried.
//   - the receiver trusts nothing of the reference: it is copied out of
//     the slot once, and an offset or length outside the sender's mapped
//     memory, or a frame longer than the MTU, is counted (Dropped) and
//     dropped, as a malformed frame is; the sender's resend brings the
//     payload carried.
//   - the mapping of a peer's memory lives as long as its ring (unmapped
//     with it, in release), so a payload lent out is readable until Done
//     and beyond.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/vdev/wire"
)

// ErrNotSealed is returned by ShareMemory for memory a peer could not map
// safely: a file that can shrink under its mapping (a /dev/shm region)
// would kill the peer that reads it with SIGBUS.
var ErrNotSealed = errors.New("link: shared memory not sealed against shrinking")

const (
	// shmMsgMagic starts every message two ports exchange on their
	// connection after the hello: "DNSM".
	shmMsgMagic = 0x4d534e44
	shmMsgLen   = 24 // magic u32, kind u16, zero u16, offset u64, size u64
	// The messages' kinds.
	shmMsgOffer    = 1 // with one descriptor: our link memory, read-only, at offset, of size bytes
	shmMsgMapped   = 2 // we mapped what you offered: your frames to us may refer to it
	shmMsgDeclined = 3 // we could not map it: keep carrying payloads

	// shmRefType is the EtherType of a referring frame in a ring: the IEEE
	// local experimental EtherType next to the frames' own, and never on
	// the wire.
	shmRefType = 0x88B6
	// shmRefLen is the reference after a referring frame's head: the
	// payload's offset (u64) and length (u32) in the sender's shared
	// memory, the head's own EtherType (2 bytes, as the head held it) and
	// two zero bytes.
	shmRefLen = 16
	// shmRefMaxFrame bounds a referring frame: a head and its reference.
	shmRefMaxFrame = 256
)

// ShmRefMin is the least payload the shared-memory link sends by
// reference: below it the payload's few cache lines cross with the
// frame's own, and a reference would only add the receiver's reads of the
// sender's lines.
const ShmRefMin = 2048

// sharedMem is the memory a port offers its peers.
type sharedMem struct {
	fd   int     // a read-only descriptor of the memory's file: what a peer gets
	off  int64   // where the memory starts in the file
	base uintptr // where it is mapped here (only compared, never read through)
	size int
	sent atomic.Uint64 // frames sent by reference
}

// Referred counts the frames this port sent by reference to a payload in
// its shared memory: what a test or a measurement looks at to know the
// one-copy path was taken.
func (p *shmPort) Referred() uint64 {
	if m := p.share.Load(); m != nil {
		return m.sent.Load()
	}
	return 0
}

// offsetOf is b's offset in the shared memory, if b lies wholly in it.
func (m *sharedMem) offsetOf(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if a < m.base || a-m.base >= uintptr(m.size) || uintptr(len(b)) > uintptr(m.size)-(a-m.base) {
		return 0, false
	}
	return uint64(a - m.base), true
}

// peerMapping is a peer's shared memory, mapped read-only here.
type peerMapping struct {
	all  []byte // the whole mapping, from a page boundary: what Munmap takes
	view []byte // the memory the peer offered
}

// shmPeerMem is what a connection's peer and we share besides the rings.
type shmPeerMem struct {
	offered atomic.Bool                 // we sent our offer on this connection
	refer   atomic.Bool                 // the peer mapped it: our frames to it may refer to it
	theirs  atomic.Pointer[peerMapping] // the peer's memory, once it offered and we mapped it
}

// close unmaps the peer's memory: with its ring, once nobody reads either.
func (m *shmPeerMem) close() {
	if pm := m.theirs.Swap(nil); pm != nil {
		unix.Munmap(pm.all)
	}
}

// ShareMemory offers the peers, present and future, the memory mem,
// which lies at offset off of the sealed memfd fd (the device's link
// memory in its region): each maps it read-only, and frames whose
// payload lies in mem cross the rings as references to it (see the top of
// this file). fd stays the caller's; the port keeps a read-only descriptor
// of its own. Only the first call shares.
func (p *shmPort) ShareMemory(fd int, off int64, mem []byte) error {
	if len(mem) == 0 || off < 0 {
		return fmt.Errorf("link: shm node %d: share %d bytes at %d: nothing to share", p.node, len(mem), off)
	}
	if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return fmt.Errorf("link: shm node %d: share fd %d: %w", p.node, fd, ErrNotSealed)
	}
	// A descriptor opened read-only: a peer can map it for reading only.
	ro, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("link: shm node %d: reopen fd %d read-only: %w", p.node, fd, err)
	}
	m := &sharedMem{fd: ro, off: off, base: uintptr(unsafe.Pointer(unsafe.SliceData(mem))), size: len(mem)}
	// Under p.mu: Close closes the descriptor under it, so no offer
	// sends it closed (or another file under its number).
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() || !p.share.CompareAndSwap(nil, m) {
		unix.Close(ro)
		return fmt.Errorf("link: shm node %d: memory already shared or port closed", p.node)
	}
	for _, peer := range *p.peers.Load() {
		p.offer(peer) // a peer added meanwhile is offered by add too; offer sends once
	}
	return nil
}

// offer sends peer our shared memory, once per connection: from
// ShareMemory under p.mu, or from add before the peer's watchConn starts
// (Close waits for that goroutine, so for the offer, before it closes the
// descriptor).
func (p *shmPort) offer(peer *shmPeer) {
	m := p.share.Load()
	if m == nil || peer.mem.offered.Swap(true) {
		return
	}
	b := shmMsg(shmMsgOffer, uint64(m.off), uint64(m.size))
	if _, _, err := peer.conn.WriteMsgUnix(b[:], unix.UnixRights(m.fd), nil); err != nil {
		p.logf("offer memory to node %d: %v", peer.node, err)
	}
}

func shmMsg(kind uint16, off, size uint64) [shmMsgLen]byte {
	var b [shmMsgLen]byte
	binary.LittleEndian.PutUint32(b[0:], shmMsgMagic)
	binary.LittleEndian.PutUint16(b[4:], kind)
	binary.LittleEndian.PutUint64(b[8:], off)
	binary.LittleEndian.PutUint64(b[16:], size)
	return b
}

// readConn reads the peer's messages on its connection until it ends (its
// process exited or it closed the port).
func (p *shmPort) readConn(peer *shmPeer) {
	var b [shmMsgLen]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	got := 0
	for {
		n, oobn, _, _, err := peer.conn.ReadMsgUnix(b[got:], oob)
		if oobn > 0 {
			if f, e := shmRights(oob[:oobn]); e == nil {
				fds = append(fds, f...)
			}
		}
		if err != nil || n == 0 {
			return
		}
		if got += n; got < shmMsgLen {
			continue
		}
		got = 0
		p.message(peer, b, fds)
		fds = nil
	}
}

// message acts on one message of peer's; it owns fds.
func (p *shmPort) message(peer *shmPeer, b [shmMsgLen]byte, fds []int) {
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	if binary.LittleEndian.Uint32(b[0:]) != shmMsgMagic {
		p.logf("node %d sent a message without our magic", peer.node)
		return
	}
	off, size := binary.LittleEndian.Uint64(b[8:]), binary.LittleEndian.Uint64(b[16:])
	switch kind := binary.LittleEndian.Uint16(b[4:]); kind {
	case shmMsgOffer:
		reply := shmMsgMapped
		if len(fds) != 1 || peer.mem.theirs.Load() != nil {
			p.logf("node %d offered memory with %d descriptors (mapped already: %v)", peer.node, len(fds), peer.mem.theirs.Load() != nil)
			reply = shmMsgDeclined
		} else if pm, err := mapPeerMem(fds[0], off, size); err != nil {
			p.logf("map node %d's memory: %v", peer.node, err)
			reply = shmMsgDeclined
		} else {
			peer.mem.theirs.Store(pm)
		}
		r := shmMsg(uint16(reply), off, size)
		if _, err := peer.conn.Write(r[:]); err != nil {
			p.logf("answer node %d's offer: %v", peer.node, err)
		}
	case shmMsgMapped:
		if peer.mem.offered.Load() {
			peer.mem.refer.Store(true)
			p.logf("node %d mapped our memory: large payloads go by reference", peer.node)
		}
	case shmMsgDeclined:
		p.logf("node %d declined our memory: payloads stay carried", peer.node)
	default:
		p.logf("node %d sent message kind %d", peer.node, kind)
	}
}

// mapPeerMem maps size bytes at offset off of a peer's descriptor
// read-only, after checking that the file is sealed against shrinking (or
// a read of a lost page would kill us with SIGBUS) and holds them.
func mapPeerMem(fd int, off, size uint64) (*peerMapping, error) {
	if seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0); err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, ErrNotSealed
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	if size == 0 || size > 1<<40 || off > uint64(st.Size) || size > uint64(st.Size)-off {
		return nil, fmt.Errorf("%d bytes at %d of a %d-byte file: %w", size, off, st.Size, ErrBadOffer)
	}
	pg := uint64(os.Getpagesize())
	start := off &^ (pg - 1)
	all, err := unix.Mmap(fd, int64(start), int(off-start+size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %d bytes at %d: %w", size, off, err)
	}
	return &peerMapping{all: all, view: all[off-start:][:size:size]}, nil
}

// ErrBadOffer: a peer offered memory its file does not hold.
var ErrBadOffer = errors.New("link: shared memory offer out of range")

// putRef puts the referring frame that stands for head and payload in
// peer's ring, if payload lies in our shared memory (SendVec calls it for
// a payload large enough to be worth it, to a peer that mapped that
// memory); done false: it does not, and the frame is to be carried.
func (p *shmPort) putRef(peer *shmPeer, head, payload []byte) (done bool, err error) {
	m := p.share.Load()
	if m == nil || len(head) < wire.EthHeaderLen || len(head)+shmRefLen > shmRefMaxFrame {
		return false, nil
	}
	off, ok := m.offsetOf(payload)
	if !ok {
		return false, nil
	}
	var ref [shmRefLen]byte
	binary.LittleEndian.PutUint64(ref[0:], off)
	binary.LittleEndian.PutUint32(ref[8:], uint32(len(payload)))
	copy(ref[12:14], head[12:14])
	binary.BigEndian.PutUint16(head[12:], shmRefType)
	err = p.put(peer, head, ref[:])
	copy(head[12:14], ref[12:14]) // the caller keeps head on an error
	if err == nil {
		m.sent.Add(1)
	}
	return true, err
}

// isRef reports whether a frame head (a copy of ours) says it refers.
func isRef(head []byte) bool {
	return len(head) >= wire.EthHeaderLen && binary.BigEndian.Uint16(head[12:]) == shmRefType
}

// resolve turns the referring frame v, still in peer's slot, into the
// frame it stands for, handed out as RecvInPlace does: its first n bytes
// (all of its head at least) copied into head, the rest lent from our
// mapping of the peer's memory. It reads v once, into a copy it checks,
// and reports false for a reference that is not one: too long, a nonzero
// reserved field, an offset or length outside the memory the peer shared,
// a frame longer than the MTU, or a peer whose memory we did not map.
func (p *shmPort) resolve(peer *shmPeer, v []byte, n int, head []byte) ([]byte, []byte, bool) {
	var c [shmRefMaxFrame]byte
	if len(v) > len(c) || len(v) < wire.EthHeaderLen+shmRefLen {
		return head, nil, false
	}
	c2 := c[:copy(c[:], v)]
	hl := len(c2) - shmRefLen
	ref := c2[hl:]
	if !isRef(c2) || binary.LittleEndian.Uint16(ref[14:]) != 0 {
		return head, nil, false
	}
	pm := peer.mem.theirs.Load()
	off, ln := binary.LittleEndian.Uint64(ref[0:]), uint64(binary.LittleEndian.Uint32(ref[8:]))
	if pm == nil || ln == 0 || off > uint64(len(pm.view)) || ln > uint64(len(pm.view))-off || uint64(hl)+ln > uint64(p.mtu) {
		return head, nil, false
	}
	copy(c2[12:14], ref[12:14]) // the head's own EtherType
	payload := pm.view[off : off+ln : off+ln]
	head = append(head[:0], c2[:hl]...)
	k := max(0, min(n-hl, len(payload)))
	if hl > n {
		k = len(payload) // the head is not split: the whole frame is copied
	}
	return append(head, payload[:k]...), payload[k:], true
}
