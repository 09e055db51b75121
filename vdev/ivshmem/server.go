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
	"time"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"golang.org/x/sys/unix"
)

// ProtocolVersion is the only version QEMU accepts.
const ProtocolVersion = 0

// MaxPeerID is the largest id QEMU accepts (IVSHMEM_MAX_PEERS).
const MaxPeerID = 65535

// sendTimeout bounds one message to a client that does not read.
const sendTimeout = 2 * time.Second

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
	MaxClients      int // 0: 64
	Log             *slog.Logger
	// SocketMode is the socket's mode, set after bind whatever the umask:
	// connecting needs write permission, so it says who may attach.
	// 0: 0600, the daemon's user only.
	SocketMode os.FileMode
	// SocketGID > 0 gives the socket that group (with SocketMode 0660 the
	// group's users may attach); otherwise it keeps the daemon's group.
	SocketGID int
}

// Server serves one device.
type Server struct {
	cfg     Config
	ln      *net.UnixListener
	mu      sync.Mutex
	clients map[int64]*client
	refused map[*net.UnixConn]struct{}
	nextID  int64
	closed  bool
	wg      sync.WaitGroup
	log     *slog.Logger
}

type client struct {
	id   int64
	conn *net.UnixConn
	fds  []*eventfd.FD
}

func (c *client) ints() []int {
	r := make([]int, len(c.fds))
	for i, f := range c.fds {
		r[i] = f.Int()
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
	return &Server{cfg: cfg, ln: ln, clients: map[int64]*client{}, refused: map[*net.UnixConn]struct{}{}, nextID: 1,
		log: cfg.Log.With("socket", cfg.Path)}, nil
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

// send writes one message: a little-endian int64 and at most one fd.
func send(conn *net.UnixConn, v int64, fd int) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	conn.SetWriteDeadline(time.Now().Add(sendTimeout)) // a client that never reads must not stall the server
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

func (s *Server) admit(conn *net.UnixConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	refuse := func(why string) {
		s.log.Warn("refusing client", "reason", why)
		send(conn, -1, -1) // a version QEMU rejects cleanly; never EOF mid-set-up
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
	if s.closed {
		refuse("server shutting down")
		return
	}
	if len(s.clients) >= s.cfg.MaxClients {
		refuse(fmt.Sprintf("%d clients already", len(s.clients)))
		return
	}
	id, ok := s.allocID()
	if !ok {
		refuse("no free peer id")
		return
	}
	c := &client{id: id, conn: conn}
	for v := 0; v < s.cfg.Vectors; v++ {
		e, err := eventfd.New()
		if err != nil {
			for _, f := range c.fds {
				f.Close()
			}
			refuse(err.Error())
			return
		}
		c.fds = append(c.fds, e)
	}
	err := func() error {
		if err := send(conn, ProtocolVersion, -1); err != nil {
			return err
		}
		if err := send(conn, id, -1); err != nil {
			return err
		}
		if err := send(conn, -1, s.cfg.ShmFD); err != nil {
			return err
		}
		// existing clients learn the new peer
		for _, o := range s.sorted() {
			for _, f := range c.fds {
				if err := send(o.conn, id, f.Int()); err != nil {
					s.log.Warn("telling client about a new peer failed", "client", o.id, "err", err)
					break
				}
			}
		}
		// the new client learns every other peer, the device (peer 0) first
		for _, fd := range s.cfg.Self {
			if err := send(conn, 0, fd); err != nil {
				return err
			}
		}
		for _, o := range s.sorted() {
			for _, f := range o.fds {
				if err := send(conn, o.id, f.Int()); err != nil {
					return err
				}
			}
		}
		// and finally its own vectors
		for _, f := range c.fds {
			if err := send(conn, id, f.Int()); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		s.log.Warn("client vanished during set-up", "client", id, "err", err)
		for _, f := range c.fds {
			f.Close()
		}
		conn.Close()
		s.tellLeft(id)
		return
	}
	s.clients[id] = c
	if s.cfg.OnJoin != nil {
		s.cfg.OnJoin(id, c.ints())
	}
	s.log.Info("client joined", "client", id, "clients", len(s.clients))
	s.wg.Add(1)
	go s.watch(c)
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
		s.log.Warn("client sent data (the protocol has none); disconnecting it", "client", c.id, "bytes", n)
	case errors.Is(err, io.EOF):
		s.log.Info("client left", "client", c.id)
	default:
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return // Shutdown closes it
		}
		s.log.Warn("client connection failed", "client", c.id, "err", err)
	}
	s.drop(c)
}

func (s *Server) drop(c *client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.clients[c.id] != c {
		return
	}
	s.remove(c)
	s.tellLeft(c.id)
}

// remove forgets a client: the device stops signalling its eventfds (OnLeave
// returns only then), and they and its connection are closed. s.mu is held.
func (s *Server) remove(c *client) {
	delete(s.clients, c.id)
	if s.cfg.OnLeave != nil {
		s.cfg.OnLeave(c.id, c.ints())
	}
	c.conn.Close()
	for _, f := range c.fds {
		f.Close()
	}
}

// tellLeft sends every remaining client the departed id with no fd.
func (s *Server) tellLeft(id int64) {
	for _, o := range s.sorted() {
		if err := send(o.conn, id, -1); err != nil {
			s.log.Warn("telling client about a departure failed", "client", o.id, "err", err)
		}
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
func (s *Server) Shutdown() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.ln.Close()
	for c := range s.refused { // a refused client that stays connected must not hold us up
		c.Close()
	}
	cs := s.sorted()
	for _, c := range cs {
		send(c.conn, 0, -1)
		s.remove(c)
	}
	s.mu.Unlock()
	s.wg.Wait()
}
