package link

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"github.com/dimmnet/dimmnet/internal/rundir"
	"github.com/dimmnet/dimmnet/vdev/link/shmring"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// ErrNodeInUse is returned by ListenShm when another process holds the
// node id in the rendezvous directory.
var ErrNodeInUse = errors.New("link: node id held by another process")

// ErrPeerDown is returned by a port's Send when the station is known to be
// gone (its process exited or its ring broke): the device fails the
// commands for it at once, as UNREACHABLE.
var ErrPeerDown = errors.New("link: peer down")

const (
	shmHelloMagic = 0x48534e44 // "DNSH"
	// shmHelloVersion is the link's protocol version, which both ends of
	// a connection must speak: 2 since PUSHB frames (type 11), which a
	// device of a build before them drops as malformed, resend after
	// resend.
	shmHelloVersion = 2
	shmHelloLen     = 16
	shmRetryDial    = 100 * time.Millisecond // a node that could not be dialled is not tried again sooner
	shmRingBytes    = 1 << 20                // ring memory per peer and direction, in slots of a frame each
)

// shmPeer is one process we exchange frames with.
type shmPeer struct {
	node   uint16
	pid    int
	dialer uint16 // who dialled the connection: the higher id's dial wins a race
	mac    [6]byte
	pair   shmring.Pair
	wake   int // the peer's eventfd, signalled when it sleeps
	conn   *net.UnixConn
	gone   atomic.Bool // superseded or down: its connection closing says nothing
	exited atomic.Bool // its process is gone: drop it once its ring is read
	// unwatched: no goroutine reads its connection (its watchConn ended,
	// or it never had one), so none maps its memory any more.
	unwatched atomic.Bool
	mem       shmPeerMem // the link memories we share (shmshare.go)
}

// shmPort is the shared-memory medium's port: one frame ring to and from
// every other process of the rendezvous directory (see package shmring).
type shmPort struct {
	dir    string
	node   uint16
	mac    net.HardwareAddr
	mtu    int
	slots  int
	frames ownedFrames // only the device's passes use them, one at a time

	lockFD int
	ln     *net.UnixListener
	wake   *eventfd.FD // peers signal it while we are parked

	mu       sync.Mutex                          // writers of peers; failed dials
	peers    atomic.Pointer[map[uint16]*shmPeer] // copy on write: Send and Recv read without a lock
	list     atomic.Pointer[[]*shmPeer]          // the same, for Recv's round robin
	last     atomic.Pointer[shmPeer]             // the peer Send found last, while not gone
	failed   map[uint16]dialFailure              // last failed dial per node
	dead     []*shmPeer                          // off the lists, released by reap (or Close)
	nDead    atomic.Int32                        // len(dead): a receive with none to reap takes no lock
	rxOnly   []*shmPeer                          // connections that lost a dialling race: read, not written
	notify   atomic.Pointer[func()]              // wakes a sleeping engine
	downFn   atomic.Pointer[func(mac [6]byte)]   // tells the device a peer is gone
	parked   atomic.Bool
	rr       int      // the peer Recv looks at first
	viewing  *shmPeer // the peer whose slot RecvInPlace lent out, until Done
	reserved *shmPeer // the peer whose slot Reserve lent, until Commit
	resN     int      // the frame's length there
	closed   atomic.Bool
	wg       sync.WaitGroup
	dropped  atomic.Uint64 // frames refused by the ring checks (corrupt indexes or lengths)
	txErrors atomic.Uint64
	share    atomic.Pointer[sharedMem] // the memory frames may refer to (shmshare.go)
}

