package tests

import (
	"errors"
	"io"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/internal/testenv"
)

// joinBound is a generous bound on one join (the set-up's messages read),
// far above its cost and below what a join waiting on a never-reading
// client took (the send timeout, 2 s, per message that client could not take).
const joinBound = 5 * time.Second

// join attaches to sock, reads its set-up to the end (its own vector, the
// last message) and hangs up; it returns how long that took.
func join(t *testing.T, sock string) time.Duration {
	t.Helper()
	start := time.Now()
	c := dialRaw(t, sock)
	defer c.c.Close()
	if v, _ := c.next(t); v != 0 {
		t.Fatalf("version %d", v)
	}
	id, _ := c.next(t)
	for {
		if v, _ := c.next(t); v == id {
			return time.Since(start)
		}
	}
}

// A client that never reads does not hold up the others: joins and
// leaves only queue messages for it, and once it has left one unread for
// the send timeout it is dropped, its departure told to the others.
func TestSlowClientDoesNotDelayJoins(t *testing.T) {
	d := startDaemon(t, 1)
	slow, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: d.sock(0), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// Every join and leave is a message (with an fd) for the slow client:
	// far more than its socket buffer holds.
	var worst time.Duration
	for i := 0; i < 600 && !strings.Contains(d.stderr.String(), "did not read"); i++ {
		if took := join(t, d.sock(0)); took > worst {
			worst = took
		}
		if worst > joinBound {
			t.Fatalf("join %d took %v with a never-reading client attached", i, worst)
		}
	}
	eventually(t, "the never-reading client to be dropped", func() bool {
		return strings.Contains(d.stderr.String(), "client did not read for 2s; dropping it")
	})
	for i := 0; i < 20; i++ { // and joins after it went
		if took := join(t, d.sock(0)); took > worst {
			worst = took
		}
	}
	if worst > joinBound {
		t.Fatalf("a join took %v with a never-reading client attached", worst)
	}
	// what it was sent before it was cut off is still there, then EOF
	slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	oob := make([]byte, 4096)
	for {
		_, oobn, _, _, err := slow.ReadMsgUnix(buf, oob)
		if msgs, _ := unix.ParseSocketControlMessage(oob[:oobn]); len(msgs) > 0 {
			for _, m := range msgs {
				fds, _ := unix.ParseUnixRights(&m)
				for _, f := range fds {
					unix.Close(f)
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the dropped client's connection: %v, want EOF", err)
		}
	}
}

// dialAs connects to sock as uid and gid: on a thread of its own whose
// effective ids it changes (the kernel records the peer's credentials at
// connect) and which dies with its goroutine, never running anything else.
func dialAs(sock string, uid, gid int) (*net.UnixConn, error) {
	type result struct {
		c   *net.UnixConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
		keep := ^uintptr(0)
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(gid), keep); e != 0 {
			ch <- result{err: e}
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
			ch <- result{err: e}
			return
		}
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// firstMessage reads one protocol message's value from c.
func firstMessage(t *testing.T, c *net.UnixConn) int64 {
	t.Helper()
	r := &rawClient{c}
	v, _ := r.next(t)
	return v
}

// One user's clients are limited per device (SO_PEERCRED's uid): the
// (limit+1)th is refused with a logged reason, while another user still
// attaches, and so does root, whom the limit does not bind.
func TestPerUserClientLimit(t *testing.T) {
	testenv.NeedRoot(t, "acts as, or gives files to, another user")
	g, err := user.LookupGroupId(strconv.Itoa(nobodyID))
	if err != nil {
		t.Skipf("no group %d: %v", nobodyID, err)
	}
	// The other users must reach the socket: a directory they can search,
	// the daemon's shared with their group.
	base, err := os.MkdirTemp("", "dimmnet-peruser")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	dir := filepath.Join(base, "d")
	const limit = 3
	d := startDaemonIn(t, dir, nil, 1, "--dir", dir, "--group", g.Name, "--max-clients-per-user", strconv.Itoa(limit))
	var conns []*net.UnixConn
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	attachAs := func(uid int) int64 {
		t.Helper()
		c, err := dialAs(d.sock(0), uid, nobodyID)
		if err != nil {
			t.Fatalf("connect as uid %d: %v", uid, err)
		}
		conns = append(conns, c)
		return firstMessage(t, c)
	}
	for i := 0; i < limit; i++ {
		if v := attachAs(nobodyID); v != 0 {
			t.Fatalf("client %d of uid %d: version %d, want 0", i+1, nobodyID, v)
		}
	}
	if v := attachAs(nobodyID); v != -1 {
		t.Fatalf("client %d of uid %d: version %d, want -1 (refused)", limit+1, nobodyID, v)
	}
	eventually(t, "the refusal logged with its reason", func() bool {
		l := d.stderr.String()
		return strings.Contains(l, "refusing client") && strings.Contains(l, "per-user limit")
	})
	if v := attachAs(nobodyID - 1); v != 0 {
		t.Fatalf("another user's client: version %d, want 0", v)
	}
	for i := 0; i < limit+1; i++ { // root is not limited
		if v := firstMessage(t, dialRaw(t, d.sock(0)).c); v != 0 {
			t.Fatalf("root's client %d: version %d, want 0", i+1, v)
		}
	}
	// a slot freed is a slot the user may take again
	conns[0].Close()
	eventually(t, "the first client's departure", func() bool { return strings.Contains(d.stderr.String(), "client left") })
	if v := attachAs(nobodyID); v != 0 {
		t.Fatalf("uid %d after one of its clients left: version %d, want 0", nobodyID, v)
	}
}
