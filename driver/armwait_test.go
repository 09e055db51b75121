package driver_test

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
)

// readable waits up to d for eventfd fd and drains it.
func readable(t *testing.T, fd int, d time.Duration) bool {
	t.Helper()
	p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(p, int(d.Milliseconds()))
	for errors.Is(err, unix.EINTR) {
		n, err = unix.Poll(p, int(d.Milliseconds()))
	}
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return false
	}
	var b [8]byte
	unix.Read(fd, b[:])
	return true
}

// A caller that waits on a descriptor of its own (libfabric's FI_WAIT_FD)
// arms the device's interrupt and gives the device the descriptor: a
// frame arriving while nobody runs the driver wakes it, an unarmed device
// does not signal it, arming with a status waiting says so, and
// WaitTail's own sleeps leave DRV_WAIT set while an arm holds it.
func TestArmedInterruptSignalsDescriptor(t *testing.T) {
	t.Setenv("DIMMNET_SPIN_NS", "0") // WaitTail sleeps at its first chance
	a, b := udpDrivers(t)
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	remove, err := a.AddInterruptFD(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()

	// armed: b's frame wakes the descriptor with nobody driving a
	if !a.ArmInterrupt() {
		t.Fatal("ArmInterrupt: a status waits on an idle device")
	}
	if _, err := b.Push(1, 0, 0, 8, 0, 0); err != nil {
		t.Fatal(err)
	}
	if !readable(t, fd, 10*time.Second) {
		t.Fatal("the armed device did not signal the descriptor for an arriving frame within 10 s")
	}
	if st, ok := a.Poll(); !ok || st.Type != uapi.StPUSH {
		t.Fatalf("after the wake-up: status %v, %v; want the PUSH", st, ok)
	}

	// arming with a status waiting fails and leaves DRV_WAIT clear
	a.DisarmInterrupt()
	if _, err := b.Push(1, 0, 0, 8, 0, 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for a.StatusTail() == a.StatusHead() {
		if time.Now().After(deadline) {
			t.Fatal("the second PUSH never arrived")
		}
		time.Sleep(time.Millisecond)
	}
	if readable(t, fd, 100*time.Millisecond) {
		t.Fatal("a disarmed device signalled the descriptor")
	}
	if a.ArmInterrupt() {
		t.Fatal("ArmInterrupt succeeded with a status waiting")
	}
	if v := a.Region().Load64(uapi.RegDrvWait); v != 0 {
		t.Fatalf("DRV_WAIT %d after a refused arm", v)
	}
	if _, ok := a.Poll(); !ok {
		t.Fatal("the waiting status is gone")
	}

	// WaitTail's sleep ends without clearing an arm's DRV_WAIT
	if !a.ArmInterrupt() {
		t.Fatal("ArmInterrupt on an idle device")
	}
	if _, err := a.WaitTail(int64(30 * time.Millisecond)); !errors.Is(err, driver.ErrTimeout) {
		t.Fatalf("WaitTail on an idle device: %v, want ErrTimeout", err)
	}
	if ws := a.WaitStats(); ws.Sleeps == 0 {
		t.Fatalf("wait stats %+v: WaitTail did not sleep, nothing was tested", ws)
	}
	if v := a.Region().Load64(uapi.RegDrvWait); v != 1 {
		t.Fatalf("DRV_WAIT %d after WaitTail's sleep while armed, want 1", v)
	}
	a.DisarmInterrupt()
	if v := a.Region().Load64(uapi.RegDrvWait); v != 0 {
		t.Fatalf("DRV_WAIT %d after the last disarm, want 0", v)
	}
}
