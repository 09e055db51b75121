// Package shmring is the shared-memory medium between processes of one
// host: one single-producer single-consumer frame ring per ordered pair of
// processes, in a memfd the producer creates and the consumer maps
// read-only, so each side writes only memory it owns and a peer's bug can
// corrupt what we read but never what we write.
//
// A Segment is what one process creates for one peer: its transmit ring to
// that peer (the slots it fills and publishes) and its receive
// state for the peer's ring to it (the head it has consumed, the word that
// says it sleeps). The peer maps the Segment read-only as a Remote. The
// model is gVisor's pkg/tcpip/link/sharedmem: indexes the other side
// writes are read atomically and bounds-checked, whatever is checked is
// copied out of the ring before anyone looks at it (the producer could
// still rewrite it: no double fetch) — a whole frame with Get, or, with
// Peek, the headers while the payload is read once, straight into place,
// and never checked — and the producer signals the consumer's eventfd
// only when the consumer said it sleeps.
//
// A hand-off moves as few cache lines as it can (FastForward, Giacomoni et
// al., PPoPP 2008): each slot starts with a word the producer stores last,
// holding the frame's ticket and length, and the consumer spins on that
// word rather than on a separate tail, so a small frame crosses in the
// line or two it occupies. The consumer publishes its head only every
// quarter ring (and the producer re-reads it only when the ring looks
// full), so the head's line stays off the path of every frame.
//
// Where it can (amd64, the process registered for membarrier(2)), the
// producer stores the slot word with a plain store instead of a locked
// one, and says so in the segment (Remote.Lazy): the locked store waited
// for the lines the consumer was reading to come back before the producer
// could go on, on every frame. A consumer of such a ring runs Fence before
// its last look ahead of a sleep, so the sleep word's protocol holds.
package shmring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/dimmnet/dimmnet/internal/release"
	"golang.org/x/sys/unix"
)

// Layout of a segment. Each index the two sides write sits on a cache line
// of its own: a store to one does not pull the other's line away.
const (
	magic     = 0x474e5252_4d4d4944 // "DIMMRRNG" little-endian
	version   = 3
	offMagic  = 0  // u64, stored last at creation
	offVer    = 8  // u32
	offSlots  = 12 // u32: slots in the ring, a power of two
	offSlotSz = 16 // u32: bytes per slot, slot word included
	offFlags  = 20 // u32: flagLazy, nothing else
	offHead   = 128
	offSleep  = 192
	offClosed = 256
	// HeaderSize is the bytes before the first slot.
	HeaderSize = 4096
	// lenWord: each slot starts with its slot word, stored last by the
	// producer: the frame's length in the low 32 bits and its ticket (the
	// low 32 bits of its ring index plus one) in the high ones. A ticket
	// of zero means "never written".
	lenWord = 8
	seals   = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	// flagLazy: the producer publishes slot words with plain stores (no
	// barrier before its load of the sleep word); its consumer must Fence
	// before the last look ahead of a sleep.
	flagLazy = 1
)

// Errors a caller tests for.
var (
	// ErrFull: the ring has no free slot now; try again later.
	ErrFull = errors.New("shmring: ring full")
	// ErrCorrupt: an index or length the peer wrote is out of range (it
	// died in the middle of a write, or it is broken). The ring cannot be
	// trusted any more: take the link to that peer down.
	ErrCorrupt = errors.New("shmring: peer index or length out of range")
	// ErrTooBig: the frame does not fit in a slot.
	ErrTooBig = errors.New("shmring: frame larger than a slot")
	// ErrBadSegment: the memory a peer sent is not a segment we can use
	// safely (wrong magic, version, size, or not sealed against shrinking).
	ErrBadSegment = errors.New("shmring: not a usable ring segment")
)

// Size is the bytes a segment of slots slots of slotSize bytes takes.
func Size(slots, slotSize int) int { return HeaderSize + slots*slotSize }

