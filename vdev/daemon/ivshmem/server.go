// Package ivshmem speaks QEMU's ivshmem server protocol
// (docs/specs/ivshmem-spec.rst, contrib/ivshmem-server in QEMU), so that a
// real `-device ivshmem-doorbell,chardev=...,vectors=N` in QEMU 7.2, or a
// host process using package driver, attaches to a dimmnet device unchanged.
//
// The protocol is one-way: the server sends little-endian int64 messages,
// each with at most one fd (SCM_RIGHTS), and treats anything a client sends
// as a disconnect. A new client gets, in exactly this order: version 0; its
// own peer id; -1 with the shared memory fd; every other peer's id once per
// vector with that peer's eventfd; its own id once per vector with its own
// eventfds. Existing clients then get the new id with its eventfds; when a
// peer leaves, the others get its id with no fd. QEMU crashes on another
// order and spins at 100% CPU on EOF during set-up, so a client is never
// closed mid-set-up: a refused client gets a version other than 0.
//
// The device is peer 0: its eventfds are the device's doorbells, so a client
// ringing peer 0 (a guest storing 0<<16|vector into the Doorbell register)
// wakes the command engine. Clients get ids from 1.
package ivshmem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"golang.org/x/sys/unix"
)

// ProtocolVersion is the only version QEMU accepts.
const ProtocolVersion = 0

// MaxPeerID is the largest id QEMU accepts (IVSHMEM_MAX_PEERS).
const MaxPeerID = 65535

// DefaultSendTimeout is how long a client may leave one message unread
// before it is dropped: QEMU reads its socket from its main loop, so a
// live client takes its messages in microseconds.
const DefaultSendTimeout = 2 * time.Second

// DefaultMaxPerUser is how many clients one non-root user may have
// attached at once: a quarter of the default MaxClients, so one user's
// clients leave room for others'. A node's processes number
// uapi.ProcsPerNode (16) in the papers' model.
const DefaultMaxPerUser = 16

// maxQueued bounds the messages waiting for one client (16 bytes each;
// the fds they carry are shared, not copied): enough for the set-up of the
// largest server (64 vectors of 64 peers and the device), and a client
// that falls this far behind is dropped.
const maxQueued = 8192

// ErrInUse reports a socket another live server is listening on.
var ErrInUse = errors.New("socket is served by another process")

// ErrNotOurSocket reports a file at the socket path that is not a socket
// of this user's: it is left alone (someone else's, or not a socket at
// all), never removed to make room.
var ErrNotOurSocket = errors.New("path is taken by something other than a socket of ours")

// Config describes one device as the server offers it.
type Config struct {
	Path    string // UNIX socket path
	Vectors int    // eventfds per peer; must equal QEMU's vectors=N
	ShmFD   int    // the region's file; its size must be a power of two
	// Self are peer 0's eventfds (the device's doorbells), len == Vectors.
	Self []int
	// OnJoin and OnLeave tell the device about a client's eventfds (its
	// interrupt vectors). They run on the server's goroutines.
	OnJoin, OnLeave func(id int64, fds []int)
	// MaxClients bounds the attached clients of users other than root
	// (root's count towards it): every interrupt of the device signals
	// each client's eventfd. 0: 64.
	MaxClients int
	// MaxPerUser bounds one non-root user's attached clients (by the
	// peer's uid, SO_PEERCRED), so one user cannot take every slot and
	// lock the others out. Root is bound by neither limit: the
	// administrator can always attach to look. 0: DefaultMaxPerUser.
	MaxPerUser int
	// SendTimeout is how long a client may leave a message unread before
	// it is dropped. 0: DefaultSendTimeout.
	SendTimeout time.Duration
	Log         *slog.Logger
	// SocketMode is the socket's mode, set after bind whatever the umask:
	// connecting needs write permission, so it says who may attach.
	// 0: 0600, the daemon's user only.
	SocketMode os.FileMode
	// SocketGID > 0 gives the socket that group (with SocketMode 0660 the
	// group's users may attach); otherwise it keeps the daemon's group.
	SocketGID int
}

// Server serves one device. Every client has its own queue of messages
// and a goroutine that writes them, so a join or a leave only queues
// (never waits for a client to read), and a client that leaves a message
// unread for SendTimeout is dropped.
type Server struct {
	cfg     Config
	ln      *net.UnixListener
	mu      sync.Mutex
	clients map[int64]*client
	perUID  map[uint32]int
	refused map[*net.UnixConn]struct{}
	nextID  int64
	closed  bool
	wg      sync.WaitGroup // watchers and refused clients' drains
	writers sync.WaitGroup
	log     *slog.Logger
}