// ListenShm claims node id node in the rendezvous directory dir (created
// with the user's permissions only) and returns its port on the
// shared-memory medium: frames of up to mtu bytes to every other process
// that claimed a node there. A second process claiming a node id in use is
// refused with ErrNodeInUse, naming the holder's pid.
func ListenShm(dir string, node uint16, mtu int) (Port, error) {
	if mtu < wire.EthHeaderLen || mtu > 1<<24 {
		return nil, fmt.Errorf("link: shm %s node %d: mtu %d outside [%d, 16 MiB]", dir, node, mtu, wire.EthHeaderLen)
	}
	if err := privateDir(dir); err != nil {
		return nil, fmt.Errorf("link: shm: %w", err)
	}
	p := &shmPort{dir: dir, node: node, mac: wire.NodeMAC(node), mtu: mtu, lockFD: -1, failed: map[uint16]dialFailure{}}
	p.slots = 2
	for p.slots < 1024 && p.slots*mtu < shmRingBytes {
		p.slots *= 2
	}
	p.slots = max(p.slots, 16) // a window of frames, however large
	p.frames = ownedFrames{size: shmSlotFrame(mtu), max: maxFree}
	empty := map[uint16]*shmPeer{}
	p.peers.Store(&empty)
	p.list.Store(&[]*shmPeer{})
	fail := func(err error) (Port, error) {
		p.Close()
		return nil, fmt.Errorf("link: shm %s node %d: %w", dir, node, err)
	}
	if err := p.claim(); err != nil {
		return fail(err)
	}
	sock := p.sockPath(node)
	os.Remove(sock) // ours: we hold the node's lock, so a socket left here is a dead holder's
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fail(err)
	}
	ln.SetUnlinkOnClose(true)
	p.ln = ln
	if err := os.Chmod(sock, 0o600); err != nil {
		return fail(err)
	}
	if p.wake, err = eventfd.New(); err != nil {
		return fail(err)
	}
	p.wg.Add(2)
	go p.accept()
	go p.watchWake()
	// Meet every process already there; later ones dial us.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if n, ok := shmSockNode(e.Name()); ok && n != node {
			p.dial(n)
		}
	}
	return p, nil
}

// shmTrace logs the medium's connection events (meetings, races,
// departures) to stderr: DIMMNET_SHM_TRACE=1.
var shmTrace = os.Getenv("DIMMNET_SHM_TRACE") == "1"

func (p *shmPort) logf(format string, args ...any) {
	if shmTrace {
		fmt.Fprintf(os.Stderr, "dimmnet shm node %d (pid %d): %s\n", p.node, os.Getpid(), fmt.Sprintf(format, args...))
	}
}

// shmSlotFrame is the frame capacity of a ring slot for frames of mtu bytes.
func shmSlotFrame(mtu int) int { return (mtu+8+63)&^63 - 8 }

// privateDir makes dir (mode 0700) or checks that the existing one is a
// directory of ours that nobody else may write, under ancestors nobody
// else may rename it in: the rendezvous socket and lock files are trusted
// by name, as a daemon's are (package rundir, whose rules these are).
func privateDir(dir string) error { return rundir.Ensure(dir, 0) }

func (p *shmPort) sockPath(n uint16) string {
	return filepath.Join(p.dir, fmt.Sprintf("node%d.sock", n))
}

// shmSockNode parses a rendezvous socket's file name.
func shmSockNode(name string) (uint16, bool) {
	s, ok := strings.CutPrefix(name, "node")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ".sock")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 16)
	return uint16(n), err == nil
}

// claim takes the node's lock file, or names the process holding it.
func (p *shmPort) claim() error {
	path := filepath.Join(p.dir, fmt.Sprintf("node%d.lock", p.node))
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		var b [32]byte
		n, _ := unix.Pread(fd, b[:], 0)
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("node %d is held by pid %s: %w", p.node, strings.TrimSpace(string(b[:max(n, 0)])), ErrNodeInUse)
		}
		return fmt.Errorf("lock %s: %w", path, err)
	}
	unix.Ftruncate(fd, 0)
	unix.Pwrite(fd, []byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	p.lockFD = fd
	return nil
}

// accept answers the processes that dial us.
func (p *shmPort) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.AcceptUnix()
		if err != nil {
			return // closed
		}
		go func() {
			if err := p.handshake(c, false); err != nil {
				p.logf("answering a connection: %v", err)
				c.Close()
			}
		}()
	}
}

