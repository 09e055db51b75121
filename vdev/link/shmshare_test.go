package link

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/vdev/wire"
)

// sharedMemfd makes a sealed memfd of size bytes named name (unique per
// test, so /proc/self/maps can be searched for it), maps it read-write and
// returns both; they are closed when the test ends.
func sharedMemfd(t *testing.T, name string, size int) (int, []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem); unix.Close(fd) })
	return fd, mem
}

// memName is a memfd name no other test (or engineer) uses.
func memName(what string) string {
	return fmt.Sprintf("dimmnet-test-%s-%d-%d", what, os.Getpid(), rand.Uint32())
}

// sharePair is listenPair with each port sharing memory of its own (the
// second half of a memfd, at a page offset as a device's link memory
// lies in its region); it waits until each side says it mapped the
// other's.
func sharePair(t *testing.T, mtu int) (a, b Port, memA, memB []byte, nameA string) {
	t.Helper()
	a, b = listenPair(t, mtu)
	const size, off = 4 << 20, 1 << 20
	nameA = memName("a")
	fdA, mA := sharedMemfd(t, nameA, size)
	fdB, mB := sharedMemfd(t, memName("b"), size)
	if err := a.(MemorySharer).ShareMemory(fdA, off, mA[off:]); err != nil {
		t.Fatal(err)
	}
	if err := b.(MemorySharer).ShareMemory(fdB, off, mB[off:]); err != nil {
		t.Fatal(err)
	}
	// b met a while it listened; nudge a to meet b if it has not yet.
	a.(*shmPort).peer(wire.NodeMAC(2))
	for end := time.Now().Add(5 * time.Second); ; {
		pa, pb := (*a.(*shmPort).peers.Load())[2], (*b.(*shmPort).peers.Load())[1]
		if pa != nil && pb != nil && pa.mem.refer.Load() && pb.mem.refer.Load() {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the ports did not map each other's memory")
		}
		time.Sleep(time.Millisecond)
	}
	return a, b, mA[off:], mB[off:], nameA
}

// headTo is a frame head (Ethernet header and a body of hl bytes) to dst.
func headTo(p Port, dst net6, hl int) []byte {
	f := append(p.Buffer(), dst[:]...)
	f = append(f, p.MAC()...)
	f = append(f, 0x88, 0xb5)
	for i := 0; len(f) < hl; i++ {
		f = append(f, byte(0xa0+i))
	}
	return f
}

type net6 = [6]byte

// within reports whether b lies wholly in mem.
func within(b, mem []byte) bool {
	if len(b) == 0 || len(mem) == 0 {
		return false
	}
	p, m := uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&mem[0]))
	return p >= m && p+uintptr(len(b)) <= m+uintptr(len(mem))
}

// Payloads in the sender's shared memory cross by reference from
// ShmRefMin bytes on, many frames in flight at once, and arrive intact:
// RecvInPlace lends them from the receiver's mapping of the sender's
// memory (not from the ring), Recv hands them out whole; smaller ones and
// payloads elsewhere are carried. Without the referring form every rest
// would lie in the ring and Referred would stay 0.
func TestShmReferringFramesArriveIntact(t *testing.T) {
	const mtu = 64<<10 + wire.FrameOverhead
	a, b, memA, _, _ := sharePair(t, mtu)
	pb := (*b.(*shmPort).peers.Load())[1]
	for i := range memA {
		memA[i] = byte(i*13 + i>>9)
	}
	hl := wire.FrameOverhead
	sizes := []int{8, ShmRefMin - 1, ShmRefMin, ShmRefMin + 1, 9000, mtu - hl}
	type sent struct {
		frame []byte
		ref   bool
	}
	var want []sent
	off := 0
	send := func(n int, inShared bool) {
		head := headTo(a, net6(wire.NodeMAC(2)), hl)
		payload := memA[off : off+n]
		if !inShared {
			payload = bytes.Clone(payload)
		}
		frame := append(bytes.Clone(head), payload...)
		off = (off + n + 4093) % (len(memA) - mtu)
		if err := a.(VectorSender).SendVec(head, payload); err != nil {
			t.Fatalf("send %d bytes: %v", n, err)
		}
		want = append(want, sent{frame, inShared && n >= ShmRefMin})
	}
	slots := a.(*shmPort).slots
	for round := 0; round < 3; round++ {
		want = want[:0]
		// A ring's worth in flight: every size, in shared memory and
		// elsewhere, then large ones to fill the ring.
		for _, n := range sizes {
			send(n, true)
			send(n, false)
		}
		for len(want) < slots {
			send(mtu-hl, true)
		}
		refs := a.(*shmPort).Referred()
		for i, w := range want {
			var head, rest []byte
			if i%5 == 4 {
				head = recvWithin(t, b) // whole
			} else {
				for end := time.Now().Add(5 * time.Second); head == nil && time.Now().Before(end); {
					head, rest = b.(InPlaceReceiver).RecvInPlace(hl)
				}
			}
			got := append(bytes.Clone(head), rest...)
			if !bytes.Equal(got, w.frame) {
				t.Fatalf("round %d frame %d (%d bytes, by reference %v): got %d bytes, different", round, i, len(w.frame), w.ref, len(got))
			}
			if lent := within(rest, pb.mem.theirs.Load().view); lent != (w.ref && len(rest) > 0) {
				t.Fatalf("round %d frame %d (%d bytes, by reference %v): payload lent from the sender's memory: %v", round, i, len(w.frame), w.ref, lent)
			}
			b.Release(head)
			b.(InPlaceReceiver).Done()
		}
		nref := uint64(0)
		for _, w := range want {
			if w.ref {
				nref++
			}
		}
		if refs < nref*uint64(round+1) {
			t.Fatalf("round %d: %d frames sent by reference, want at least %d", round, refs, nref*uint64(round+1))
		}
	}
	if d := b.(DropCounter).Dropped(); d != 0 {
		t.Fatalf("%d frames dropped", d)
	}
}

