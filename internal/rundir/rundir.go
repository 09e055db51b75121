// Package rundir is the directory a dimmnet daemon keeps its lock file and
// ivshmem sockets in (and the shared-memory link its rendezvous files).
// Clients trust what they find there by name: a socket swapped by another
// user sends `dimmnet stat` or a QEMU guest to that user's server, and a
// symlinked lock file makes the daemon create a file wherever the link
// points. So the directory must be one only this user (or root) can
// change: made 0700 if missing, refused if another user owns it or others
// can write it, or if an ancestor lets someone else rename it away; the
// lock file is opened without following symlinks.
//
// The default needs no --dir: a per-user runtime directory, which is where
// such sockets belong and which other users cannot pre-create, instead of
// a fixed name in /tmp anyone can take first.
package rundir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Sentinels for the directories and files the package refuses.
var (
	// ErrNotDir: the path is not a directory.
	ErrNotDir = errors.New("not a directory")
	// ErrNotOwned: another user owns the directory (or an ancestor, or
	// the lock file), so that user can replace what is in it.
	ErrNotOwned = errors.New("owned by another user")
	// ErrWritable: users other than the owner may write the directory (or
	// an ancestor without the sticky bit), so they can replace entries.
	ErrWritable = errors.New("writable by other users")
	// ErrSymlink: the directory or the lock file is a symbolic link,
	// which would send the daemon somewhere its user did not choose.
	ErrSymlink = errors.New("is a symbolic link")
	// ErrLocked: another daemon holds the directory's lock.
	ErrLocked = errors.New("another dimmnet serve is running")
)

// LockName is the lock file a daemon holds in its directory.
const LockName = "dimmnet.lock"

// Default is the daemon directory when none is given:
// $XDG_RUNTIME_DIR/dimmnet (the user's own runtime directory, 0700 by
// systemd), /run/dimmnet for root without one, or dimmnet-<uid> in the
// temporary directory ($TMPDIR, else /tmp) for other users: the uid in the
// name keeps users apart, and Ensure refuses it if someone else made it
// first.
func Default() string {
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" {
		return filepath.Join(x, "dimmnet")
	}
	if os.Geteuid() == 0 {
		return "/run/dimmnet"
	}
	return filepath.Join(os.TempDir(), "dimmnet-"+strconv.Itoa(os.Geteuid()))
}

// Ensure makes dir, mode 0700 (0750 and group gid when gid > 0, so that
// group can reach sockets shared with it), with missing parents 0755, or
// checks that the existing dir is safe: a real directory, owned by this
// user, not writable by group or others, under ancestors owned by this
// user or root that others cannot write (or that are sticky, as /tmp). An
// existing dir is given group gid and mode 0750 when gid > 0.
func Ensure(dir string, gid int) error {
	dir, err := filepath.Abs(dir) // a relative path's ancestors are checked too
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	if err := check(dir, false); err != nil {
		return err
	}
	if gid > 0 {
		if err := os.Lchown(dir, -1, gid); err != nil {
			return fmt.Errorf("directory %s: give it group %d: %w", dir, gid, err)
		}
		if err := os.Chmod(dir, 0o750); err != nil {
			return fmt.Errorf("directory %s: %w", dir, err)
		}
	}
	return nil
}

// Check is what a client asks of a daemon directory it did not name
// itself (the default): the rules of Ensure, except that root may own it
// (a daemon run as root serves /run/dimmnet). It makes nothing.
func Check(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	return check(abs, true)
}

// check applies the rules to dir and its ancestors; rootOK lets root own
// dir itself.
func check(dir string, rootOK bool) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	me := uint32(os.Geteuid())
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("directory %s: %w", dir, ErrSymlink)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("directory %s: %w", dir, ErrNotDir)
	case st.Uid != me && !(rootOK && st.Uid == 0):
		return fmt.Errorf("directory %s: %w (uid %d, we are %d)", dir, ErrNotOwned, st.Uid, me)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("directory %s: %w (mode %o)", dir, ErrWritable, st.Mode&0o7777)
	}
	// The ancestors, as the kernel resolves them: whoever may rename an
	// entry of one can swap the directory under us.
	parent, err := filepath.EvalSymlinks(filepath.Dir(dir))
	if err != nil {
		return fmt.Errorf("directory %s: %w", dir, err)
	}
	for p := parent; ; p = filepath.Dir(p) {
		if err := unix.Stat(p, &st); err != nil {
			return fmt.Errorf("directory %s: ancestor %s: %w", dir, p, err)
		}
		switch {
		case st.Uid != me && st.Uid != 0:
			return fmt.Errorf("directory %s: ancestor %s: %w (uid %d)", dir, p, ErrNotOwned, st.Uid)
		case st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0:
			return fmt.Errorf("directory %s: ancestor %s: %w (mode %o, not sticky)", dir, p, ErrWritable, st.Mode&0o7777)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// Lock takes the exclusive lock DIR/dimmnet.lock, so a second daemon on
// the same directory fails (ErrLocked) instead of stealing its sockets.
// The file is opened without following a symlink and must be a regular
// file of this user's. The lock lasts while the returned file is open.
func Lock(dir string) (*os.File, error) {
	p := filepath.Join(dir, LockName)
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("lock %s: %w", p, ErrSymlink)
	}
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	f := os.NewFile(uintptr(fd), p)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w (a %o of uid %d)", p, ErrNotOwned, st.Mode&unix.S_IFMT, st.Uid)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w on %s (%s is locked)", ErrLocked, dir, p)
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	return f, nil
}

// Socket resolves a daemon socket a command was given: a bare name
// ("node0.sock") is the default directory's, which is checked first (a
// client must not follow a name into a directory another user made); a
// path with a slash is used as given, the user's own choice.
func Socket(name string) (string, error) {
	if filepath.Base(name) != name {
		return name, nil
	}
	dir := Default()
	if err := Check(dir); err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}
