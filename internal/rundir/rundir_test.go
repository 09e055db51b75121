package rundir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/internal/testenv"
)

// nobody is the uid and gid the tests hand directories to: another user.
const nobody = 65534

func mode(t *testing.T, p string) (os.FileMode, *unix.Stat_t) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return os.FileMode(st.Mode & 0o7777), &st
}

func TestDefault(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/4242")
	if got := Default(); got != "/run/user/4242/dimmnet" {
		t.Fatalf("with XDG_RUNTIME_DIR: %s", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	want := "/run/dimmnet"
	if os.Geteuid() != 0 {
		want = filepath.Join(os.TempDir(), "dimmnet-"+itoa(os.Geteuid()))
	}
	if got := Default(); got != want {
		t.Fatalf("without XDG_RUNTIME_DIR: %s, want %s", got, want)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A missing directory is made 0700, its missing parents too.
func TestEnsureMakesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "dimmnet")
	if err := Ensure(dir, 0); err != nil {
		t.Fatal(err)
	}
	if m, _ := mode(t, dir); m != 0o700 {
		t.Fatalf("mode %o, want 700", m)
	}
	if err := Ensure(dir, 0); err != nil { // ours now: accepted again
		t.Fatal(err)
	}
}

// A directory another user made first is refused, as is one others can
// write, a symlink to one of ours, and one under a parent others can
// rename it in.
func TestEnsureRefuses(t *testing.T) {
	testenv.NeedRoot(t, "gives a directory to another user")
	base := t.TempDir()
	theirs := filepath.Join(base, "theirs")
	os.Mkdir(theirs, 0o700)
	if err := os.Chown(theirs, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(theirs, 0); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("another user's directory: %v, want ErrNotOwned", err)
	}
	if err := Check(theirs); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("a client's check of another user's directory: %v, want ErrNotOwned", err)
	}
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o700)
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(open, 0); !errors.Is(err, ErrWritable) {
		t.Fatalf("world-writable directory: %v, want ErrWritable", err)
	}
	os.Chmod(open, 0o770)
	if err := Ensure(open, 0); !errors.Is(err, ErrWritable) {
		t.Fatalf("group-writable directory: %v, want ErrWritable", err)
	}
	link := filepath.Join(base, "link")
	mine := filepath.Join(base, "mine")
	os.Mkdir(mine, 0o700)
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(link, 0); !errors.Is(err, ErrSymlink) {
		t.Fatalf("a symlink as the directory: %v, want ErrSymlink", err)
	}
	shared := filepath.Join(base, "shared")
	os.Mkdir(shared, 0o700)
	os.Chmod(shared, 0o777) // writable, not sticky: anyone may rename entries
	if err := Ensure(filepath.Join(shared, "dimmnet"), 0); !errors.Is(err, ErrWritable) {
		t.Fatalf("under a world-writable parent: %v, want ErrWritable", err)
	}
	os.Chmod(shared, os.ModeSticky|0o777) // as /tmp: sticky, entries are their owners'
	if err := Ensure(filepath.Join(shared, "dimmnet"), 0); err != nil {
		t.Fatalf("under a sticky parent: %v", err)
	}
	owned := filepath.Join(base, "owned")
	os.Mkdir(owned, 0o755)
	os.Chown(owned, nobody, nobody)
	if err := Ensure(filepath.Join(owned, "dimmnet"), 0); err == nil {
		t.Fatal("a directory under another user's parent was accepted")
	}
}

// With a group, the directory is the group's and searchable by it.
func TestEnsureGroup(t *testing.T) {
	testenv.NeedRoot(t, "gives a directory to another user")
	dir := filepath.Join(t.TempDir(), "dimmnet")
	if err := Ensure(dir, nobody); err != nil {
		t.Fatal(err)
	}
	if m, st := mode(t, dir); m != 0o750 || st.Gid != nobody {
		t.Fatalf("mode %o group %d, want 750 group %d", m, st.Gid, nobody)
	}
}

// The lock file is not followed through a symlink (which would make the
// daemon create the file it points to), and a second lock is refused.
func TestLock(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.Symlink(target, filepath.Join(dir, LockName)); err != nil {
		t.Fatal(err)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrSymlink) {
		t.Fatalf("symlinked lock file: %v, want ErrSymlink", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the symlink's target was created: %v", err)
	}
	os.Remove(filepath.Join(dir, LockName))
	f, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, _ := mode(t, filepath.Join(dir, LockName)); m != 0o600 {
		t.Fatalf("lock file mode %o, want 600", m)
	}
	if _, err := Lock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
}

// A bare socket name is the default directory's, after the directory is
// checked; a path is used as given.
func TestSocket(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	if err := Ensure(Default(), 0); err != nil {
		t.Fatal(err)
	}
	if got, err := Socket("node1.sock"); err != nil || got != filepath.Join(xdg, "dimmnet", "node1.sock") {
		t.Fatalf("bare name: %s, %v", got, err)
	}
	if got, err := Socket("./node1.sock"); err != nil || got != "./node1.sock" {
		t.Fatalf("path: %s, %v", got, err)
	}
	os.Chmod(Default(), 0o777)
	if _, err := Socket("node1.sock"); !errors.Is(err, ErrWritable) {
		t.Fatalf("bare name in a world-writable default directory: %v, want ErrWritable", err)
	}
}

// A relative path's ancestors are those of its absolute path.
func TestEnsureRelative(t *testing.T) {
	testenv.NeedRoot(t, "gives a directory to another user")
	base := t.TempDir()
	shared := filepath.Join(base, "shared")
	os.Mkdir(shared, 0o700)
	os.Chmod(shared, 0o777)
	t.Chdir(shared)
	if err := Ensure("dimmnet", 0); !errors.Is(err, ErrWritable) {
		t.Fatalf("a relative directory in a world-writable cwd: %v, want ErrWritable", err)
	}
}

func TestLinkFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadLink(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no link file: %v", err)
	}
	want := Link{Kind: "udp", Nodes: []uint16{1}, Peers: []uint16{0, 1, 2}}
	if err := WriteLink(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLink(dir)
	if err != nil || got.Kind != want.Kind || len(got.Peers) != 3 || got.Nodes[0] != 1 {
		t.Fatalf("round trip: %+v %v", got, err)
	}
}