// msg is one protocol message, with the fd it carries or nil.
type msg struct {
	v  int64
	fd *sharedFD
}

// sharedFD is an fd queued messages may carry after its owner is gone (a
// peer's eventfd, queued for the others, when that peer leaves): it is
// closed only when its owner and every message carrying it are done with
// it, so its number cannot be reused under a queued message. The fds the
// server does not own (the region, the device's) have no owner and are
// never closed here.
type sharedFD struct {
	fd   int
	own  *eventfd.FD // nil: not the server's
	refs atomic.Int32
}

func ownedFD(e *eventfd.FD) *sharedFD {
	f := &sharedFD{fd: e.Int(), own: e}
	f.refs.Store(1) // the owner's
	return f
}

func (f *sharedFD) hold() {
	if f != nil && f.own != nil {
		f.refs.Add(1)
	}
}

func (f *sharedFD) release() {
	if f != nil && f.own != nil && f.refs.Add(-1) == 0 {
		f.own.Close()
	}
}

func (f *sharedFD) int() int {
	if f == nil {
		return -1
	}
	return f.fd
}

type client struct {
	id   int64
	uid  uint32
	conn *net.UnixConn
	fds  []*sharedFD // its vectors, owned

	mu       sync.Mutex
	q        []msg
	wake     chan struct{} // capacity 1: q grew, or the client is closing or gone
	closing  bool          // Shutdown: write what is queued, then stop
	gone     bool          // dropped: stop at once
	overflow bool          // dropped for falling maxQueued behind
}

func (c *client) ints() []int {
	r := make([]int, len(c.fds))
	for i, f := range c.fds {
		r[i] = f.fd
	}
	return r
}

// Listen binds the socket and gives it SocketMode (and SocketGID). A stale
// socket of ours (nobody accepting) is replaced; a live one is ErrInUse;
// anything else at the path (not a socket, another user's socket, a
// symlink) is ErrNotOurSocket and left alone.
func Listen(cfg Config) (*Server, error) {
	if cfg.Vectors < 1 || cfg.Vectors > 64 || len(cfg.Self) != cfg.Vectors {
		return nil, fmt.Errorf("ivshmem %s: %d vectors with %d device eventfds: need 1..64 and one each", cfg.Path, cfg.Vectors, len(cfg.Self))
	}
	var st unix.Stat_t
	if err := unix.Fstat(cfg.ShmFD, &st); err != nil {
		return nil, fmt.Errorf("ivshmem %s: stat shared memory: %w", cfg.Path, err)
	}
	if st.Size < 1<<20 || st.Size&(st.Size-1) != 0 {
		return nil, fmt.Errorf("ivshmem %s: shared memory of %d bytes: QEMU needs a power of two (and we need >= 1 MiB)", cfg.Path, st.Size)
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = 64
	}
	if cfg.MaxPerUser == 0 {
		cfg.MaxPerUser = DefaultMaxPerUser
	}
	if cfg.SendTimeout == 0 {
		cfg.SendTimeout = DefaultSendTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.SocketMode == 0 {
		cfg.SocketMode = 0o600
	}
	var lst unix.Stat_t
	if err := unix.Lstat(cfg.Path, &lst); err == nil {
		if lst.Mode&unix.S_IFMT != unix.S_IFSOCK || int(lst.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("ivshmem %s: %w (mode %o, uid %d)", cfg.Path, ErrNotOurSocket, lst.Mode, lst.Uid)
		}
		if c, err := net.Dial("unix", cfg.Path); err == nil {
			c.Close()
			return nil, fmt.Errorf("ivshmem %s: %w", cfg.Path, ErrInUse)
		}
		if err := os.Remove(cfg.Path); err != nil {
			return nil, fmt.Errorf("ivshmem %s: remove stale socket: %w", cfg.Path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: cfg.Path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("ivshmem: listen %s: %w", cfg.Path, err)
	}
	ln.SetUnlinkOnClose(true)
	// bind made it with the umask's mode; only our user can write the
	// directory, so nobody can swap it before these.
	if cfg.SocketGID > 0 {
		if err := os.Lchown(cfg.Path, -1, cfg.SocketGID); err != nil {
			ln.Close()
			return nil, fmt.Errorf("ivshmem %s: give the socket group %d: %w", cfg.Path, cfg.SocketGID, err)
		}
	}
	if err := os.Chmod(cfg.Path, cfg.SocketMode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("ivshmem %s: %w", cfg.Path, err)
	}
	return &Server{cfg: cfg, ln: ln, clients: map[int64]*client{}, perUID: map[uint32]int{},
		refused: map[*net.UnixConn]struct{}{}, nextID: 1, log: cfg.Log.With("socket", cfg.Path)}, nil
}

// Serve accepts clients until Shutdown.
func (s *Server) Serve() error {
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("ivshmem %s: accept: %w", s.cfg.Path, err)
		}
		s.admit(conn)
	}
}

// send writes one message: a little-endian int64 and at most one fd,
// within timeout.
func send(conn *net.UnixConn, v int64, fd int, timeout time.Duration) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	conn.SetWriteDeadline(time.Now().Add(timeout))
	n, oobn, err := conn.WriteMsgUnix(b[:], oob, nil)
	if err == nil && (n != 8 || oobn != len(oob)) {
		err = io.ErrShortWrite
	}
	return err
}

