package driver

import (
	"errors"
	"fmt"
	"time"

	"github.com/dimmnet/dimmnet/internal/eventfd"
)

// eventfdTransport is a region plus two eventfds: the device's doorbell
// (we signal it) and our interrupt (we wait on it). In-process attach uses it
// directly; host-process attach gets the same kind of fds from the ivshmem
// server.
type eventfdTransport struct {
	mem      []byte
	doorbell int
	irq      *eventfd.FD // our own dup, waited on through the runtime poller
	closeFn  func() error
}

// InProcess attaches to a device in this process: its region and the
// doorbell and interrupt eventfds it exposes. The transport keeps its own
// copy of the interrupt fd; the device keeps owning the originals.
func InProcess(region []byte, doorbellFD, irqFD int) Transport {
	t := &eventfdTransport{mem: region, doorbell: doorbellFD}
	t.irq, _ = eventfd.DupFD(irqFD) // on failure the driver polls instead of sleeping
	return t
}

func (t *eventfdTransport) Region() []byte { return t.mem }

func (t *eventfdTransport) Kick() error {
	if err := eventfd.Signal(t.doorbell); err != nil {
		return fmt.Errorf("ring doorbell: %w", err)
	}
	return nil
}

func (t *eventfdTransport) WaitIRQ(timeoutMs int) error {
	if t.irq == nil {
		time.Sleep(time.Duration(timeoutMs) * time.Millisecond / 10) // no interrupt: poll slowly
		return nil
	}
	_, err := t.irq.Wait(time.Duration(timeoutMs) * time.Millisecond)
	if errors.Is(err, eventfd.ErrClosed) {
		return ErrDeviceStopped
	}
	return err
}

func (t *eventfdTransport) Close() error {
	var errs []error
	if t.irq != nil {
		errs = append(errs, t.irq.Close())
	}
	if t.closeFn != nil {
		errs = append(errs, t.closeFn())
	}
	return errors.Join(errs...)
}