// dialFailure is a dial that failed: when, and the node's socket then
// (its inode, 0 for none).
type dialFailure struct {
	at   time.Time
	sock uint64
}

// sockIno is the inode of node n's socket, 0 if there is none: a process
// that claims the node binds a new one.
func (p *shmPort) sockIno(n uint16) uint64 {
	var st unix.Stat_t
	if unix.Stat(p.sockPath(n), &st) != nil {
		return 0
	}
	return st.Ino
}

// dial meets node n, if a process holds it and it was not tried just now
// with the same socket there. A node that came back within shmRetryDial
// (a peer restarted, a libfabric endpoint closed and opened again) is met
// at once: its new process dials us as it starts, but our side of that
// meeting runs on the accept goroutine, and a frame sent before that
// goroutine ran failed as if the node were still gone (seen under load in
// driver/ofi's faults test, once in about a hundred runs).
func (p *shmPort) dial(n uint16) {
	p.mu.Lock()
	f, tried := p.failed[n]
	p.mu.Unlock()
	if tried && time.Since(f.at) < shmRetryDial && p.sockIno(n) == f.sock {
		return
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: p.sockPath(n), Net: "unix"})
	if err == nil {
		if err = p.handshake(c, true); err != nil {
			c.Close()
		}
	}
	if err != nil {
		p.logf("dial node %d: %v", n, err)
		ino := p.sockIno(n)
		p.mu.Lock()
		p.failed[n] = dialFailure{time.Now(), ino}
		p.mu.Unlock()
	}
}

// handshake trades hellos (node, pid, mtu, the segment we made for the
// peer and our wake eventfd) over c and adds the peer. The dialer speaks
// first.
func (p *shmPort) handshake(c *net.UnixConn, dialer bool) error {
	c.SetDeadline(time.Now().Add(5 * time.Second)) // a peer that never answers holds nothing
	var seg *shmring.Segment
	send := func() error {
		var err error
		if seg, err = shmring.Create(fmt.Sprintf("dimmnet-ring-%d", p.node), p.slots, p.mtu); err != nil {
			return err
		}
		var b [shmHelloLen]byte
		binary.LittleEndian.PutUint32(b[0:], shmHelloMagic)
		binary.LittleEndian.PutUint16(b[4:], shmHelloVersion)
		binary.LittleEndian.PutUint16(b[6:], p.node)
		binary.LittleEndian.PutUint32(b[8:], uint32(os.Getpid()))
		binary.LittleEndian.PutUint32(b[12:], uint32(p.mtu))
		_, _, err = c.WriteMsgUnix(b[:], unix.UnixRights(seg.FD(), p.wake.Int()), nil)
		return err
	}
	var peer *shmPeer
	recv := func() error {
		var b [shmHelloLen]byte
		oob := make([]byte, unix.CmsgSpace(2*4))
		n, oobn, _, _, err := c.ReadMsgUnix(b[:], oob)
		if err != nil {
			return err
		}
		fds, err := shmRights(oob[:oobn])
		if err != nil {
			return err
		}
		defer func() {
			for _, fd := range fds {
				if peer == nil || fd != peer.wake {
					unix.Close(fd)
				}
			}
		}()
		if err := checkHello(b[:n], len(fds)); err != nil {
			return err
		}
		node := binary.LittleEndian.Uint16(b[6:])
		if mtu := int(binary.LittleEndian.Uint32(b[12:])); mtu != p.mtu || node == p.node {
			return fmt.Errorf("hello from node %d with mtu %d (ours %d)", node, mtu, p.mtu)
		}
		r, err := shmring.Map(fds[0])
		if err != nil {
			return err
		}
		if r.MaxFrame() > p.frames.size {
			r.Close()
			return fmt.Errorf("node %d's slots hold %d bytes, our buffers %d", node, r.MaxFrame(), p.frames.size)
		}
		peer = &shmPeer{node: node, pid: int(binary.LittleEndian.Uint32(b[8:])), wake: fds[1], conn: c}
		peer.pair.Theirs = r
		copy(peer.mac[:], wire.NodeMAC(node))
		return nil
	}
	var err error
	if dialer {
		if err = send(); err == nil {
			err = recv()
		}
	} else if err = recv(); err == nil {
		err = send()
	} else if errors.Is(err, ErrShmVersion) {
		send() // ours, so that the dialer names the mismatch too
	}
	if err != nil {
		if seg != nil {
			seg.Close()
		}
		if peer != nil {
			peer.pair.Theirs.Close()
			unix.Close(peer.wake)
		}
		return err
	}
	c.SetDeadline(time.Time{})
	peer.pair.Mine = seg
	peer.dialer = peer.node
	if dialer {
		peer.dialer = p.node
	}
	if !p.add(peer) {
		p.retire(peer)
		return ErrClosed
	}
	return nil
}

