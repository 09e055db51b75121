package driver_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
)

// A driver that runs its device over UDP blocks on the port's socket
// while it waits (vdev's Device.WaitFrame), and the device's timed work
// still gets done: with a fifth of the frames lost, every exchange of a
// ping-pong arrives, intact, through retransmissions that only the
// blocked waits' timer passes can start (each side's engine stands down
// while its driver waits).
func TestBlockedWaitRetransmits(t *testing.T) {
	drv, devs := udpDriversWrapped(t, func(n uint16, p link.Port) link.Port {
		return impair.Wrap(p, impair.Config{Loss: 0.2, Seed: int64(n)})
	})
	for i, d := range drv {
		if !devs[i].BlocksOnPort() {
			t.Fatal("a device on an impaired UDP port cannot block on it: the wrapper hides the socket")
		}
		d.SetWindow(0, 4096)
	}
	const exchanges = 60
	// waitPush returns the next arrival's 8 bytes, skipping completions.
	waitPush := func(d *driver.Driver) (uint64, error) {
		for {
			st, err := d.Wait(int64(30 * time.Second))
			if err != nil {
				return 0, err
			}
			if st.Type == uapi.StPUSH {
				return binary.LittleEndian.Uint64(d.LinkMem()[64:72]), nil
			}
		}
	}
	echo := make(chan error, 1)
	go func() {
		b := drv[1]
		for range exchanges {
			v, err := waitPush(b)
			if err != nil {
				echo <- err
				return
			}
			binary.LittleEndian.PutUint64(b.LinkMem()[0:8], v+1)
			if _, err := b.Push(1, 0, 64, 8, 0, 0); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	a := drv[0]
	for i := range uint64(exchanges) {
		binary.LittleEndian.PutUint64(a.LinkMem()[0:8], 2*i)
		if _, err := a.Push(2, 0, 64, 8, 0, 0); err != nil {
			t.Fatal(err)
		}
		v, err := waitPush(a)
		if err != nil {
			t.Fatalf("exchange %d: %v", i, err)
		}
		if v != 2*i+1 {
			t.Fatalf("exchange %d: got %d back, want %d", i, v, 2*i+1)
		}
	}
	if err := <-echo; err != nil {
		t.Fatal(err)
	}
	re := a.Counter(uapi.CtrRetransmits) + drv[1].Counter(uapi.CtrRetransmits)
	if re == 0 {
		t.Fatal("no retransmission at 20% loss: the lossy path was not tested")
	}
	t.Logf("retransmits %d, timeouts %d, wait stats %+v", re,
		a.Counter(uapi.CtrTimeouts)+drv[1].Counter(uapi.CtrTimeouts), a.WaitStats())
}
