package pingpong

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/testenv"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// udpPair is two devices on UDP loopback ports with the given packet payload.
func udpPair(tb testing.TB, payload, maxSize int) (*Side, *Side) {
	tb.Helper()
	addrs := map[uint16]string{}
	for _, n := range []uint16{1, 2} {
		l, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addrs[n] = l.LocalAddr().String()
		l.Close()
	}
	return portPair(tb, maxSize, func(d *vdev.Device) (link.Port, error) {
		peer := 3 - d.Node()
		return link.ListenUDP(addrs[d.Node()], d.MAC(), map[string]string{wire.NodeMAC(peer).String(): addrs[peer]}, payload+wire.FrameOverhead)
	})
}

func portPair(tb testing.TB, maxSize int, open func(d *vdev.Device) (link.Port, error)) (*Side, *Side) {
	return portPairVerify(tb, maxSize, false, open)
}

// portPairVerify is portPair with both sides' Verify set as asked.
func portPairVerify(tb testing.TB, maxSize int, verify bool, open func(d *vdev.Device) (link.Port, error)) (*Side, *Side) {
	tb.Helper()
	l, err := vdev.NewLocalPorts(vdev.Config{}, []uint16{1, 2}, open)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	var s [2]*Side
	for i, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			tb.Fatal(err)
		}
		s[i] = &Side{D: d, Peer: l.Devices[1-i].Node(), Verify: verify}
	}
	if err := Setup(s[0], s[1], maxSize); err != nil {
		tb.Fatal(err)
	}
	return s[0], s[1]
}

// rawUDP is the baseline: a plain Go UDP ping-pong of frame-sized
// datagrams, n bytes each way per round trip cut into chunk-sized
// datagrams (the device's packets). It returns RTT/2 in µs.
func rawUDP(tb testing.TB, n, chunk, iters int) float64 {
	a, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	defer a.Close()
	b, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	for _, c := range []*net.UDPConn{a, b} {
		c.SetReadBuffer(4 << 20)
		c.SetWriteBuffer(4 << 20)
	}
	frame := make([]byte, chunk+wire.FrameOverhead)
	send := func(c *net.UDPConn, to net.Addr) {
		for left := n; left > 0; left -= chunk {
			m := min(left, chunk) + wire.FrameOverhead
			c.WriteTo(frame[:m], to)
		}
	}
	recv := func(c *net.UDPConn, buf []byte) {
		for left := n; left > 0; left -= chunk {
			c.Read(buf)
		}
	}
	done := make(chan struct{})
	go func() {
		buf := make([]byte, 65536)
		for i := 0; i < iters; i++ {
			recv(b, buf)
			send(b, a.LocalAddr())
		}
		close(done)
	}()
	buf := make([]byte, 65536)
	start := monotime.Now()
	for i := 0; i < iters; i++ {
		send(a, b.LocalAddr())
		recv(a, buf)
	}
	el := monotime.Now() - start
	<-done
	return float64(el) / float64(iters) / 2 / 1e3
}

// The device's 8-byte round trip over UDP on loopback beside a plain Go UDP
// ping-pong of the same frame size, in the same run (target: within 1.5x).
func BenchmarkUDP8B(b *testing.B) {
	a, c := udpPair(b, 8192, 8)
	raw := rawUDP(b, 8, 8, 2000)
	benchRTT(b, a, c, raw)
}

// 1 MiB bandwidth over UDP beside a plain UDP stream of the device's packet
// size, both as ping-pongs of 1 MiB (target: at least 70%).
func BenchmarkUDP1MiB(b *testing.B) {
	const payload = 32 << 10
	a, c := udpPair(b, payload, 1<<20)
	raw := rawUDP(b, 1<<20, payload, 50)
	benchMiB(b, a, c, raw)
}