// A reference the receiver cannot honour (outside the sender's shared
// memory, longer than the MTU, a nonzero reserved field, or from a peer
// whose memory it never mapped) is counted and dropped, reads nothing
// past the mapping, and leaves the link up: the next frame arrives.
func TestShmHostileReferenceDropped(t *testing.T) {
	const mtu = 9000
	a, b, memA, _, _ := sharePair(t, mtu)
	pa := (*a.(*shmPort).peers.Load())[2]
	size := uint64(len(memA))
	type bad struct {
		what     string
		off      uint64
		n        uint32
		reserved uint16
	}
	for _, c := range []bad{
		{"offset at the end", size, 8, 0},
		{"offset past the end", size + 4096, 8, 0},
		{"length past the end", size - 8, 16, 0},
		{"offset wrapping", ^uint64(0) - 3, 8, 0},
		{"longer than the MTU", 0, mtu, 0},
		{"zero length", 0, 0, 0},
		{"reserved bits", 0, 8, 1},
	} {
		before := b.(DropCounter).Dropped()
		head := headTo(a, net6(wire.NodeMAC(2)), wire.FrameOverhead)
		binary.BigEndian.PutUint16(head[12:], shmRefType)
		var ref [shmRefLen]byte
		binary.LittleEndian.PutUint64(ref[0:], c.off)
		binary.LittleEndian.PutUint32(ref[8:], c.n)
		ref[12], ref[13] = 0x88, 0xb5
		binary.LittleEndian.PutUint16(ref[14:], c.reserved)
		if err := a.(*shmPort).put(pa, head, ref[:]); err != nil {
			t.Fatal(err)
		}
		if err := a.Send(frameTo(a, wire.NodeMAC(2), "after "+c.what)); err != nil {
			t.Fatal(err)
		}
		f := recvWithin(t, b)
		if !bytes.HasSuffix(f, []byte("after "+c.what)) {
			t.Fatalf("%s: the frame after it: %q", c.what, f)
		}
		b.Release(f)
		if got := b.(DropCounter).Dropped() - before; got != 1 {
			t.Fatalf("%s: %d frames dropped, want 1", c.what, got)
		}
	}
	// A well-formed reference from a peer whose memory is not mapped (as
	// if it never offered it) is dropped too.
	pb := (*b.(*shmPort).peers.Load())[1]
	pm := pb.mem.theirs.Swap(nil)
	t.Cleanup(func() { unix.Munmap(pm.all) })
	before := b.(DropCounter).Dropped()
	head := headTo(a, net6(wire.NodeMAC(2)), wire.FrameOverhead)
	if err := a.(VectorSender).SendVec(head, memA[:ShmRefMin]); err != nil {
		t.Fatal(err)
	}
	if f := b.Recv(); f != nil {
		t.Fatalf("a reference into unmapped memory came out as %d bytes", len(f))
	}
	if got := b.(DropCounter).Dropped() - before; got != 1 {
		t.Fatalf("reference to an unmapped peer: %d frames dropped, want 1", got)
	}
}

// mappingsOf counts this process's mappings of files whose name holds name.
func mappingsOf(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), name)
}

// The receiver's read-only mapping of a peer's memory goes with the link:
// none is left once the ports close, and the read-only descriptor the
// sharing port kept is closed too.
func TestShmPeerMemoryUnmappedAtClose(t *testing.T) {
	a, b, _, _, nameA := sharePair(t, 9000)
	// a's own mapping (the test's) and b's of a's memory.
	if n := mappingsOf(t, nameA); n != 2 {
		t.Fatalf("%d mappings of node 1's memory, want 2 (its own and node 2's)", n)
	}
	b.Close()
	if n := mappingsOf(t, nameA); n != 1 {
		t.Fatalf("%d mappings of node 1's memory after node 2 left, want 1 (its own)", n)
	}
	fds := func() int {
		ents, _ := os.ReadDir("/proc/self/fd")
		n := 0
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.Contains(l, nameA) {
				n++
			}
		}
		return n
	}
	if n := fds(); n != 2 { // the test's and a's read-only one
		t.Fatalf("%d descriptors of node 1's memory, want 2", n)
	}
	a.Close()
	if n := fds(); n != 1 {
		t.Fatalf("%d descriptors of node 1's memory after it closed, want 1 (the test's)", n)
	}
}

