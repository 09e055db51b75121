package link

// A Port's optional abilities. Every medium carries frames (Port); what
// else it can do is one of the named interfaces below, each implemented by
// the media that have the ability and checked at compile time beside them
// (the `var _` lines at the end of this file for this package's media), so
// a renamed method cannot silently turn an ability off. The device reads
// each ability once, when a port is attached (vdev.Device.AttachPort), and
// never asserts an anonymous interface on its port. A wrapper (faults,
// capture, authentication) has every method its inner port might have and
// answers for it: for a yes-or-no ability that is the method's result
// (Lossless, NeedsCRC, CrossProcess, Vouches), not its presence.

// VectorSender is a Port that sends a frame given as its head (built in a
// port Buffer) and a payload left where it lies, gathered by the kernel in
// the same system call, so a large payload is copied once instead of twice.
// SendVec takes ownership of head unless it returns an error, as Send does.
// It reads payload during the call, or, on a port that is also a
// Backlogger, until the frame has left, or, on a MemorySharer, for a
// payload in the shared memory, until the receiver has taken the frame
// (before it acknowledges the packet): the device gathers a command's
// first send of a packet, from a buffer the driver keeps stable until the
// command completes, which takes that packet's ACK (resends are copied),
// and a PULL response only on a port that reads it during the call and
// checksums nothing (the memory it reads may change under it).
type VectorSender interface {
	SendVec(head, payload []byte) error
}

