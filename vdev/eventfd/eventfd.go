// Package eventfd wraps Linux eventfds, the doorbells and interrupts of a
// device: the ivshmem protocol hands them between processes, and in-process
// attach uses the very same kind so nothing differs above the attach step.
package eventfd

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// FD is one eventfd.
type FD struct{ fd int }

// New creates a non-blocking eventfd.
func New() (*FD, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &FD{fd}, nil
}

// FromFD adopts an eventfd received from elsewhere (an ivshmem server).
func FromFD(fd int) *FD { return &FD{fd} }

// Int returns the descriptor.
func (e *FD) Int() int { return e.fd }

// Signal adds 1 to the counter, waking a reader.
func (e *FD) Signal() error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	for {
		_, err := unix.Write(e.fd, b[:])
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN { // counter saturated: a wake-up is pending anyway
			return nil
		}
		if err != nil {
			return fmt.Errorf("signal eventfd %d: %w", e.fd, err)
		}
		return nil
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

// Wait blocks until the eventfd is signalled or timeoutMs passes (-1: no
// limit) and drains it. It reports whether it was signalled.
func (e *FD) Wait(timeoutMs int) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(e.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, timeoutMs)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("poll eventfd %d: %w", e.fd, err)
		}
		if n == 0 {
			return false, nil
		}
		e.Drain()
		return true, nil
	}
}

// Close closes the descriptor.
func (e *FD) Close() error {
	if e.fd < 0 {
		return nil
	}
	err := unix.Close(e.fd)
	e.fd = -1
	return err
}