// Memory in a file that can shrink is not shared: a peer reading a page
// the file lost would die of SIGBUS.
func TestShmSharesOnlySealedMemory(t *testing.T) {
	a, _ := listenPair(t, 9000)
	f, err := os.CreateTemp(t.TempDir(), "region")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Truncate(1 << 20)
	mem, err := unix.Mmap(int(f.Fd()), 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := a.(MemorySharer).ShareMemory(int(f.Fd()), 0, mem); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("sharing a plain file: %v, want ErrNotSealed", err)
	}
	if _, err := mapPeerMem(int(f.Fd()), 0, 1<<20); !errors.Is(err, ErrNotSealed) {
		t.Fatalf("mapping a plain file a peer offered: %v, want ErrNotSealed", err)
	}
	fd, _ := sharedMemfd(t, memName("offer"), 1<<20)
	if _, err := mapPeerMem(fd, 4096, 1<<20); !errors.Is(err, ErrBadOffer) {
		t.Fatalf("an offer past the file's end: %v, want ErrBadOffer", err)
	}
}

// FuzzShmResolve: whatever a peer writes in a slot, resolve reads nothing
// outside the mapping it was given, and what it hands out is at most an
// MTU, its payload inside the peer's memory.
func FuzzShmResolve(f *testing.F) {
	ok := make([]byte, wire.FrameOverhead+shmRefLen)
	binary.BigEndian.PutUint16(ok[12:], shmRefType)
	binary.LittleEndian.PutUint64(ok[wire.FrameOverhead:], 100)
	binary.LittleEndian.PutUint32(ok[wire.FrameOverhead+8:], 5000)
	f.Add(ok, 60)
	f.Add(ok[:30], 14)
	f.Add([]byte{}, 0)
	view := make([]byte, 64<<10)
	const mtu = 9000
	p := &shmPort{mtu: mtu, frames: ownedFrames{size: shmSlotFrame(mtu), max: 4}}
	peer := &shmPeer{}
	peer.mem.theirs.Store(&peerMapping{all: view, view: view})
	f.Fuzz(func(t *testing.T, v []byte, n int) {
		n = max(0, n%(2*mtu))
		head, rest, good := p.resolve(peer, v, n, p.frames.get())
		if !good {
			return
		}
		if len(head)+len(rest) > mtu {
			t.Fatalf("resolved %d+%d bytes, MTU %d", len(head), len(rest), mtu)
		}
		if len(rest) > 0 && !within(rest, view) {
			t.Fatal("a payload lent from outside the peer's memory")
		}
		if len(head) < wire.EthHeaderLen || binary.BigEndian.Uint16(head[12:]) != binary.BigEndian.Uint16(v[len(v)-shmRefLen+12:]) {
			t.Fatalf("head %x does not carry the EtherType the reference kept", head)
		}
	})
}

// A peer that restarts leaves nothing of its old self mapped here: each
// departed generation's link memory (and its rings) is unmapped once its
// frames are read, not when our port closes, so a long-lived process
// whose peer restarts keeps no dead process's 64 MiB memfd alive.
func TestShmDepartedPeerMemoryUnmapped(t *testing.T) {
	dir := t.TempDir()
	a, err := ListenShm(dir, 1, 9000)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	pa := a.(*shmPort)
	var names []string
	for gen := 0; gen < 5; gen++ {
		b, err := ListenShm(dir, 2, 9000)
		if err != nil {
			t.Fatal(err)
		}
		name := memName(fmt.Sprintf("gen%d", gen))
		names = append(names, name)
		fd, mem := sharedMemfd(t, name, 4<<20)
		if err := b.(MemorySharer).ShareMemory(fd, 0, mem); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(5 * time.Second); ; {
			if q := (*pa.peers.Load())[2]; q != nil && q.mem.theirs.Load() != nil {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("generation %d: node 1 did not map node 2's memory", gen)
			}
			time.Sleep(time.Millisecond)
		}
		if n := mappingsOf(t, name); n != 2 { // the test's and node 1's
			t.Fatalf("generation %d: %d mappings of its memory, want 2", gen, n)
		}
		b.Close()
		// Node 1 sees it go, reads its ring to the end and lets it go.
		for end := time.Now().Add(5 * time.Second); mappingsOf(t, name) != 1; {
			if f := a.Recv(); f != nil {
				a.Release(f)
			}
			if time.Now().After(end) {
				t.Fatalf("generation %d: node 1 still maps the departed node's memory", gen)
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, n := range names {
		if got := mappingsOf(t, n); got != 1 { // the test's own, until cleanup
			t.Errorf("%s: %d mappings, want 1", n, got)
		}
	}
	// The departed nodes' rings went with them (node 1's own are named
	// dimmnet-ring-1).
	if got := mappingsOf(t, "dimmnet-ring-2 "); got != 0 {
		t.Errorf("%d of node 2's rings still mapped", got)
	}
	pa.mu.Lock()
	dead := len(pa.dead)
	pa.mu.Unlock()
	if dead != 0 {
		t.Errorf("%d departed peers still held", dead)
	}
}