// ErrShmVersion: the other end of a shared-memory link speaks another
// version of its protocol (another build): the connection is refused,
// and the two never meet, rather than meet and drop each other's frames.
var ErrShmVersion = errors.New("link: shm peer speaks another protocol version")

// checkHello checks a peer's hello message and the descriptors it came
// with.
func checkHello(b []byte, fds int) error {
	if len(b) != shmHelloLen || binary.LittleEndian.Uint32(b[0:]) != shmHelloMagic || fds != 2 {
		return fmt.Errorf("bad hello (%d bytes, %d fds)", len(b), fds)
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != shmHelloVersion {
		return fmt.Errorf("hello of version %d, ours %d (both ends must run builds of one protocol): %w", v, shmHelloVersion, ErrShmVersion)
	}
	return nil
}

// shmRights parses the descriptors of a hello.
func shmRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		f, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, f...)
		}
	}
	return fds, nil
}

// add installs peer and reports whether it did. A second connection with
// the same process (both dialled at once) keeps the one the higher node id
// dialled, on both sides; the other stays open, unused, until Close, so
// its end says nothing to the side still deciding. A connection from a
// new process holding the node replaces the old one, which is reported
// down.
func (p *shmPort) add(peer *shmPeer) bool {
	p.mu.Lock()
	if p.closed.Load() {
		p.mu.Unlock()
		return false
	}
	old := (*p.peers.Load())[peer.node]
	if old != nil && old.pid == peer.pid && old.dialer >= peer.dialer {
		// The loser: nothing more is sent on it, but what the peer sent
		// before it decided is still read.
		peer.gone.Store(true)
		p.rxOnly = append(p.rxOnly, peer)
		p.install(func(map[uint16]*shmPeer) {})
		peer.unwatched.Store(true) // it gets no watchConn
		wake := p.flagNew(peer)    // under p.mu: Close unmaps it only after taking the lock
		p.mu.Unlock()
		p.logf("node %d (pid %d) dialled by %d lost the race to one dialled by %d", peer.node, peer.pid, peer.dialer, old.dialer)
		if wake {
			p.wakeEngine()
		}
		return true
	}
	if old != nil {
		old.gone.Store(true)
		if old.pid == peer.pid {
			p.rxOnly = append(p.rxOnly, old)
		} else {
			p.bury(old)
			for _, q := range p.rxOnly {
				if q.node == old.node {
					p.bury(q)
				}
			}
			p.rxOnly = slices.DeleteFunc(p.rxOnly, func(q *shmPeer) bool { return q.node == old.node })
		}
	}
	p.install(func(m map[uint16]*shmPeer) { m[peer.node] = peer })
	delete(p.failed, peer.node)
	// After it is listed (a Park from now on reaches it) and under p.mu
	// (Close unmaps it only after taking the lock).
	wake := p.flagNew(peer)
	p.wg.Add(1)
	p.mu.Unlock()
	p.logf("met node %d (pid %d, dialled by %d; replaces one: %v)", peer.node, peer.pid, peer.dialer, old != nil)
	if wake {
		p.wakeEngine()
	}
	p.offer(peer)
	go p.watchConn(peer)
	if old != nil && old.pid != peer.pid {
		old.conn.Close()
		p.reportDown(old)
	}
	return true
}

