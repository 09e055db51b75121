package driver

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// eventfdTransport is a region plus two eventfds: the device's doorbell
// (we write it) and our interrupt (we wait on it). In-process attach uses it
// directly; host-process attach gets the same fds from the ivshmem server.
type eventfdTransport struct {
	mem      []byte
	doorbell int
	irq      int
	closeFn  func() error
}

// InProcess attaches to a device in this process: its region and the
// doorbell and interrupt eventfds it exposes. Closing the transport leaves
// them to their owner, the device.
func InProcess(region []byte, doorbellFD, irqFD int) Transport {
	return &eventfdTransport{mem: region, doorbell: doorbellFD, irq: irqFD}
}

func (t *eventfdTransport) Region() []byte { return t.mem }

func (t *eventfdTransport) Kick() error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	for {
		_, err := unix.Write(t.doorbell, b[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil && !errors.Is(err, unix.EAGAIN) {
			return fmt.Errorf("ring doorbell: %w", err)
		}
		return nil
	}
}

func (t *eventfdTransport) WaitIRQ(timeoutMs int) error {
	fds := []unix.PollFd{{Fd: int32(t.irq), Events: unix.POLLIN}}
	_, err := unix.Poll(fds, timeoutMs)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("wait interrupt: %w", err)
	}
	if fds[0].Revents&unix.POLLIN != 0 {
		var b [8]byte
		unix.Read(t.irq, b[:])
	}
	return nil
}

func (t *eventfdTransport) Close() error {
	if t.closeFn != nil {
		return t.closeFn()
	}
	return nil
}