// allocID picks the next free id, increasing and wrapping like the
// reference server (freed ids are not reused at once).
func (s *Server) allocID() (int64, bool) {
	for i := 0; i < MaxPeerID; i++ {
		id := s.nextID
		s.nextID++
		if s.nextID > MaxPeerID {
			s.nextID = 1
		}
		if s.clients[id] == nil {
			return id, true
		}
	}
	return 0, false
}

// peerUID is the connecting process's uid, as the kernel recorded it at
// connect.
func peerUID(conn *net.UnixConn) (uint32, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, cerr
	}
	return cred.Uid, nil
}

// admit sets up a new client: it only queues messages (the new client's
// set-up, and its arrival to the others), so it never waits on a client.
func (s *Server) admit(conn *net.UnixConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, uerr := peerUID(conn)
	refuse := func(why string) {
		s.log.Warn("refusing client", "reason", why, "uid", uid)
		send(conn, -1, -1, s.cfg.SendTimeout) // a version QEMU rejects cleanly; never EOF mid-set-up
		s.refused[conn] = struct{}{}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			io.Copy(io.Discard, conn) // until it hangs up, or Shutdown closes it
			conn.Close()
			s.mu.Lock()
			delete(s.refused, conn)
			s.mu.Unlock()
		}()
	}
	switch {
	case s.closed:
		refuse("server shutting down")
		return
	case uerr != nil:
		refuse(fmt.Sprintf("no peer credentials: %v", uerr))
		return
	case uid != 0 && len(s.clients) >= s.cfg.MaxClients:
		refuse(fmt.Sprintf("%d clients already", len(s.clients)))
		return
	case uid != 0 && s.perUID[uid] >= s.cfg.MaxPerUser:
		refuse(fmt.Sprintf("uid %d has %d clients already, the per-user limit", uid, s.perUID[uid]))
		return
	}
	id, ok := s.allocID()
	if !ok {
		refuse("no free peer id")
		return
	}
	c := &client{id: id, uid: uid, conn: conn, wake: make(chan struct{}, 1)}
	for v := 0; v < s.cfg.Vectors; v++ {
		e, err := eventfd.New()
		if err != nil {
			for _, f := range c.fds {
				f.release()
			}
			refuse(err.Error())
			return
		}
		c.fds = append(c.fds, ownedFD(e))
	}
	others := s.sorted()
	// Existing clients learn the new peer before the new client learns
	// about them, as the reference server orders it.
	for _, o := range others {
		for _, f := range c.fds {
			s.enqueue(o, id, f)
		}
	}
	s.enqueue(c, ProtocolVersion, nil)
	s.enqueue(c, id, nil)
	s.enqueue(c, -1, &sharedFD{fd: s.cfg.ShmFD})
	for _, fd := range s.cfg.Self { // the device (peer 0) first
		s.enqueue(c, 0, &sharedFD{fd: fd})
	}
	for _, o := range others {
		for _, f := range o.fds {
			s.enqueue(c, o.id, f)
		}
	}
	for _, f := range c.fds { // and finally its own vectors
		s.enqueue(c, id, f)
	}
	s.clients[id] = c
	s.perUID[uid]++
	if s.cfg.OnJoin != nil {
		s.cfg.OnJoin(id, c.ints())
	}
	s.log.Info("client joined", "client", id, "uid", uid, "clients", len(s.clients))
	s.writers.Add(1)
	go s.write(c)
	s.wg.Add(1)
	go s.watch(c)
}

// enqueue queues one message for c, holding fd until it is sent. A
// client maxQueued behind is cut off: its connection is closed, so its
// writer and watcher drop it.
func (s *Server) enqueue(c *client, v int64, fd *sharedFD) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gone || c.closing {
		return
	}
	if len(c.q) >= maxQueued {
		c.overflow = true
		c.conn.Close()
		return
	}
	fd.hold()
	c.q = append(c.q, msg{v: v, fd: fd})
	c.kick()
}

