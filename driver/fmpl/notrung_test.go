package fmpl_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/drivertest"
	"github.com/dimmnet/dimmnet/driver/fmpl"
	"github.com/dimmnet/dimmnet/vdev"
)

// Sends and receives whose commands find the device's doorbell dead
// (driver.ErrNotRung) are posted, and FMPL treats them so: a send's body
// arrives intact and its buffer is the caller's again only after the
// device read it, a receive's header stays (the peer writes into it), each
// message arrives once, and Stats counts them as NotRung. FMPL took the
// error for a failure: Isend's wait returned at once with the error, and
// Irecv dropped the receive whose header it had posted.
func TestSendNotRungStillDelivers(t *testing.T) {
	const rounds, size = 4, 64 << 10
	l, err := vdev.NewLocal(vdev.Config{RegionSize: 16 << 20}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	live := false // a rank may still run on the devices: leave them mapped
	defer func() {
		if !live {
			l.Close()
		}
	}()
	bell := drivertest.NewBell(driver.InProcessDevice(l.Devices[0]))
	atts := []driver.Attachment{bell, driver.InProcessDevice(l.Devices[1])}
	headerOut := make(chan struct{}) // rank 1 posted its receive's header
	quit := make(chan struct{})      // a rank failed: the other must not wait for it
	var stats [2]fmpl.Stats          // each rank writes its own
	// The other rank may wait for a failed one for ever (FMPL's waits
	// have no deadline): quit tells it, and the devices stay mapped.
	err = drivertest.Ranks(atts, hangGuard, func() { close(quit) }, func(r int, d *driver.Driver) error {
		w, err := fmpl.Init(d, fmpl.Config{Rank: r, Size: 2, Count: 4})
		if err != nil {
			return err
		}
		body := notRungRank0
		if r == 1 {
			body = notRungRank1
		}
		if err := body(w, bell, headerOut, quit, rounds, size); err != nil {
			return err
		}
		stats[r] = w.Stats()
		return w.Finalize()
	})
	if err != nil {
		live = true
		t.Fatal(err)
	}
	if bell.Failed() == 0 || stats[0].NotRung == 0 {
		t.Fatalf("no post met the dead doorbell (%d failed kicks, NotRung %d): the device never slept before one", bell.Failed(), stats[0].NotRung)
	}
	if stats[0].Sends != rounds || stats[0].Recvs != rounds || stats[1].Sends != rounds || stats[1].Recvs != rounds {
		t.Fatalf("sends/receives: rank 0 %d/%d, rank 1 %d/%d, want %d each", stats[0].Sends, stats[0].Recvs, stats[1].Sends, stats[1].Recvs, rounds)
	}
	for r, s := range stats {
		if s.Protocol != 0 {
			t.Fatalf("rank %d: %d statuses fit no operation (a command posted twice)", r, s.Protocol)
		}
	}
	t.Logf("%d failed kicks, %d commands posted not rung", bell.Failed(), stats[0].NotRung)
}

// notRungRank0 sends from a buffer in link memory and receives, its
// doorbell dead, each operation started while its device sleeps.
func notRungRank0(w *fmpl.World, bell *drivertest.Bell, headerOut, quit chan struct{}, rounds, size int) error {
	d := w.Driver()
	sb, err := w.Alloc(size)
	if err != nil {
		return err
	}
	rb := make([]byte, size)
	bell.Kill(true)
	for i := range rounds {
		// The receiver's header is here before Isend, so Isend posts the
		// body and the flag itself, on a sleeping device.
		select {
		case <-headerOut:
		case <-quit:
			return errors.New("rank 1 failed")
		}
		for end := time.Now().Add(10 * time.Second); d.StatusTail() == d.StatusHead(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				return errors.New("the receiver's header never came")
			}
		}
		if err := drivertest.WaitAsleep(d, 10*time.Second); err != nil {
			return err
		}
		pattern(sb, i)
		if err := w.Isend(sb, 1, 0, fmpl.CommWorld); err != nil {
			return fmt.Errorf("round %d: isend: %w", i, err)
		}
		if err := w.IsendWait(1, 0, fmpl.CommWorld); err != nil {
			return fmt.Errorf("round %d: isend wait: %w", i, err)
		}
		clear(sb) // the buffer is ours again: the receiver must hold the pattern all the same

		if err := drivertest.WaitAsleep(d, 10*time.Second); err != nil {
			return err
		}
		if err := w.Irecv(rb, 1, 1, fmpl.CommWorld); err != nil {
			return fmt.Errorf("round %d: irecv: %w", i, err)
		}
		m, err := w.IrecvWait(1, 1, fmpl.CommWorld)
		if err != nil {
			return fmt.Errorf("round %d: irecv wait: %w", i, err)
		}
		if m.Size != size || m.Source != 1 {
			return fmt.Errorf("round %d: received %+v, want %d bytes from rank 1", i, m, size)
		}
		if err := checkPattern(rb, 1000+i); err != nil {
			return fmt.Errorf("round %d: receive: %w", i, err)
		}
	}
	bell.Kill(false)
	return nil
}

// notRungRank1 receives rank 0's sends and answers its receives.
func notRungRank1(w *fmpl.World, _ *drivertest.Bell, headerOut, quit chan struct{}, rounds, size int) error {
	rb, sb := make([]byte, size), make([]byte, size)
	for i := range rounds {
		if err := w.Irecv(rb, 0, 0, fmpl.CommWorld); err != nil {
			return err
		}
		select {
		case headerOut <- struct{}{}:
		case <-quit:
			return errors.New("rank 0 failed")
		}
		m, err := w.IrecvWait(0, 0, fmpl.CommWorld)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if m.Size != size {
			return fmt.Errorf("round %d: received %+v, want %d bytes", i, m, size)
		}
		if err := checkPattern(rb, i); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		pattern(sb, 1000+i)
		if err := w.Send(sb, 0, 1, fmpl.CommWorld); err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
	}
	return nil
}