// flagNew sets the sleep word of a peer's new ring as the port's (p.mu
// held, the peer listed) and reports whether a parked port must wake its
// engine for a frame already there. The peer may have finished its side
// of the meeting first and published into the ring while the word still
// read 0, so it did not signal; the engine's last look before it parked
// did not know the ring. So, as the engine does before it sleeps: store
// the word, fence for a lazy producer, look once more.
func (p *shmPort) flagNew(peer *shmPeer) bool {
	parked := p.parked.Load()
	peer.pair.Mine.SetSleeping(parked)
	if !parked {
		return false
	}
	if peer.pair.Theirs.Lazy() && !p.fence() {
		return true // the engine must not sleep on an unfenced look
	}
	return peer.pair.Pending()
}

// wakeEngine calls the engine's wake-up, if one is installed.
func (p *shmPort) wakeEngine() {
	if fn := p.notify.Load(); fn != nil {
		(*fn)()
	}
}

// install changes the peer map (p.mu held) by copying it.
func (p *shmPort) install(change func(map[uint16]*shmPeer)) {
	m := map[uint16]*shmPeer{}
	for k, v := range *p.peers.Load() {
		m[k] = v
	}
	change(m)
	list := make([]*shmPeer, 0, len(m)+len(p.rxOnly))
	for _, v := range m {
		list = append(list, v)
	}
	list = append(list, p.rxOnly...) // received from, never sent to
	p.peers.Store(&m)
	p.list.Store(&list)
}

// retire drops a peer that was not installed.
func (p *shmPort) retire(peer *shmPeer) {
	peer.gone.Store(true)
	peer.release()
}

// release closes what the peer's meeting gave us: the connection, both
// segments and the peer's eventfd. Only once nobody reads or writes them.
func (peer *shmPeer) release() {
	peer.conn.Close()
	peer.pair.Mine.Close()
	peer.pair.Theirs.Close()
	peer.mem.close()
	unix.Close(peer.wake)
}

// watchConn reads the peer's messages (shmshare.go) until its connection
// ends: its process exited (the kernel closes its end) or it closed the
// port.
func (p *shmPort) watchConn(peer *shmPeer) {
	defer p.wg.Done()
	p.readConn(peer)
	p.down(peer)
	peer.unwatched.Store(true)
}

// down takes peer off the medium (once) and tells the device. What it
// wrote before it went is still read (an ACK it sent as it exited must
// complete our command rather than fail it): its ring, and those of the
// connections that lost a dialling race with it, stay on the receive list
// until Recv finds them empty.
func (p *shmPort) down(peer *shmPeer) {
	p.mu.Lock()
	if peer.gone.Swap(true) {
		p.mu.Unlock()
		return
	}
	peer.exited.Store(true)
	if (*p.peers.Load())[peer.node] == peer {
		for _, q := range p.rxOnly {
			if q.node == peer.node {
				q.exited.Store(true)
			}
		}
		p.rxOnly = append(p.rxOnly, peer)
		p.install(func(m map[uint16]*shmPeer) { delete(m, peer.node) })
	} else if !slices.Contains(p.rxOnly, peer) {
		p.bury(peer)
	}
	p.mu.Unlock()
	peer.conn.Close()
	if !p.closed.Load() {
		p.reportDown(peer)
	}
}

// prune drops an exited peer whose ring Recv found empty.
func (p *shmPort) prune(peer *shmPeer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i := slices.Index(p.rxOnly, peer); i >= 0 {
		p.rxOnly = slices.Delete(p.rxOnly, i, i+1)
		p.bury(peer)
		p.install(func(map[uint16]*shmPeer) {})
	}
}

// bury puts a peer taken off the lists (p.mu held) where reap releases it.
func (p *shmPort) bury(peer *shmPeer) {
	p.dead = append(p.dead, peer)
	p.nDead.Store(int32(len(p.dead)))
}