// Segment is a segment this process owns and writes.
type Segment struct {
	mem      []byte
	fd       int
	slots    uint64
	slotSize int
	tail     uint64 // frames we published
	peerHead uint64 // the consumer's head as we last read it
	head     uint64 // frames we consumed (atomic loads, release.Store); published every quarter ring
	shown    uint64 // the head as we last published it
	lazy     bool   // we publish with release.Store (flagLazy)
}

// Create makes a sealed memfd segment with slots slots (a power of two)
// each carrying frames of up to maxFrame bytes.
func Create(name string, slots, maxFrame int) (*Segment, error) {
	if slots < 2 || slots&(slots-1) != 0 || maxFrame < 1 || maxFrame > 1<<24 {
		return nil, fmt.Errorf("shmring: create %s: %d slots of %d bytes: slots must be a power of two >= 2, frames 1..16 MiB", name, slots, maxFrame)
	}
	slotSize := (maxFrame + lenWord + 63) &^ 63
	size := Size(slots, slotSize)
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("shmring: memfd %s: %w", name, err)
	}
	fail := func(what string, err error) (*Segment, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("shmring: %s %s: %w", what, name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("size", err)
	}
	// Sealed: a peer that maps it can rely on its size (no SIGBUS from a
	// shrink), and we cannot be asked to grow it either.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return fail("seal", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("map", err)
	}
	s := &Segment{mem: mem, fd: fd, slots: uint64(slots), slotSize: slotSize, lazy: release.Plain && registered()}
	binary.LittleEndian.PutUint32(mem[offVer:], version)
	binary.LittleEndian.PutUint32(mem[offSlots:], uint32(slots))
	binary.LittleEndian.PutUint32(mem[offSlotSz:], uint32(slotSize))
	if s.lazy {
		binary.LittleEndian.PutUint32(mem[offFlags:], flagLazy)
	}
	atomic.StoreUint64(s.word(offMagic), magic) // last: a mapper that sees it sees the header
	return s, nil
}

func (s *Segment) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }

// FD is the memfd to hand the peer (it stays ours; the peer dups it on receipt).
func (s *Segment) FD() int { return s.fd }

// MaxFrame is the largest frame a slot holds.
func (s *Segment) MaxFrame() int { return s.slotSize - lenWord }

// Close unmaps the segment and closes its fd; a peer keeps its own mapping.
func (s *Segment) Close() error {
	if s.mem == nil {
		return nil
	}
	atomic.StoreUint64(s.word(offClosed), 1)
	err := errors.Join(unix.Munmap(s.mem), unix.Close(s.fd))
	s.mem = nil
	return err
}

// SetSleeping says whether this side, as a consumer, sleeps and must be
// signalled: store it, then (Fence, if the peer publishes lazily) look at
// the ring once more before sleeping (the producer stores a slot word,
// then loads this word: one of the two sees the other).
func (s *Segment) SetSleeping(on bool) {
	v := uint64(0)
	if on {
		v = 1
	}
	atomic.StoreUint64(s.word(offSleep), v)
}

// Remote is a peer's segment, mapped read-only.
type Remote struct {
	mem      []byte
	slots    uint64
	slotSize int
	lazy     bool
}

// Map maps a peer's segment read-only after checking that it is one: sealed
// against shrinking (or the peer could make us die of SIGBUS), of the size
// its header states, with our magic and version. fd stays the caller's.
func Map(fd int) (*Remote, error) {
	got, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("shmring: seals of fd %d: %w: %w", fd, ErrBadSegment, err)
	}
	if got&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("shmring: fd %d can shrink under us: %w", fd, ErrBadSegment)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shmring: stat fd %d: %w", fd, err)
	}
	if st.Size < HeaderSize || st.Size > 1<<32 {
		return nil, fmt.Errorf("shmring: fd %d of %d bytes: %w", fd, st.Size, ErrBadSegment)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shmring: map fd %d: %w", fd, err)
	}
	r := &Remote{mem: mem}
	m := atomic.LoadUint64(r.word(offMagic))
	v := binary.LittleEndian.Uint32(mem[offVer:])
	slots := uint64(binary.LittleEndian.Uint32(mem[offSlots:]))
	slotSize := int(binary.LittleEndian.Uint32(mem[offSlotSz:]))
	flags := binary.LittleEndian.Uint32(mem[offFlags:])
	if m != magic || v != version || slots < 2 || slots&(slots-1) != 0 || slotSize <= lenWord || slotSize%8 != 0 ||
		int64(Size(int(slots), slotSize)) != st.Size || flags&^flagLazy != 0 {
		unix.Munmap(mem)
		return nil, fmt.Errorf("shmring: fd %d: magic %#x version %d, %d slots of %d bytes in %d, flags %#x: %w", fd, m, v, slots, slotSize, st.Size, flags, ErrBadSegment)
	}
	if flags&flagLazy != 0 && !canFence() {
		unix.Munmap(mem)
		return nil, fmt.Errorf("shmring: fd %d publishes lazily and this process cannot run membarrier(2): %w", fd, ErrBadSegment)
	}
	r.slots, r.slotSize, r.lazy = slots, slotSize, flags&flagLazy != 0 // read once: later writes to the header change nothing here
	return r, nil
}

