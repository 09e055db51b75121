// Package region creates and maps the shared memory behind a device: a sealed
// memfd by default, or a file (in /dev/shm) when something must find the
// region by name. The fd is what the ivshmem server hands to its clients,
// and clients get it read-write, so the kind of file decides what a client
// can do to the daemon: a memfd is sealed against resizing (a client's
// ftruncate fails with EPERM), while a tmpfs file cannot be sealed, and a
// client that shrinks it makes the daemon's next touch of a lost page a
// SIGBUS (package vdev catches that fault and fails only that device).
package region

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrSize reports a region size QEMU would refuse.
var ErrSize = errors.New("region size must be a power of two of at least 1 MiB")

// Seals are the seals every memfd region carries: no client may shrink it
// (the daemon would fault on the lost pages), grow it (QEMU sizes BAR2 by
// the file), or add seals of its own (F_SEAL_FUTURE_WRITE would keep the
// next QEMU from mapping it writable).
const Seals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL

// Region is one mapped shared memory file.
type Region struct {
	Mem  []byte // the mapping, MAP_SHARED
	FD   int    // the file; hand it to ivshmem clients
	Path string // the file's path, or "" for a memfd
}

// Memfd makes a memfd of size bytes named name, sealed with Seals, and
// returns its fd: shared memory no holder of the fd can resize.
func Memfd(name string, size int) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("memfd_create %q: %w", name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("size memfd %q to %d: %w", name, size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, Seals); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("seal memfd %q: %w", name, err)
	}
	return fd, nil
}

// Create makes a zeroed shared memory file of size bytes and maps it. With
// path empty it is a sealed memfd named name; otherwise the file at path is
// created exclusively (an existing one is an error, not silently shared).
func Create(name, path string, size int) (*Region, error) {
	if size < 1<<20 || size&(size-1) != 0 {
		return nil, fmt.Errorf("create region %q of %d bytes: %w", name, size, ErrSize)
	}
	var fd int
	var err error
	if path == "" {
		if fd, err = Memfd(name, size); err != nil {
			return nil, err
		}
	} else {
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			unix.Close(fd)
			os.Remove(path)
			return nil, fmt.Errorf("size %s to %d: %w", path, size, err)
		}
	}
	r, err := Map(fd, size)
	if err != nil {
		unix.Close(fd)
		if path != "" {
			os.Remove(path)
		}
		return nil, err
	}
	r.Path = path
	return r, nil
}

// Map maps size bytes of an existing shared memory fd (one an ivshmem server
// sent). The fd is kept open and owned by the Region.
func Map(fd, size int) (*Region, error) {
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes of fd %d: %w", size, fd, err)
	}
	return &Region{Mem: mem, FD: fd}, nil
}

// Contains reports whether addr lies in the mapping: a fault at addr is
// then this region's (a client shrank its file).
func (r *Region) Contains(addr uintptr) bool {
	if len(r.Mem) == 0 {
		return false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(r.Mem)))
	return addr >= base && addr-base < uintptr(len(r.Mem))
}

// Close unmaps the region and closes its fd; with remove it also unlinks
// its file.
func (r *Region) Close(remove bool) error {
	var errs []error
	if r.Mem != nil {
		errs = append(errs, unix.Munmap(r.Mem))
		r.Mem = nil
	}
	if r.FD >= 0 {
		errs = append(errs, unix.Close(r.FD))
		r.FD = -1
	}
	if remove && r.Path != "" {
		errs = append(errs, os.Remove(r.Path))
	}
	return errors.Join(errs...)
}

// DaemonPattern is the path pattern of a daemon's region files in dir, one
// per node ("%d" becomes the node id): the pid in the name is what lets the
// next daemon tell a dead daemon's leftovers from a live one's regions.
func DaemonPattern(dir string, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("dimmnet-%d-node%%d", pid))
}

var daemonFile = regexp.MustCompile(`^dimmnet-([0-9]+)-node[0-9]+$`)

// RemoveStale removes the region files a killed daemon left in dir (named
// by DaemonPattern, owned by this user, their pid no longer alive) and
// returns their paths. Files of live daemons, of other users, and of
// anything else are left alone: a pid in another pid namespace may look
// alive, which only keeps a file, never removes one in use.
func RemoveStale(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("look for stale regions in %s: %w", dir, err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		m := daemonFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue // alive (EPERM: alive, another user's)
		}
		p := filepath.Join(dir, e.Name())
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
			continue
		}
		if err := os.Remove(p); err != nil {
			errs = append(errs, fmt.Errorf("remove stale region: %w", err))
			continue
		}
		removed = append(removed, p)
	}
	return removed, errors.Join(errs...)
}