// reap releases the peers taken off the lists whose connection no
// goroutine reads any more: their rings and our mapping of their memory
// (a departed process's memfd stays alive while we map it), their
// connection and eventfd. RecvInPlace calls it after Done, on the
// receiving goroutine: the device calls Send, Recv, RecvInPlace and
// Pending one at a time (a pass of its engines), so none of them holds
// such a peer now (a peer off the lists is found by none of them, and
// the slot or memory the last RecvInPlace lent out was given back by
// Done), and a frame held longer is a copy.
func (p *shmPort) reap() {
	if p.nDead.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dead = slices.DeleteFunc(p.dead, func(q *shmPeer) bool {
		if !q.unwatched.Load() {
			return false // its watchConn ends soon: its connection is closed
		}
		p.logf("released node %d (pid %d, dialled by %d)", q.node, q.pid, q.dialer)
		q.release()
		return true
	})
	p.nDead.Store(int32(len(p.dead)))
}

func (p *shmPort) reportDown(peer *shmPeer) {
	p.logf("node %d (pid %d, dialled by %d) is gone", peer.node, peer.pid, peer.dialer)
	if fn := p.downFn.Load(); fn != nil {
		(*fn)(peer.mac)
	}
	p.wakeEngine() // the engine acts on it
}

// watchWake turns a peer's signal into the engine's wake-up.
func (p *shmPort) watchWake() {
	defer p.wg.Done()
	for {
		if _, err := p.wake.Wait(0); err != nil {
			return
		}
		p.wakeEngine()
	}
}

func (p *shmPort) MTU() int              { return p.mtu }
func (p *shmPort) MAC() net.HardwareAddr { return p.mac }
func (p *shmPort) Buffer() []byte        { return p.frames.get() }
func (p *shmPort) Release(f []byte)      { p.frames.put(f) }

// SetNotify installs the engine's wake-up.
func (p *shmPort) SetNotify(f func()) {
	if f == nil {
		p.notify.Store(nil)
		return
	}
	p.notify.Store(&f)
}

// SetPeerDown installs the device's notice of a peer gone.
func (p *shmPort) SetPeerDown(fn func(mac [6]byte)) {
	if fn == nil {
		p.downFn.Store(nil)
		return
	}
	p.downFn.Store(&fn)
}

// CrossProcess is true: the peers are other processes of this host.
func (p *shmPort) CrossProcess() bool { return true }

// Lossless is true: a full ring refuses a frame (ErrFull), it never drops
// one, so the retransmission timer only waits for a stopped peer.
func (p *shmPort) Lossless() bool { return true }

// Dropped counts frames refused by the ring checks.
func (p *shmPort) Dropped() uint64 { return p.dropped.Load() }

// TxErrors counts frames that could not be put in a peer's ring for a
// reason other than a full ring.
func (p *shmPort) TxErrors() uint64 { return p.txErrors.Load() }

// peer finds the station mac, meeting it first if a process holds it.
func (p *shmPort) peer(mac []byte) (*shmPeer, error) {
	node, ok := wire.MACNode(net.HardwareAddr(mac))
	if !ok {
		return nil, ErrNoRoute
	}
	if c := p.last.Load(); c != nil && c.node == node && !c.gone.Load() {
		return c, nil // a ping-pong sends to one peer: skip the map
	}
	if peer := (*p.peers.Load())[node]; peer != nil {
		p.last.Store(peer)
		return peer, nil
	}
	p.dial(node)
	if peer := (*p.peers.Load())[node]; peer != nil {
		return peer, nil
	}
	return nil, ErrPeerDown
}

// Send puts frame in its destination's ring (every peer's for broadcast).
func (p *shmPort) Send(f []byte) error { return p.SendVec(f, nil) }