func (r *Remote) word(off int) *uint64 { return (*uint64)(unsafe.Pointer(&r.mem[off])) }

// Close unmaps the peer's segment.
func (r *Remote) Close() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}

// Lazy reports whether the peer publishes lazily: a consumer that sleeps
// runs Fence after storing its sleep word and before its last look.
func (r *Remote) Lazy() bool { return r.lazy }

// Closed reports whether the peer closed its segment on purpose.
func (r *Remote) Closed() bool { return atomic.LoadUint64(r.word(offClosed)) != 0 }

// Pair is one direction each way with one peer: we produce into mine and
// consume from theirs.
type Pair struct {
	Mine   *Segment
	Theirs *Remote
}

// Put copies head and payload into the next slot as one frame and
// publishes it by storing the slot's word last. It reports whether the
// peer sleeps and must be signalled.
func (p *Pair) Put(head, payload []byte) (wake bool, err error) {
	n := len(head) + len(payload)
	b, err := p.Reserve(n)
	if err != nil {
		return false, err
	}
	copy(b[copy(b, head):], payload)
	return p.Commit(n), nil
}

// Reserve returns the next slot's room for a frame of n bytes, for the
// caller to write the frame into where the consumer will read it (a
// frame built in place is copied once, not built in a buffer and then
// copied), and publish with Commit(n). Nothing is published until then;
// a Reserve not committed is forgotten by the next one. Errors are
// Put's: ErrTooBig, ErrFull, ErrCorrupt.
func (p *Pair) Reserve(n int) ([]byte, error) {
	s := p.Mine
	if n > s.slotSize-lenWord {
		return nil, fmt.Errorf("shmring: frame of %d bytes, slots hold %d: %w", n, s.slotSize-lenWord, ErrTooBig)
	}
	if s.tail-s.peerHead >= s.slots {
		// Full as far as we know: the consumer publishes its head only
		// every quarter ring, so look at it again.
		h := atomic.LoadUint64(p.Theirs.word(offHead))
		switch used := s.tail - h; {
		case used > s.slots: // ahead of our tail, or more than a ring behind it
			return nil, fmt.Errorf("shmring: peer head %d, our tail %d: %w", h, s.tail, ErrCorrupt)
		case used == s.slots:
			return nil, ErrFull
		}
		s.peerHead = h
	}
	off := HeaderSize + int(s.tail&(s.slots-1))*s.slotSize + lenWord
	return s.mem[off : off+n : off+n], nil
}

// Commit publishes the frame of n bytes written into the slot the last
// Reserve returned, by storing the slot's word last. It reports whether
// the peer sleeps and must be signalled.
func (p *Pair) Commit(n int) (wake bool) {
	s := p.Mine
	off := HeaderSize + int(s.tail&(s.slots-1))*s.slotSize
	s.tail++
	w := uint64(uint32(s.tail))<<32 | uint64(n)
	if s.lazy {
		release.Store(s.word(off), w) // publishes the slot; the consumer's Fence orders it before the load below
	} else {
		atomic.StoreUint64(s.word(off), w) // publishes the slot
	}
	return atomic.LoadUint64(p.Theirs.word(offSleep)) != 0
}