// SlotWriter is a Port whose frames can be built where the receiver will
// read them (the shared-memory link's ring slot): the device writes a small
// frame's headers and payload into the slot Reserve lends and publishes it
// with Commit, instead of building it in a port Buffer that the port then
// copies into the slot and frees (about 20 ns of an 8-byte message's send,
// on the path of every reply). Reserve returns nil and no error when this
// frame must go by Send or SendVec instead (a broadcast, a payload the
// port sends by reference); its errors are SendVec's, and nothing is sent
// until Commit, which may still fail as SendVec would (the peer went).
// Wrappers (capture, authentication, faults) do not have it: each must see
// and may change every frame as a whole, so the device sends through them.
type SlotWriter interface {
	Reserve(dst [6]byte, n int) ([]byte, error)
	Commit() error
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

// MemorySharer is a Port whose peers can map the device's link memory
// (the shared-memory link): the device shares it when it attaches the
// port, and a frame whose payload lies there may cross as a reference the
// receiver copies the payload from, once, straight into its own link
// memory. fd is the sealed memfd the memory lies in, at offset off; it
// stays the caller's. An error (ErrNotSealed for a region that is a plain
// file) leaves the port carrying every payload, as before.
type MemorySharer interface {
	ShareMemory(fd int, off int64, mem []byte) error
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

// Screener is a Port that refuses frames for who sent them and counts it.
type Screener interface {
	Screened() ScreenCounts
}

// PeerWatcher is a Port that learns at once when a station on its medium
// goes away, so the device fails the commands for it without waiting for
// its retransmission timeouts. fn runs on the port's own goroutine.
type PeerWatcher interface {
	SetPeerDown(fn func(mac [6]byte))
}

// Parker is a Port whose peers wake its owner with a signal only while it
// says it sleeps: the engine calls Park(true) before it sleeps (then looks
// at Pending once more) and Park(false) when it polls again.
type Parker interface {
	Park(sleeping bool)
}

// FrameWaiter is a Port whose frames arrive through a kernel descriptor
// the caller's thread can block on: a driver that runs its device (run to
// completion) waits for the next frame inside the kernel, woken by the
// frame itself as a blocking recvfrom is, instead of spinning on
// non-blocking receives. On a loaded host a spinning thread has used its
// share of the core when the frame comes and waits for the scheduler to
// give it back (UDP 8-byte RTT/2 4-5x a blocking ping-pong's), while a
// thread the frame wakes runs at once.
type FrameWaiter interface {
	// WaitFrame blocks the calling thread until a frame (or an error
	// Recv consumes) waits at the descriptor, or timeoutNs passes; it
	// reports whether one waits. Frames the port already took from the
	// descriptor and has not handed out yet end it at once too.
	WaitFrame(timeoutNs int64) bool
	// WaitsFrames says whether WaitFrame blocks: a wrapper has the
	// method whatever it wraps, and says false over a port without it.
	WaitsFrames() bool
}

// FrameWaiterOf is p as a FrameWaiter that blocks, or nil: what a
// wrapper forwards.
func FrameWaiterOf(p Port) FrameWaiter {
	if w, ok := p.(FrameWaiter); ok && w.WaitsFrames() {
		return w
	}
	return nil
}

// Peeker is a Port that can tell whether a frame waits without taking it:
// the engine's last look before it sleeps. A port that cannot tell keeps
// the engine awake (it never sleeps past a frame it could not see).
type Peeker interface {
	Pending() bool
}

// LosslessMedium is a Port whose medium never loses a frame it accepted:
// it refuses one it cannot carry (ErrFull) instead, and delivers in the
// order sent (the in-memory hub, shared-memory rings, the switched
// fabric). A retransmission timer there only waits for a peer that
// stopped, so the device floors it high (transport.LosslessRTO).
type LosslessMedium interface {
	Lossless() bool
}

// ChecksumNeeder is a Port whose medium may corrupt a frame on the way (a
// real network, fault injection): NeedsCRC true makes the device send
// every frame with a checksum and refuse one without.
type ChecksumNeeder interface {
	NeedsCRC() bool
}

// CrossProcessMedium is a Port whose peers are devices in other processes
// of this host (the shared-memory link): a driver spinning on one of the
// host's cores then holds a core those processes need.
type CrossProcessMedium interface {
	CrossProcess() bool
}

// DropCounter is a Port that counts frames it received and had to drop
// (no buffer, a queue overrun), mirrored into LINK_RX_DROPPED.
type DropCounter interface {
	Dropped() uint64
}

// TxErrorCounter is a Port that counts frames it accepted and then failed
// to send (on its own goroutine), mirrored into LINK_TX_ERRORS.
type TxErrorCounter interface {
	TxErrors() uint64
}

// The abilities of this package's media. tapPort and afPacketPort are
// fdPorts and have what an fdPort has.
var (
	_ Peeker         = (*hubPort)(nil)
	_ LosslessMedium = (*hubPort)(nil)
	_ PeerSet        = (*hubPort)(nil)

	_ Peeker         = (*fdPort)(nil)
	_ ChecksumNeeder = (*fdPort)(nil)
	_ DropCounter    = (*fdPort)(nil)
	_ FrameWaiter    = (*fdPort)(nil)
	_ ChecksumNeeder = (*tapPort)(nil)
	_ ChecksumNeeder = (*afPacketPort)(nil)

	_ VectorSender   = (*udpPort)(nil)
	_ Backlogger     = (*udpPort)(nil)
	_ PeerSet        = (*udpPort)(nil)
	_ Screener       = (*udpPort)(nil)
	_ TxErrorCounter = (*udpPort)(nil)
	_ ChecksumNeeder = (*udpPort)(nil)

	_ VectorSender       = (*shmPort)(nil)
	_ SlotWriter         = (*shmPort)(nil)
	_ MemorySharer       = (*shmPort)(nil)
	_ InPlaceReceiver    = (*shmPort)(nil)
	_ Peeker             = (*shmPort)(nil)
	_ Parker             = (*shmPort)(nil)
	_ PeerWatcher        = (*shmPort)(nil)
	_ LosslessMedium     = (*shmPort)(nil)
	_ CrossProcessMedium = (*shmPort)(nil)
	_ DropCounter        = (*shmPort)(nil)
	_ TxErrorCounter     = (*shmPort)(nil)
)