// SendVec puts head and payload in the destination's ring as one frame:
// the payload is copied once, straight into the slot, or not at all when
// it lies in the memory the port shares (ShareMemory) and the peer mapped
// it: the frame then refers to it (shmshare.go).
func (p *shmPort) SendVec(head, payload []byte) error {
	if len(head) < wire.EthHeaderLen {
		return errors.New("link: runt frame")
	}
	if p.closed.Load() {
		return ErrClosed
	}
	if [6]byte(head[:6]) == broadcastMAC {
		for _, peer := range *p.list.Load() {
			p.put(peer, head, payload)
		}
		p.Release(head)
		return nil
	}
	peer, err := p.peer(head[:6])
	if err != nil {
		return err
	}
	if byReference(peer, len(payload)) {
		if done, err := p.putRef(peer, head, payload); done {
			if err == nil {
				p.Release(head)
			}
			return err
		}
	}
	if err := p.put(peer, head, payload); err != nil {
		return err
	}
	p.Release(head)
	return nil
}

// broadcastMAC is the destination every peer's ring gets a copy for.
var broadcastMAC = [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// byReference reports whether SendVec sends a payload of n bytes to peer
// by reference (shmshare.go) rather than copied into the slot.
func byReference(peer *shmPeer, n int) bool {
	return n >= ShmRefMin && peer.mem.refer.Load() // a small frame pays one comparison
}

// Reserve lends the next slot of the ring to dst's node for a frame of n
// bytes (SlotWriter); nil for a broadcast or a frame whose payload
// SendVec would send by reference.
func (p *shmPort) Reserve(dst [6]byte, n int) ([]byte, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	if dst == broadcastMAC {
		return nil, nil
	}
	peer, err := p.peer(dst[:])
	if err != nil {
		return nil, err
	}
	if byReference(peer, n-wire.FrameOverhead) {
		return nil, nil
	}
	b, err := peer.pair.Reserve(n)
	if err != nil {
		return nil, p.putErr(peer, err)
	}
	p.reserved, p.resN = peer, n
	return b, nil
}

// errNoReserve: Commit without a Reserve that lent a slot.
var errNoReserve = errors.New("link: commit without a reserved slot")

// Commit publishes the frame written into the slot Reserve lent.
func (p *shmPort) Commit() error {
	peer := p.reserved
	if peer == nil {
		return errNoReserve
	}
	p.reserved = nil
	if peer.pair.Commit(p.resN) {
		eventfd.Signal(peer.wake)
	}
	return nil
}

func (p *shmPort) put(peer *shmPeer, head, payload []byte) error {
	wake, err := peer.pair.Put(head, payload)
	if err != nil {
		return p.putErr(peer, err)
	}
	if wake {
		eventfd.Signal(peer.wake)
	}
	return nil
}

// putErr is what a ring's refusal of a frame to peer means for the sender.
func (p *shmPort) putErr(peer *shmPeer, err error) error {
	switch {
	case err == shmring.ErrFull, errors.Is(err, shmring.ErrFull):
		return ErrFull
	case errors.Is(err, shmring.ErrCorrupt):
		p.logf("ring to node %d: %v", peer.node, err)
		p.txErrors.Add(1)
		p.down(peer)
		return ErrPeerDown
	default:
		p.txErrors.Add(1)
		return err
	}
}

// Pending reports whether a frame waits in any peer's ring.
func (p *shmPort) Pending() bool {
	for _, peer := range *p.list.Load() {
		if peer.pair.Pending() {
			return true
		}
	}
	return false
}

// Recv takes the next frame, visiting the peers' rings in turn.
func (p *shmPort) Recv() []byte {
	f, rest := p.RecvInPlace(p.frames.size)
	if len(rest) > 0 { // longer than our buffers: the handshake refuses such rings
		p.Done()
		p.Release(f)
		p.dropped.Add(1)
		return nil
	}
	p.Done()
	return f
}

// RecvInPlace takes the next frame, visiting the peers' rings in turn: its
// first n bytes copied, the rest left in the peer's slot until Done (or,
// for a frame that refers to its payload, in our mapping of the peer's
// memory, where it stays readable; a head longer than n is then copied
// whole, payload and all).
func (p *shmPort) RecvInPlace(n int) (head, rest []byte) {
	p.Done() // a caller that forgot: the slot is not lent twice
	p.reap()
	list := *p.list.Load()
	for i := range list {
		peer := list[(p.rr+i)%len(list)]
		v, err := peer.pair.Peek()
		if err != nil {
			p.logf("ring from node %d: %v", peer.node, err)
			p.dropped.Add(1)
			p.down(peer)
			// A broken ring from a connection that lost a dialling race
			// says the same of its process: take the one we send on down too.
			if w := (*p.peers.Load())[peer.node]; w != nil && w != peer && w.pid == peer.pid {
				p.down(w)
			}
			p.prune(peer) // nothing more can be read from a broken ring
			continue
		}
		if v == nil {
			if peer.exited.Load() && !peer.pair.Pending() {
				p.prune(peer) // read to the end
			}
			continue
		}
		k := min(n, len(v))
		head = append(p.frames.get(), v[:k]...)
		if isRef(head) { // a referring frame (shmshare.go): its slot holds no payload
			var ok bool
			head, rest, ok = p.resolve(peer, v, n, head)
			peer.pair.Done()
			if !ok {
				p.Release(head)
				p.dropped.Add(1)
				p.logf("node %d sent a reference outside its memory", peer.node)
				continue
			}
			p.rr = (p.rr + i + 1) % len(list)
			return head, rest
		}
		p.viewing = peer
		p.rr = (p.rr + i + 1) % len(list)
		return head, v[k:]
	}
	return nil, nil
}

// Done frees the slot RecvInPlace lent out.
func (p *shmPort) Done() {
	if p.viewing != nil {
		p.viewing.pair.Done()
		p.viewing = nil
	}
}

// Park says whether the engine sleeps: peers signal our eventfd only then.
// The engine and a driver's thread (Device.Drive) may call it at once:
// under p.mu, so that the flags the peers read end as the last call left
// parked, never parked with a peer left unflagged (it would not signal a
// sleeping engine). A fence that fails (Map refuses lazy rings where it
// cannot run, so only a filter installed since) wakes the engine at once:
// its last look would not be ordered after the flags, and a frame a lazy
// peer published then would wait for the retransmission.
func (p *shmPort) Park(sleeping bool) {
	if p.parked.Load() == sleeping {
		return
	}
	p.mu.Lock()
	if p.parked.Swap(sleeping) == sleeping {
		p.mu.Unlock()
		return
	}
	lazy := false
	for _, peer := range *p.list.Load() {
		peer.pair.Mine.SetSleeping(sleeping)
		lazy = lazy || peer.pair.Theirs.Lazy()
	}
	fenced := !sleeping || !lazy || p.fence() // before the caller's last look
	p.mu.Unlock()
	if !fenced {
		p.wakeEngine() // it keeps looking instead of sleeping
	}
}

// shmFence is shmring.Fence; a test makes it fail.
var shmFence = shmring.Fence

// fence orders our sleep words before the caller's next look at rings
// whose producers publish lazily (shmring.Fence), and reports whether it
// did.
func (p *shmPort) fence() bool {
	if err := shmFence(); err != nil {
		p.logf("%v", err)
		return false
	}
	return true
}

// Close leaves the medium: peers see our connections end and report us down.
func (p *shmPort) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	if p.ln != nil {
		p.ln.Close()
	}
	p.mu.Lock()
	list := *p.list.Load()
	p.rxOnly = nil
	p.install(func(m map[uint16]*shmPeer) { clear(m) })
	p.mu.Unlock()
	for _, peer := range list {
		peer.gone.Store(true)
		peer.conn.Close()
	}
	if p.wake != nil {
		p.wake.Close()
	}
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, peer := range append(list, p.dead...) {
		peer.release()
	}
	p.dead = nil
	p.nDead.Store(0)
	if m := p.share.Load(); m != nil {
		unix.Close(m.fd)
	}
	if p.lockFD >= 0 {
		unix.Close(p.lockFD) // releases the claim; the file stays, so a waiting claimer never locks an unlinked one
	}
	return nil
}
