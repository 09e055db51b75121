package tests

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dimmnet/dimmnet/internal/testenv"
	"github.com/dimmnet/dimmnet/uapi"
	"golang.org/x/sys/unix"
)

// nobodyID is another user's uid and gid (nobody, nogroup).
const nobodyID = 65534

func statMode(t *testing.T, p string) (uint32, *unix.Stat_t) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Mode & 0o7777, &st
}

// With no --dir the daemon makes $XDG_RUNTIME_DIR/dimmnet, 0700, and its
// sockets are 0600 whatever the umask; the clients find it with no path:
// stat with none, pingpong --attach with bare socket names.
func TestServeDefaultDir(t *testing.T) {
	xdg := t.TempDir()
	env := []string{"XDG_RUNTIME_DIR=" + xdg}
	dir := filepath.Join(xdg, "dimmnet")
	old := syscall.Umask(0) // the daemon inherits it: a mode that followed it would be 0777
	d := startDaemonIn(t, dir, env, 2)
	syscall.Umask(old)
	if m, _ := statMode(t, dir); m != 0o700 {
		t.Fatalf("default directory mode %o, want 700", m)
	}
	for _, p := range []string{d.sock(0), d.sock(1)} {
		if m, st := statMode(t, p); m != 0o600 || st.Mode&unix.S_IFMT != unix.S_IFSOCK {
			t.Fatalf("%s: mode %o type %o, want a socket 0600", p, m, st.Mode&unix.S_IFMT)
		}
	}
	if m, _ := statMode(t, filepath.Join(dir, "dimmnet.lock")); m != 0o600 {
		t.Fatalf("lock mode %o, want 600", m)
	}
	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(dimmnet(t), args...)
		c.Env = append(os.Environ(), env...)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("dimmnet %s: %v\n%s\n%s", strings.Join(args, " "), err, out, d.stderr)
		}
		return string(out)
	}
	if out := run("stat"); !strings.Contains(out, "node0: dimmnet node 0") {
		t.Fatalf("stat with no socket:\n%s", out)
	}
	if out := run("stat", "node1.sock"); !strings.Contains(out, "node1: dimmnet node 1") {
		t.Fatalf("stat node1.sock:\n%s", out)
	}
	run("pingpong", "--attach", "node0.sock,node1.sock", "-q", "--max", "8", "--iters", "10", "--raw-time", "20ms")
	if a := attach(t, d.sock(0)); a.Counter(uapi.CtrTxPkts) == 0 {
		t.Fatal("the ping-pong by bare names sent nothing through node 0")
	}
}

// serveRefused runs serve on dir and wants it to fail saying why.
func serveRefused(t *testing.T, dir, why string) {
	t.Helper()
	out, err := exec.Command(dimmnet(t), "serve", "--dir", dir, "--nodes", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), why) {
		t.Fatalf("serve --dir %s: %v: %s (want a refusal: %q)", dir, err, out, why)
	}
	if _, err := os.Lstat(filepath.Join(dir, "node0.sock")); err == nil {
		t.Fatalf("a refused daemon made a socket in %s", dir)
	}
}

// A directory another user made first, one anyone can write, and one
// whose lock file is a symlink are refused: the daemon creates nothing
// there, nor where the symlink points.
func TestServeRefusesUntrustedDir(t *testing.T) {
	testenv.NeedRoot(t, "acts as, or gives files to, another user")
	theirs := filepath.Join(t.TempDir(), "dimmnet")
	os.Mkdir(theirs, 0o700)
	if err := os.Chown(theirs, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	serveRefused(t, theirs, "owned by another user")

	open := filepath.Join(t.TempDir(), "dimmnet")
	os.Mkdir(open, 0o700)
	os.Chmod(open, 0o777)
	serveRefused(t, open, "writable by other users")

	linked := t.TempDir()
	target := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(target, filepath.Join(linked, "dimmnet.lock")); err != nil {
		t.Fatal(err)
	}
	serveRefused(t, linked, "symbolic link")
	if _, err := os.Lstat(target); err == nil {
		t.Fatalf("the daemon created %s through the symlinked lock file", target)
	}

	// A file where a socket goes is not ours to remove.
	squat := t.TempDir()
	if err := os.WriteFile(filepath.Join(squat, "node0.sock"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dimmnet(t), "serve", "--dir", squat, "--nodes", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "other than a socket of ours") {
		t.Fatalf("serve over a regular file at node0.sock: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(squat, "node0.sock")); string(b) != "mine" {
		t.Fatal("the file at node0.sock was replaced")
	}
}

// --group makes the sockets and the directory that group's: sockets 0660,
// the directory 0750.
func TestServeGroup(t *testing.T) {
	testenv.NeedRoot(t, "acts as, or gives files to, another user")
	g, err := user.LookupGroupId(strconv.Itoa(nobodyID))
	if err != nil {
		t.Skipf("no group %d: %v", nobodyID, err)
	}
	d := startDaemon(t, 1, "--group", g.Name)
	if m, st := statMode(t, d.sock(0)); m != 0o660 || st.Gid != nobodyID {
		t.Fatalf("socket mode %o group %d, want 660 group %d", m, st.Gid, nobodyID)
	}
	if m, st := statMode(t, d.dir); m != 0o750 || st.Gid != nobodyID {
		t.Fatalf("directory mode %o group %d, want 750 group %d", m, st.Gid, nobodyID)
	}
}