// vethNS makes a namespace with a veth pair dnb1/dnb2 (9000-byte MTU) for
// an AF_PACKET benchmark, removed at the end.
func vethNS(b *testing.B) netns.NsHandle {
	testenv.NeedRoot(b, "opens AF_PACKET sockets")
	ns, err := netsetup.NewNamespace("dimmnet-bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ns.Close(); netsetup.DeleteNamespace("dimmnet-bench") })
	if err := netsetup.VethPair(ns, "dnb1", "dnb2", nil, nil); err != nil {
		b.Fatal(err)
	}
	err = netsetup.Run(ns, func() error {
		for _, n := range []string{"dnb1", "dnb2"} {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetMTU(l, 9000); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return ns
}

func afpacketPair(b *testing.B, ns netns.NsHandle, maxSize int) (*Side, *Side) {
	return portPair(b, maxSize, func(d *vdev.Device) (link.Port, error) {
		var p link.Port
		err := netsetup.Run(ns, func() error {
			var err error
			p, err = link.OpenAFPacket([]string{"", "dnb1", "dnb2"}[d.Node()], d.MAC())
			return err
		})
		return p, err
	})
}

// rawAFPacket is the AF_PACKET baseline: two plain packet sockets on the
// veth ends bounce n bytes each way per round trip, in frames of chunk
// bytes of payload (the device's frame size), with no device model. It
// returns RTT/2 in µs.
func rawAFPacket(b *testing.B, ns netns.NsHandle, n, chunk, iters int) float64 {
	var conns [2]*packet.Conn
	var macs [2]net.HardwareAddr
	err := netsetup.Run(ns, func() error {
		for i, name := range []string{"dnb1", "dnb2"} {
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				return err
			}
			if conns[i], err = packet.Listen(ifi, packet.Raw, int(wire.EtherType), nil); err != nil {
				return err
			}
			sc, err := conns[i].SyscallConn()
			if err != nil {
				return err
			}
			sc.Control(func(fd uintptr) { // 4 MiB buffers, as the device's ports have
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
			})
			macs[i] = ifi.HardwareAddr
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer conns[0].Close()
	defer conns[1].Close()
	frame := make([]byte, chunk+wire.FrameOverhead)
	mk := func(dst, src net.HardwareAddr) []byte {
		f := append([]byte{}, frame...)
		copy(f, dst)
		copy(f[6:], src)
		binary.BigEndian.PutUint16(f[12:], uint16(wire.EtherType))
		return f
	}
	f01, f10 := mk(macs[1], macs[0]), mk(macs[0], macs[1])
	send := func(c *packet.Conn, f []byte, to net.HardwareAddr) {
		for left := n; left > 0; left -= chunk {
			c.WriteTo(f[:min(left, chunk)+wire.FrameOverhead], &packet.Addr{HardwareAddr: to})
		}
	}
	recv := func(c *packet.Conn, buf []byte) {
		for left := n; left > 0; left -= chunk {
			c.SetReadDeadline(time.Now().Add(2 * time.Second)) // a lost frame must not hang the benchmark
			if _, _, err := c.ReadFrom(buf); err != nil {
				return
			}
		}
	}
	// A fresh veth drops frames until it is fully up: probe until one passes.
	probe := make([]byte, 65536)
	for i := 0; ; i++ {
		conns[0].WriteTo(f01[:wire.FrameOverhead], &packet.Addr{HardwareAddr: macs[1]})
		conns[1].SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, _, err := conns[1].ReadFrom(probe); err == nil {
			break
		}
		if i == 100 {
			b.Fatal("the veth pair never carried a frame")
		}
	}
	done := make(chan struct{})
	go func() {
		buf := make([]byte, 65536)
		for i := 0; i < iters; i++ {
			recv(conns[1], buf)
			send(conns[1], f10, macs[0])
		}
		close(done)
	}()
	buf := make([]byte, 65536)
	start := monotime.Now()
	for i := 0; i < iters; i++ {
		send(conns[0], f01, macs[1])
		recv(conns[0], buf)
	}
	el := monotime.Now() - start
	<-done
	return float64(el) / float64(iters) / 2 / 1e3
}

// The device's 8-byte round trip over AF_PACKET on a veth pair beside a
// plain AF_PACKET ping-pong of the same frame size, in the same run.
func BenchmarkAFPacket8B(b *testing.B) {
	ns := vethNS(b)
	raw := rawAFPacket(b, ns, 8, 8, 2000)
	a, c := afpacketPair(b, ns, 8)
	benchRTT(b, a, c, raw)
}

// 1 MiB over AF_PACKET (9000-byte frames) beside a plain AF_PACKET stream of
// the same frames.
func BenchmarkAFPacket1MiB(b *testing.B) {
	ns := vethNS(b)
	a, c := afpacketPair(b, ns, 1<<20)
	payload := int(a.D.MTU())
	raw := rawAFPacket(b, ns, 1<<20, payload, 20)
	benchMiB(b, a, c, raw)
}

// benchRTT measures the device's 8-byte PUSH round trip beside raw, the
// baseline's RTT/2 in µs measured in the same run.
func benchRTT(b *testing.B, a, c *Side, raw float64) {
	b.ResetTimer()
	r, err := Run(a, c, ModePush, CondLinkMem, 8, 100, b.N)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.RTTHalfUs, "rtt_half_us")
	b.ReportMetric(r.RTTHalfP50Us, "rtt_half_p50_us")
	b.ReportMetric(raw, "raw_rtt_half_us")
	b.ReportMetric(r.RTTHalfUs/raw, "x_raw")
	b.ReportMetric(float64(r.Retransmits), "retransmits")
}

// benchMiB measures 1 MiB PUSH ping-pongs beside raw, the baseline's RTT/2
// in µs for 1 MiB each way.
func benchMiB(b *testing.B, a, c *Side, raw float64) {
	b.ResetTimer()
	r, err := Run(a, c, ModePush, CondLinkMem, 1<<20, 3, b.N)
	if err != nil {
		b.Fatal(err)
	}
	rawMBps := float64(1<<20) / raw
	b.ReportMetric(r.MBps, "MB/s")
	b.ReportMetric(rawMBps, "raw_MB/s")
	b.ReportMetric(r.MBps/rawMBps, "x_raw")
	b.ReportMetric(float64(r.Retransmits), "retransmits")
}
