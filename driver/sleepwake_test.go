package driver_test

import (
	"net"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// A driver whose wait outlasts its spin sleeps, and its device goes back
// to the device's engine, which is parked: the frame's arrival on the
// socket must wake that engine, whose pass places the frame and
// interrupts the driver. The driver counts a sleep the device's signal
// ended apart from one its 10 ms timer ended (WaitStats.TimerWakes): a
// lost wake-up anywhere on that path shows as sleeps only the timer
// ends, whatever the machine's speed. Two devices with an engine each on
// UDP loopback, as two rank processes have (driver/ranks).
func TestSleepingDriverWokenByFrame(t *testing.T) {
	t.Setenv("DIMMNET_SPIN_NS", "0") // every wait sleeps at its first chance
	a, b := udpDrivers(t)
	const exchanges = 20
	irqs := a.Region().Load64(uapi.RegInterrupts)
	next, sent := make(chan struct{}), make(chan error, 1)
	go func() {
		for range next {
			// Push only once a is asleep on its interrupt.
			for a.Region().Load64(uapi.RegDrvWait) == 0 {
				time.Sleep(50 * time.Microsecond)
			}
			if _, err := b.Push(1, 0, 0, 8, 0, 0); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for i := range exchanges {
		next <- struct{}{}
		st, err := a.Wait(int64(30 * time.Second))
		if err != nil || st.Type != uapi.StPUSH {
			t.Fatalf("exchange %d: status %v, %v", i, st, err)
		}
	}
	close(next)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	ws := a.WaitStats()
	if ws.Sleeps == 0 || ws.Spun == ws.Waits {
		t.Fatalf("wait stats %+v: the waits did not sleep, nothing was tested", ws)
	}
	if ws.Sleeps-ws.TimerWakes == 0 {
		t.Fatalf("wait stats %+v: every sleep ended by its timer, none by the frame's arrival", ws)
	}
	if got := a.Region().Load64(uapi.RegInterrupts); got == irqs {
		t.Fatalf("the device never interrupted its sleeping driver (INTERRUPTS %d)", got)
	}
	t.Logf("wait stats %+v, interrupts %d", ws, a.Region().Load64(uapi.RegInterrupts)-irqs)
}

// udpDrivers opens nodes 1 and 2, each its own device with an engine on
// UDP loopback as two rank processes have (driver/ranks), and a driver
// on each.
func udpDrivers(t *testing.T) (a, b *driver.Driver) {
	t.Helper()
	drv, _ := udpDriversWrapped(t, nil)
	return drv[0], drv[1]
}

// udpDriversWrapped is udpDrivers with each node's UDP port wrapped by
// wrap (nil: as it is), also returning the devices.
func udpDriversWrapped(t *testing.T, wrap func(n uint16, p link.Port) link.Port) (drv [2]*driver.Driver, devs [2]*vdev.Device) {
	t.Helper()
	addrs := []string{freeUDPAddr(t), freeUDPAddr(t)}
	for i, n := range []uint16{1, 2} {
		peer := uint16(3 - n)
		l, err := vdev.NewLocalPorts(vdev.Config{}, []uint16{n}, func(d *vdev.Device) (link.Port, error) {
			p, err := link.ListenUDP(addrs[i], d.MAC(), map[string]string{wire.NodeMAC(peer).String(): addrs[1-i]}, 9000)
			if err != nil || wrap == nil {
				return p, err
			}
			return wrap(n, p), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		d, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		drv[i], devs[i] = d, l.Devices[0]
	}
	return drv, devs
}

func freeUDPAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}
