// Package shm creates and maps the shared memory file behind a device: an
// anonymous memfd for in-process devices, or a file in /dev/shm that other
// processes (and QEMU, as BAR2 of ivshmem) can open. The file is what the
// ivshmem server hands to its clients, so both kinds are real fds.
package shm

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrSize reports a region size QEMU would refuse.
var ErrSize = errors.New("region size must be a power of two of at least 1 MiB")

// Region is one mapped shared memory file.
type Region struct {
	Mem  []byte // the mapping, MAP_SHARED
	FD   int    // the file; hand it to ivshmem clients
	Path string // the /dev/shm path, or "" for a memfd
}

// Create makes a zeroed shared memory file of size bytes and maps it. With
// path empty it is a memfd named name; otherwise the file at path is created
// exclusively (an existing one is an error, not silently shared).
func Create(name, path string, size int) (*Region, error) {
	if size < 1<<20 || size&(size-1) != 0 {
		return nil, fmt.Errorf("create region %q of %d bytes: %w", name, size, ErrSize)
	}
	var fd int
	var err error
	if path == "" {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC)
		if err != nil {
			return nil, fmt.Errorf("memfd_create %q: %w", name, err)
		}
	} else {
		fd, err = unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", path, err)
		}
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		if path != "" {
			os.Remove(path)
		}
		return nil, fmt.Errorf("size %s to %d: %w", name, size, err)
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

// Close unmaps the region and closes its fd; with remove it also unlinks a
// /dev/shm file.
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
