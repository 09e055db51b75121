package ivshmem

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"github.com/dimmnet/dimmnet/vdev/region"
	"golang.org/x/sys/unix"
)

// bound is a generous bound for what takes microseconds when nothing
// waits on a client that does not read.
const bound = 5 * time.Second

// listen serves a 1 MiB sealed memfd with one vector on a socket in a
// fresh directory, clients dropped after timeout unread.
func listen(t *testing.T, timeout time.Duration) *Server {
	t.Helper()
	fd, err := region.Memfd("ivshmem-test", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	self, err := eventfd.New()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Listen(Config{Path: filepath.Join(t.TempDir(), "s.sock"), Vectors: 1, ShmFD: fd, Self: []int{self.Int()}, SendTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() {
		s.Shutdown()
		unix.Close(fd)
		self.Close()
	})
	return s
}

func dial(t *testing.T, s *Server) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.cfg.Path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// next reads one message's value, closing any fd it carried.
func next(t *testing.T, c *net.UnixConn) int64 {
	t.Helper()
	var b [8]byte
	oob := make([]byte, unix.CmsgSpace(4))
	c.SetReadDeadline(time.Now().Add(bound))
	n, oobn, _, _, err := c.ReadMsgUnix(b[:], oob)
	if err != nil || n != 8 {
		t.Fatalf("read: %v (%d bytes)", err, n)
	}
	msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
	for _, m := range msgs {
		fds, _ := unix.ParseUnixRights(&m)
		for _, f := range fds {
			unix.Close(f)
		}
	}
	return int64(binary.LittleEndian.Uint64(b[:]))
}

// joinAndLeave attaches, reads the whole set-up and hangs up.
func joinAndLeave(t *testing.T, s *Server) {
	t.Helper()
	c := dial(t, s)
	if v := next(t, c); v != ProtocolVersion {
		t.Fatalf("version %d", v)
	}
	id := next(t, c)
	for v := next(t, c); v != id; v = next(t, c) {
	}
	c.Close()
}

// A client that never reads is dropped once it leaves a message unread
// for the send timeout; joins meanwhile complete, none waiting on it.
func TestSlowClientDropped(t *testing.T) {
	s := listen(t, 200*time.Millisecond)
	dial(t, s) // never reads
	for len(s.Clients()) == 0 {
		time.Sleep(time.Millisecond)
	}
	slowID := s.Clients()[0]
	start := time.Now()
	for i := 0; i < 2000; i++ {
		joinAndLeave(t, s)
		if !contains(s.Clients(), slowID) {
			break
		}
		if time.Since(start) > 4*bound {
			t.Fatalf("after %d joins in %v the never-reading client is still attached", i+1, time.Since(start))
		}
	}
	deadline := time.Now().Add(bound)
	for contains(s.Clients(), slowID) {
		if time.Now().After(deadline) {
			t.Fatal("the never-reading client was not dropped")
		}
		time.Sleep(time.Millisecond)
	}
	joinAndLeave(t, s) // and the server still admits
}

// Shutdown tells every client the device left in parallel: a client that
// does not read costs it one send timeout, not one per message.
func TestShutdownWithSlowClient(t *testing.T) {
	s := listen(t, time.Second)
	dial(t, s) // never reads
	reader := dial(t, s)
	for len(s.Clients()) < 2 {
		time.Sleep(time.Millisecond)
	}
	told := make(chan bool, 1)
	go func() { // reads all along, until the device leaves (peer 0, no fd)
		for {
			var b [8]byte
			oob := make([]byte, unix.CmsgSpace(4))
			reader.SetReadDeadline(time.Now().Add(4 * bound))
			n, oobn, _, _, err := reader.ReadMsgUnix(b[:], oob)
			if err != nil {
				told <- false
				return
			}
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				fds, _ := unix.ParseUnixRights(&m)
				for _, f := range fds {
					unix.Close(f)
				}
			}
			if n == 8 && binary.LittleEndian.Uint64(b[:]) == 0 && oobn == 0 {
				told <- true
				return
			}
		}
	}()
	for i := 0; i < 400; i++ { // 800 messages for the silent client: past its socket buffer
		joinAndLeave(t, s)
	}
	start := time.Now()
	s.Shutdown()
	if took := time.Since(start); took > bound {
		t.Fatalf("Shutdown took %v", took)
	}
	if !<-told {
		t.Fatal("the reading client was not told the device left")
	}
}

// The socket's mode is set after bind, whatever the umask; a path taken by
// anything but a stale socket of ours is left alone.
func TestSocketModeAndSquatters(t *testing.T) {
	old := unix.Umask(0)
	s := listen(t, 0)
	unix.Umask(old)
	var st unix.Stat_t
	if err := unix.Lstat(s.cfg.Path, &st); err != nil || st.Mode&0o777 != 0o600 {
		t.Fatalf("socket mode %o (%v), want 600", st.Mode&0o777, err)
	}
	fd, _ := region.Memfd("ivshmem-test", 1<<20)
	defer unix.Close(fd)
	p := filepath.Join(t.TempDir(), "taken.sock")
	if err := os.WriteFile(p, []byte("not a socket"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(Config{Path: p, Vectors: 1, ShmFD: fd, Self: []int{fd}}); !errors.Is(err, ErrNotOurSocket) {
		t.Fatalf("a regular file at the socket path: %v, want ErrNotOurSocket", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "not a socket" {
		t.Fatal("the file was replaced")
	}
	if _, err := Listen(Config{Path: s.cfg.Path, Vectors: 1, ShmFD: fd, Self: []int{fd}}); !errors.Is(err, ErrInUse) {
		t.Fatalf("a live server's socket: %v, want ErrInUse", err)
	}
}

func contains(ids []int64, id int64) bool {
	for _, i := range ids {
		if i == id {
			return true
		}
	}
	return false
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Joins, leaves, a dropped never-reading client and a shutdown leave no fd
// open: the eventfds queued messages shared are closed with the last of them.
func TestNoFDLeft(t *testing.T) {
	t.Run("warm-up", func(t *testing.T) { joinAndLeave(t, listen(t, 0)) }) // the runtime's own fds (epoll) open once
	before := settledFDs(t)
	t.Run("server", func(t *testing.T) {
		s := listen(t, 100*time.Millisecond)
		dial(t, s) // never reads
		for len(s.Clients()) == 0 {
			time.Sleep(time.Millisecond)
		}
		slowID := s.Clients()[0]
		for i := 0; i < 2000 && contains(s.Clients(), slowID); i++ {
			joinAndLeave(t, s)
		}
		for i := 0; i < 20; i++ {
			joinAndLeave(t, s)
		}
	})
	// The server closes a departed client's descriptors on goroutines of
	// its own: give them a moment; a leak never comes down.
	after := openFDs(t)
	for end := time.Now().Add(5 * time.Second); after > before && time.Now().Before(end); after = openFDs(t) {
		time.Sleep(10 * time.Millisecond)
	}
	if after > before {
		t.Fatalf("%d fds open before, %d after", before, after)
	}
}

// settledFDs counts this process's open descriptors once the count has
// held for a while: the warm-up's last client may still be closing (at
// load 9 one of its descriptors was counted open before and not after).
func settledFDs(t *testing.T) int {
	t.Helper()
	n, same := openFDs(t), 0
	for end := time.Now().Add(5 * time.Second); same < 5 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
		if m := openFDs(t); m == n {
			same++
		} else {
			n, same = m, 0
		}
	}
	return n
}
