// Package eventfd wraps Linux eventfds, the doorbells and interrupts of a
// device: the ivshmem protocol hands them between processes, and in-process
// attach uses the very same kind so nothing differs above the attach step.
//
// Waiting goes through Go's runtime poller, not a blocking syscall: a
// goroutine parked on an eventfd gives its processor back at once, which
// matters when drivers and engines share two cores (a goroutine blocked in
// poll(2) keeps its P until sysmon notices, up to milliseconds later).
package eventfd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// FD is one eventfd.
type FD struct {
	fd     int
	f      *os.File // pollable view for waiting
	closed atomic.Bool
}

// New creates a non-blocking eventfd.
func New() (*FD, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &FD{fd: fd, f: os.NewFile(uintptr(fd), "eventfd")}, nil
}

// FromFD adopts an eventfd received from elsewhere (an ivshmem server); the
// FD owns it from then on.
func FromFD(fd int) (*FD, error) {
	if err := unix.SetNonblock(fd, true); err != nil {
		return nil, fmt.Errorf("eventfd %d nonblocking: %w", fd, err)
	}
	return &FD{fd: fd, f: os.NewFile(uintptr(fd), "eventfd")}, nil
}

// Dup returns an independent FD for the same eventfd, for a second owner
// (an engine's waiter, a driver's transport) that closes its own copy.
func (e *FD) Dup() (*FD, error) { return DupFD(e.fd) }

// DupFD returns an FD for a duplicate of eventfd fd, leaving fd to its owner.
func DupFD(fd int) (*FD, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("dup eventfd %d: %w", fd, err)
	}
	return FromFD(nfd)
}

// Int returns the descriptor.
func (e *FD) Int() int { return e.fd }

// Signal adds 1 to the counter, waking a waiter.
func (e *FD) Signal() error { return Signal(e.fd) }

// Signal adds 1 to the counter of eventfd fd.
func Signal(fd int) error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	for {
		_, err := unix.Write(fd, b[:])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err == nil, errors.Is(err, unix.EAGAIN): // saturated: a wake-up is pending anyway
			return nil
		}
		return fmt.Errorf("signal eventfd %d: %w", fd, err)
	}
}

// Drain reads and clears the counter without blocking; it returns the count.
func (e *FD) Drain() uint64 {
	var b [8]byte
	n, err := unix.Read(e.fd, b[:])
	if err != nil || n != 8 {
		return 0
	}
	return binary.NativeEndian.Uint64(b[:])
}

// ErrClosed is returned by Wait on a closed FD.
var ErrClosed = errors.New("eventfd closed")

// Wait parks the goroutine until the eventfd is signalled (and clears it)
// or timeout passes (<= 0: no limit). It reports whether it was signalled.
func (e *FD) Wait(timeout time.Duration) (bool, error) {
	if timeout > 0 {
		e.f.SetReadDeadline(time.Now().Add(timeout))
	} else {
		e.f.SetReadDeadline(time.Time{})
	}
	var b [8]byte
	_, err := e.f.Read(b[:])
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	case errors.Is(err, os.ErrClosed):
		return false, ErrClosed
	}
	return false, fmt.Errorf("wait eventfd %d: %w", e.fd, err)
}

// Close closes the descriptor; a goroutine in Wait returns ErrClosed.
// It is safe to call concurrently with Wait and more than once.
func (e *FD) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	return e.f.Close()
}