func (c *client) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func releaseMsgs(ms []msg) {
	for _, m := range ms {
		m.fd.release()
	}
}

// write sends c's queued messages in order, each within SendTimeout; a
// client that does not take one in time is dropped. It stops when c is
// dropped, or, once Shutdown marked c closing, when the queue is empty.
func (s *Server) write(c *client) {
	defer s.writers.Done()
	for {
		c.mu.Lock()
		for len(c.q) == 0 && !c.closing && !c.gone {
			c.mu.Unlock()
			<-c.wake
			c.mu.Lock()
		}
		batch := c.q
		c.q = nil
		stop := c.gone || len(batch) == 0
		c.mu.Unlock()
		if stop {
			releaseMsgs(batch)
			return
		}
		for i, m := range batch {
			err := send(c.conn, m.v, m.fd.int(), s.cfg.SendTimeout)
			m.fd.release()
			if err != nil {
				releaseMsgs(batch[i+1:])
				why := "client connection failed"
				if errors.Is(err, os.ErrDeadlineExceeded) {
					why = fmt.Sprintf("client did not read for %v; dropping it", s.cfg.SendTimeout)
				}
				s.drop(c, why, err)
				return
			}
		}
	}
}

func (s *Server) sorted() []*client {
	l := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		l = append(l, c)
	}
	sort.Slice(l, func(i, j int) bool { return l[i].id < l[j].id })
	return l
}

// watch waits for anything from the client: the protocol has clients send
// nothing, so data is garbage and EOF is a departure; both end the client.
func (s *Server) watch(c *client) {
	defer s.wg.Done()
	var b [64]byte
	n, err := c.conn.Read(b[:])
	switch {
	case n > 0:
		s.drop(c, "client sent data (the protocol has none); disconnecting it", fmt.Errorf("%d bytes", n))
	case errors.Is(err, io.EOF), errors.Is(err, unix.ECONNRESET): // a reset: it went with messages unread
		s.drop(c, "client left", nil)
	default:
		c.mu.Lock()
		overflow := c.overflow
		c.mu.Unlock()
		if overflow {
			s.drop(c, fmt.Sprintf("client fell %d messages behind; dropping it", maxQueued), nil)
			return
		}
		s.drop(c, "client connection failed", err)
	}
}

// drop forgets c, if it is still attached, and tells the others it left;
// why is logged (err, if any, with it).
func (s *Server) drop(c *client, why string, err error) {
	s.mu.Lock()
	if s.clients[c.id] != c || s.closed {
		s.mu.Unlock()
		return // dropped already, or Shutdown's to close
	}
	s.remove(c)
	for _, o := range s.sorted() {
		s.enqueue(o, c.id, nil)
	}
	s.mu.Unlock()
	args := []any{"client", c.id, "uid", c.uid}
	if err != nil {
		args = append(args, "err", err)
	}
	if why == "client left" {
		s.log.Info(why, args...)
	} else {
		s.log.Warn(why, args...)
	}
}

// remove forgets a client: the device stops signalling its eventfds (OnLeave
// returns only then), they and its connection are closed, and its writer
// stops. s.mu is held.
func (s *Server) remove(c *client) {
	delete(s.clients, c.id)
	if s.perUID[c.uid]--; s.perUID[c.uid] <= 0 {
		delete(s.perUID, c.uid)
	}
	if s.cfg.OnLeave != nil {
		s.cfg.OnLeave(c.id, c.ints())
	}
	c.mu.Lock()
	c.gone = true
	rest := c.q // what its writer will not send now
	c.q = nil
	c.mu.Unlock()
	releaseMsgs(rest)
	c.kick()
	c.conn.Close()
	for _, f := range c.fds {
		f.release() // closed now, or when the last message carrying it is done
	}
}

// Clients lists the connected client ids.
func (s *Server) Clients() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []int64
	for _, c := range s.sorted() {
		ids = append(ids, c.id)
	}
	return ids
}

// Shutdown tells every client that peer 0 (the device) left — the only way
// the protocol has to say the server is going — and closes everything.
// Clients get the message in parallel, each within SendTimeout.
func (s *Server) Shutdown() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.ln.Close()
	for c := range s.refused { // a refused client that stays connected must not hold us up
		c.Close()
	}
	cs := s.sorted()
	for _, c := range cs {
		s.enqueue(c, 0, nil)
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		c.kick()
	}
	s.closed = true // from here drop leaves clients to us
	s.mu.Unlock()
	s.writers.Wait()
	s.mu.Lock()
	for _, c := range s.sorted() {
		s.remove(c)
	}
	s.mu.Unlock()
	s.wg.Wait()
}