// next loads the slot word of the frame at our head and returns its
// length, or -1 when the producer has not published it yet.
func (p *Pair) next() (int, error) {
	s, r := p.Mine, p.Theirs
	h := atomic.LoadUint64(&s.head)
	off := HeaderSize + int(h&(r.slots-1))*r.slotSize
	w := atomic.LoadUint64(r.word(off)) // read once
	switch t := uint32(w >> 32); t {
	case uint32(h + 1):
	case uint32(h + 1 - r.slots): // the previous lap's frame
		r.touch(off)
		return -1, nil
	case 0: // never written, on the first lap only
		if h >= r.slots {
			return 0, fmt.Errorf("shmring: slot of frame %d cleared: %w", h, ErrCorrupt)
		}
		r.touch(off)
		return -1, nil
	default:
		return 0, fmt.Errorf("shmring: slot of frame %d holds ticket %d: %w", h, t, ErrCorrupt)
	}
	n := int(uint32(w))
	if n > r.slotSize-lenWord {
		return 0, fmt.Errorf("shmring: frame %d says %d bytes, slots hold %d: %w", h, n, r.slotSize-lenWord, ErrCorrupt)
	}
	return n, nil
}

// touch loads the second cache line of the slot at off while we wait for
// its word: the producer writes that line before the word, so by the time
// the word is seen the line has already come over and the frame is read
// in one line transfer instead of two in a row (headers and an 8-byte
// payload take 86 bytes). The value is not used.
func (r *Remote) touch(off int) {
	if r.slotSize >= 128 {
		atomic.LoadUint64(r.word(off + 64))
	}
}

// Pending reports whether a frame waits to be taken (or the slot at our
// head is corrupt: Get says so). It may be called from any goroutine.
func (p *Pair) Pending() bool {
	n, err := p.next()
	return n >= 0 || err != nil
}

// Get copies the next frame into dst (its capacity must hold a slot's
// frame) and frees its slot. It returns nil when none waits; ErrCorrupt
// when the slot's word is out of range.
func (p *Pair) Get(dst []byte) ([]byte, error) {
	v, err := p.Peek()
	if v == nil {
		return nil, err
	}
	if len(v) > cap(dst) {
		return nil, fmt.Errorf("shmring: frame of %d bytes, buffer holds %d: %w", len(v), cap(dst), ErrTooBig)
	}
	f := append(dst[:0], v...)
	p.Done()
	return f, nil
}

// Peek returns the next frame where it lies in the peer's slot, or nil
// when none waits (ErrCorrupt when the slot's word is out of range). The
// slot stays ours until Done; the peer can still write it, so whoever
// reads the view reads each byte once and trusts nothing it read (copy
// what must be checked first). A frame of length 0 is a zero-length,
// non-nil view.
func (p *Pair) Peek() ([]byte, error) {
	s, r := p.Mine, p.Theirs
	n, err := p.next()
	if n < 0 || err != nil {
		return nil, err
	}
	off := HeaderSize + int(atomic.LoadUint64(&s.head)&(r.slots-1))*r.slotSize + lenWord
	return r.mem[off : off+n : off+n], nil
}

// Done frees the slot of the frame Peek returned.
func (p *Pair) Done() {
	s, r := p.Mine, p.Theirs
	h := atomic.LoadUint64(&s.head) + 1
	// Only the consumer's pass stores either word, and nothing loads a
	// word of the peer's after them in a hand-off that needs ordering: a
	// release store each (release.Store), no locked instruction per frame.
	// Under TSO the slot's loads above are not passed by them either, so
	// the producer never gets a slot back that we still read.
	release.Store(&s.head, h)
	if h-s.shown >= max(r.slots/4, 1) {
		s.shown = h
		release.Store(s.word(offHead), h) // those slots are the producer's again
	}
}

// MaxFrame is the largest frame the peer's slots carry to us.
func (r *Remote) MaxFrame() int { return r.slotSize - lenWord }
