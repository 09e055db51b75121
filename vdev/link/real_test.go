package link_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"github.com/vishvananda/netns"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/testenv"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// freeUDP returns a loopback address no socket uses right now.
func freeUDP(t testing.TB) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// udpPair opens two UDP ports on loopback that are each other's peer.
func udpPair(t testing.TB, mtu int) (a, b link.Port) {
	t.Helper()
	a, b, _ = udpPairAt(t, mtu)
	return a, b
}

// udpPairAt is udpPair that also returns b's host:port, for a test that
// sends b datagrams of its own.
func udpPairAt(t testing.TB, mtu int) (a, b link.Port, bAddr string) {
	t.Helper()
	ma, mb := wire.NodeMAC(1), wire.NodeMAC(2)
	aa, ab := freeUDP(t), freeUDP(t)
	a, err := link.ListenUDP(aa, ma, map[string]string{mb.String(): ab}, mtu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b, err = link.ListenUDP(ab, mb, map[string]string{ma.String(): aa}, mtu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return a, b, ab
}

// frame builds an Ethernet frame of the given EtherType in a port buffer.
func frame(p link.Port, dst net.HardwareAddr, etype uint16, body []byte) []byte {
	f := append(p.Buffer(), dst...)
	f = append(f, p.MAC()...)
	f = append(f, byte(etype>>8), byte(etype))
	return append(f, body...)
}

// recvWait polls p until a frame of EtherType 0x88B5 arrives (others are
// released and skipped), or fails after d.
func recvWait(t testing.TB, p link.Port, d time.Duration) []byte {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if f := p.Recv(); f != nil {
			if len(f) >= 14 && f[12] == 0x88 && f[13] == 0xb5 {
				return f
			}
			p.Release(f)
			continue
		}
		time.Sleep(100 * time.Microsecond)
	}
	t.Fatalf("no frame on %s within %v", p.MAC(), d)
	return nil
}

// sendRetry sends, retrying on ErrFull (and while a fresh link settles).
func sendRetry(t testing.TB, p link.Port, f []byte) {
	t.Helper()
	for i := 0; ; i++ {
		err := p.Send(f)
		if err == nil {
			return
		}
		if !errors.Is(err, link.ErrFull) || i > 1000 {
			t.Fatalf("send: %v", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits until a fresh link carries frames both ways: the kernel
// turns a new veth or TAP on asynchronously (linkwatch, up to a second for
// a TAP on a bridge) and silently drops what is sent before. Probes that
// arrive late are drained.
func settle(t testing.TB, a, b link.Port) {
	t.Helper()
	for _, pr := range [][2]link.Port{{a, b}, {b, a}} {
		src, dst := pr[0], pr[1]
		end := time.Now().Add(5 * time.Second)
	probe:
		for {
			if time.Now().After(end) {
				t.Fatalf("link %s -> %s never carried a frame", src.MAC(), dst.MAC())
			}
			sendRetry(t, src, frame(src, dst.MAC(), uint16(wire.EtherType), []byte("settle")))
			for range 20 {
				if f := dst.Recv(); f != nil {
					dst.Release(f)
					break probe
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	time.Sleep(20 * time.Millisecond)
	for _, p := range []link.Port{a, b} {
		for f := p.Recv(); f != nil; f = p.Recv() {
			p.Release(f)
		}
	}
}

// exchange sends distinct frames both ways and checks their content.
func exchange(t *testing.T, a, b link.Port) {
	t.Helper()
	for i, pr := range [][2]link.Port{{a, b}, {b, a}, {a, b}} {
		src, dst := pr[0], pr[1]
		body := bytes.Repeat([]byte(fmt.Sprintf("frame %d ", i)), 50)
		sendRetry(t, src, frame(src, dst.MAC(), uint16(wire.EtherType), body))
		got := recvWait(t, dst, 5*time.Second)
		want := frame(src, dst.MAC(), uint16(wire.EtherType), body)
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d: got %d bytes %x..., want %d bytes", i, len(got), got[:min(len(got), 20)], len(want))
		}
		dst.Release(got)
	}
	// Read both ports dry, so their watchers arm again from an empty
	// descriptor and a later test's first notify is for its own frames.
	for _, p := range []link.Port{a, b} {
		for f := p.Recv(); f != nil; f = p.Recv() {
			p.Release(f)
		}
	}
}

func TestUDPExchange(t *testing.T) {
	a, b := udpPair(t, 9000)
	if a.MTU() != 9000 || !bytes.Equal(a.MAC(), wire.NodeMAC(1)) {
		t.Fatalf("MTU %d MAC %s", a.MTU(), a.MAC())
	}
	if f := b.Recv(); f != nil {
		t.Fatalf("Recv on an idle port returned %d bytes", len(f))
	}
	if c, ok := a.(interface{ NeedsCRC() bool }); !ok || !c.NeedsCRC() {
		t.Fatal("a UDP port must ask for the CRC")
	}
	exchange(t, a, b)
	// The largest frame passes whole.
	big := bytes.Repeat([]byte{0xa5}, 9000-14)
	sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), big))
	if f := recvWait(t, b, 5*time.Second); len(f) != 9000 || !bytes.Equal(f[14:], big) {
		t.Fatalf("MTU frame: %d bytes", len(f))
	} else {
		b.Release(f)
	}
	// A frame sent as head and gathered payload arrives as one.
	vs, ok := a.(link.VectorSender)
	if !ok {
		t.Fatal("a UDP port should gather payloads")
	}
	payload := bytes.Repeat([]byte{0x5a}, 4000)
	head := frame(a, b.MAC(), uint16(wire.EtherType), []byte("head"))
	if err := vs.SendVec(head, payload); err != nil {
		t.Fatal(err)
	}
	if f := recvWait(t, b, 5*time.Second); !bytes.Equal(f[14:18], []byte("head")) || !bytes.Equal(f[18:], payload) {
		t.Fatalf("gathered frame: %d bytes", len(f))
	} else {
		b.Release(f)
	}
	if f := b.Recv(); f != nil {
		t.Fatal("Recv after draining returned a frame")
	}
	if p, ok := b.(interface{ Pending() bool }); !ok || p.Pending() {
		t.Fatal("Pending on a drained port")
	}
}

// A burst longer than one receive batch arrives whole and in order through
// the recvmmsg path; a datagram longer than the MTU inside it is counted and
// dropped without costing its neighbours.
func TestUDPBurstThroughBatches(t *testing.T) {
	a, b, ab := udpPairAt(t, 1500)
	raw, err := net.Dial("udp", ab)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	const n = 100
	for i := range n {
		if i == n/2 {
			raw.Write(make([]byte, 1600)) // longer than b's MTU: truncated
		}
		body := fmt.Appendf(nil, "burst %03d", i)
		sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), body))
	}
	for i := range n {
		f := recvWait(t, b, 5*time.Second)
		if want := fmt.Sprintf("burst %03d", i); string(f[14:]) != want {
			t.Fatalf("frame %d: body %q, want %q", i, f[14:], want)
		}
		b.Release(f)
	}
	if d := b.(interface{ Dropped() uint64 }).Dropped(); d != 1 {
		t.Fatalf("dropped %d, want the 1 truncated datagram", d)
	}
}

// Large frames go out on the port's sender goroutine; small ones sent
// meanwhile queue behind them, and a group frame waits (ErrFull) until the
// queue drains: whatever the path, frames arrive whole and in order, and
// Backlog comes back to zero.
func TestUDPQueuedSendsKeepOrder(t *testing.T) {
	a, b := udpPair(t, 9000)
	vs := a.(link.VectorSender)
	bl := a.(link.Backlogger)
	backlog := func() int { n, _ := bl.Backlog([6]byte(b.MAC())); return n }
	const n = 200
	payloads := make([][]byte, n)
	queuedGroup := 0
	for i := range n {
		body := fmt.Appendf(nil, "frame %03d ", i)
		if i%3 == 0 { // small, through Send
			sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), body))
			continue
		}
		payloads[i] = bytes.Repeat([]byte{byte(i)}, 8000)
		for {
			err := vs.SendVec(frame(a, b.MAC(), uint16(wire.EtherType), body), payloads[i])
			if err == nil {
				break
			}
			if !errors.Is(err, link.ErrFull) {
				t.Fatalf("SendVec %d: %v", i, err)
			}
			time.Sleep(100 * time.Microsecond)
		}
		if i == n/2 && backlog() > 0 {
			f := frame(a, wire.BroadcastMAC, uint16(wire.EtherType), []byte("group"))
			if err := a.Send(f); errors.Is(err, link.ErrFull) {
				queuedGroup++
			}
			a.Release(f)
		}
	}
	for i := range n {
		f := recvWait(t, b, 5*time.Second)
		want := fmt.Sprintf("frame %03d ", i)
		if got := string(f[14:min(len(f), 14+len(want))]); got != want {
			t.Fatalf("frame %d: starts %q, want %q", i, got, want)
		}
		if p := payloads[i]; p != nil && !bytes.Equal(f[14+len(want):], p) {
			t.Fatalf("frame %d: payload of %d bytes differs from the %d sent", i, len(f)-14-len(want), len(p))
		}
		b.Release(f)
	}
	end := time.Now().Add(5 * time.Second)
	for backlog() != 0 && time.Now().Before(end) {
		time.Sleep(time.Millisecond)
	}
	if n, last := bl.Backlog([6]byte(b.MAC())); n != 0 || last == 0 {
		t.Fatalf("backlog %d, last sent at %d, after every frame arrived", n, last)
	}
	t.Logf("group frame refused while the queue was busy: %d", queuedGroup)
}

func TestUDPNoRoute(t *testing.T) {
	a, _ := udpPair(t, 1500)
	f := frame(a, wire.NodeMAC(9), uint16(wire.EtherType), []byte("x"))
	if err := a.Send(f); !errors.Is(err, link.ErrNoRoute) {
		t.Fatalf("send to unknown MAC: %v, want ErrNoRoute", err)
	}
	a.Release(f)
	a.Close()
	if err := a.Send(frame(a, wire.NodeMAC(2), uint16(wire.EtherType), nil)); !errors.Is(err, link.ErrClosed) {
		t.Fatalf("send on closed port: %v", err)
	}
	if a.Recv() != nil {
		t.Fatal("Recv on closed port")
	}
}

func TestUDPBroadcast(t *testing.T) {
	a, b := udpPair(t, 1500)
	sendRetry(t, a, frame(a, wire.BroadcastMAC, uint16(wire.EtherType), []byte("all")))
	f := recvWait(t, b, 5*time.Second)
	if string(f[14:]) != "all" {
		t.Fatalf("broadcast body %q", f[14:])
	}
	b.Release(f)
}

// testNotify checks that a frame wakes the notify function once per burst:
// again only after Recv has drained the port.
func testNotify(t *testing.T, a, b link.Port) {
	t.Helper()
	var n atomic.Int32
	ch := make(chan struct{}, 16)
	b.SetNotify(func() {
		n.Add(1)
		select { // never block the watcher: Close waits for it
		case ch <- struct{}{}:
		default:
		}
	})
	for round := range 3 {
		for range 3 {
			sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), []byte("wake up")))
		}
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: no notify", round)
		}
		// Count from the notify the test saw, not from the round's start: a
		// watcher woken by an earlier frame (one exchange read before the
		// watcher ran, or the kernel's own) may notify once more before
		// this round's, and that is not a notify per unread frame.
		seen := n.Load()
		time.Sleep(20 * time.Millisecond) // frames sit unread: no more notifies
		if got := n.Load(); got != seen {
			t.Fatalf("round %d: %d notifies while its frames sat unread, want none", round, got-seen)
		}
		end := time.Now().Add(5 * time.Second)
		for got := 0; got < 3; {
			if time.Now().After(end) {
				t.Fatalf("round %d: %d of 3 frames", round, got)
			}
			if f := b.Recv(); f != nil {
				if f[12] == 0x88 && f[13] == 0xb5 && bytes.HasPrefix(f[14:], []byte("wake up")) {
					got++ // the test's own; anything else is a stray, read and let go
				}
				b.Release(f)
			}
		}
		for b.Recv() != nil { // drain strays and see EAGAIN
		}
	}
}

func TestUDPNotify(t *testing.T) {
	a, b := udpPair(t, 1500)
	testNotify(t, a, b)
}

// testNoAllocs checks that a steady Send+Recv+Release loop allocates nothing.
func testNoAllocs(t *testing.T, a, b link.Port) {
	t.Helper()
	body := make([]byte, 64)
	one := func() {
		f := append(a.Buffer(), b.MAC()...)
		f = append(f, a.MAC()...)
		f = append(f, 0x88, 0xb5)
		f = append(f, body...)
		for a.Send(f) != nil {
		}
		for {
			if g := b.Recv(); g != nil {
				b.Release(g)
				return
			}
		}
	}
	for range 100 { // warm the free lists
		one()
	}
	if allocs := testing.AllocsPerRun(1000, one); allocs > 0.01 {
		t.Fatalf("%.3f allocations per frame", allocs)
	}
}

func TestUDPNoAllocs(t *testing.T) {
	a, b := udpPair(t, 1500)
	testNoAllocs(t, a, b)
}

func TestParsePeers(t *testing.T) {
	in := `# two peers
node 1 127.0.0.1:7001
node 0x2 [::1]:7002   # hex id, IPv6

`
	p, err := link.ParsePeers(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 2 || p[wire.NodeMAC(1).String()] != "127.0.0.1:7001" || p[wire.NodeMAC(2).String()] != "[::1]:7002" {
		t.Fatalf("peers %v", p)
	}
	for _, bad := range []string{"node 1", "host 1 a:1", "node x 127.0.0.1:1", "node 1 nohostport", "node 1 a:1\nnode 1 b:2", "node 70000 a:1"} {
		if _, err := link.ParsePeers(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// needRoot skips a test that needs real network devices when it cannot
// have them.
// testNS makes a fresh namespace, removed when the test ends.
func testNS(t testing.TB, tag string) netns.NsHandle {
	t.Helper()
	testenv.NeedTUN(t, "creates network namespaces and devices")
	name := fmt.Sprintf("dntest-%s-%d", tag, os.Getpid())
	ns, err := netsetup.NewNamespace(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ns.Close()
		if err := netsetup.DeleteNamespace(name); err != nil {
			t.Error(err)
		}
	})
	// No IPv6 on the test's interfaces: its neighbour discovery would add
	// stray frames to the counts (the ports themselves cope with them).
	err = netsetup.Run(ns, func() error {
		for _, k := range []string{"all", "default"} {
			if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Logf("IPv6 stays on: %v", err)
	}
	return ns
}

// vethPorts makes a veth pair in a fresh namespace and opens an AF_PACKET
// port on each end (node MACs 1 and 2 as the interfaces' own).
func vethPorts(t testing.TB) (ns netns.NsHandle, a, b link.Port) {
	ns = testNS(t, "afp")
	if err := netsetup.VethPair(ns, "dnA", "dnB", wire.NodeMAC(1), wire.NodeMAC(2)); err != nil {
		t.Fatal(err)
	}
	err := netsetup.Run(ns, func() (err error) {
		if a, err = link.OpenAFPacket("dnA", nil); err != nil {
			return err
		}
		b, err = link.OpenAFPacket("dnB", nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	settle(t, a, b)
	return ns, a, b
}

func TestAFPacketVeth(t *testing.T) {
	ns, a, b := vethPorts(t)
	if !bytes.Equal(a.MAC(), wire.NodeMAC(1)) || a.MTU() != 1514 {
		t.Fatalf("MAC %s MTU %d: want the interface's", a.MAC(), a.MTU())
	}
	exchange(t, a, b)
	if b.Recv() != nil {
		t.Fatal("Recv on a drained port")
	}

	// A frame of another EtherType from the other end never reaches the
	// port: the socket is bound to 0x88B5, so the kernel filters it.
	var raw *packet.Conn
	err := netsetup.Run(ns, func() error {
		ifi, err := net.InterfaceByName("dnA")
		if err != nil {
			return err
		}
		raw, err = packet.Listen(ifi, packet.Raw, 0x88B6, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	other := frame(a, b.MAC(), 0x88B6, []byte("not dimmnet"))
	if _, err := raw.WriteTo(other, &packet.Addr{HardwareAddr: b.MAC()}); err != nil {
		t.Fatal(err)
	}
	sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), []byte("dimmnet")))
	f := recvWait(t, b, 5*time.Second)
	if string(f[14:]) != "dimmnet" {
		t.Fatalf("got %q", f[14:])
	}
	b.Release(f)
	time.Sleep(10 * time.Millisecond)
	if f := b.Recv(); f != nil {
		t.Fatalf("a frame of EtherType %#x was delivered", uint16(f[12])<<8|uint16(f[13]))
	}
}

func TestAFPacketPromiscuousMAC(t *testing.T) {
	ns, a, _ := vethPorts(t)
	// A port whose MAC is not the interface's still gets its frames (and not
	// the ones for the interface's MAC, which belong to another station).
	var c link.Port
	if err := netsetup.Run(ns, func() (err error) { c, err = link.OpenAFPacket("dnB", wire.NodeMAC(3)); return err }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sendRetry(t, a, frame(a, wire.NodeMAC(2), uint16(wire.EtherType), []byte("for 2")))
	sendRetry(t, a, frame(a, wire.NodeMAC(3), uint16(wire.EtherType), []byte("for 3")))
	f := recvWait(t, c, 5*time.Second)
	if string(f[14:]) != "for 3" {
		t.Fatalf("port with MAC 3 got %q", f[14:])
	}
	c.Release(f)
	// The frame for node 2 came first, and the kernel's station filter
	// kept it from the socket: the port never had to drop it.
	if d := c.(interface{ Dropped() uint64 }).Dropped(); d != 0 {
		t.Fatalf("port with MAC 3 dropped %d frames itself; the BPF filter should have", d)
	}
}

func TestAFPacketNotifyAndAllocs(t *testing.T) {
	_, a, b := vethPorts(t)
	testNotify(t, a, b)
	testNoAllocs(t, a, b)
}

// tapPorts makes a bridge and two TAPs on it in a fresh namespace and opens
// a port on each TAP (node MACs 1 and 2).
func tapPorts(t testing.TB) (a, b link.Port) {
	ns := testNS(t, "tap")
	if err := netsetup.Bridge(ns, "dnbr"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"dntap1", "dntap2"} {
		if err := netsetup.TAP(ns, n, "dnbr", nil); err != nil {
			t.Fatal(err)
		}
	}
	err := netsetup.Run(ns, func() (err error) {
		if a, err = link.OpenTAP("dntap1", wire.NodeMAC(1)); err != nil {
			return err
		}
		b, err = link.OpenTAP("dntap2", wire.NodeMAC(2))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	settle(t, a, b)
	return a, b
}

func TestTAPBridge(t *testing.T) {
	a, b := tapPorts(t)
	if a.MTU() != 1514 {
		t.Fatalf("MTU %d", a.MTU())
	}
	exchange(t, a, b)
	for a.Recv() != nil {
	}
	if f := a.Recv(); f != nil {
		t.Fatal("Recv on a drained TAP")
	}
}

func TestTAPNotifyAndAllocs(t *testing.T) {
	a, b := tapPorts(t)
	exchange(t, a, b) // the bridge learns both MACs
	testNotify(t, a, b)
	testNoAllocs(t, a, b)
}

// pingPong measures the round trip of a frame with an 8-byte payload
// through two ports, each side polling (as a spinning engine does).
func pingPong(b *testing.B, a, c link.Port) {
	body := make([]byte, 8+wire.HeaderLen)
	echo := make(chan struct{})
	var stop atomic.Bool
	go func() {
		defer close(echo)
		for !stop.Load() {
			if f := c.Recv(); f != nil {
				copy(f[0:6], a.MAC())
				copy(f[6:12], c.MAC())
				for c.Send(f) != nil {
				}
			}
		}
	}()
	one := func() {
		f := frame(a, c.MAC(), uint16(wire.EtherType), body)
		for a.Send(f) != nil {
		}
		for {
			if g := a.Recv(); g != nil {
				a.Release(g)
				return
			}
		}
	}
	for range 100 {
		one()
	}
	b.ResetTimer()
	for b.Loop() {
		one()
	}
	b.StopTimer()
	stop.Store(true)
	<-echo
}

func BenchmarkRoundTripUDP(b *testing.B) {
	a, c := udpPair(b, 1500)
	pingPong(b, a, c)
}

func BenchmarkRoundTripAFPacket(b *testing.B) {
	_, a, c := vethPorts(b)
	pingPong(b, a, c)
}

func BenchmarkRoundTripTAP(b *testing.B) {
	a, c := tapPorts(b)
	pingPong(b, a, c)
}

// BenchmarkRoundTripUDPRaw is the baseline for BenchmarkRoundTripUDP: a
// plain Go UDP ping-pong of the same datagram size through the netpoller.
func BenchmarkRoundTripUDPRaw(b *testing.B) {
	lo := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)}
	a, err := net.ListenUDP("udp", lo)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	c, err := net.ListenUDP("udp", lo)
	if err != nil {
		b.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	defer c.Close()
	msg := make([]byte, 14+wire.HeaderLen+8)
	buf := make([]byte, 1500)
	to := c.LocalAddr().(*net.UDPAddr).AddrPort()
	for b.Loop() {
		if _, err := a.WriteToUDPAddrPort(msg, to); err != nil {
			b.Fatal(err)
		}
		if _, _, err := a.ReadFromUDPAddrPort(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// A driver blocks on a UDP port for its next frame (link.FrameWaiter):
// the wait ends for a datagram at the socket, and at once for frames a
// batch took from the socket and has not handed out, which the socket no
// longer shows; with nothing coming it ends by its timeout, and after
// Close it does not block.
func TestUDPWaitFrame(t *testing.T) {
	a, b := udpPair(t, 1500)
	w := link.FrameWaiterOf(b)
	if w == nil {
		t.Fatal("a UDP port is no FrameWaiter")
	}
	if w.WaitFrame(int64(5 * time.Millisecond)) {
		t.Fatal("WaitFrame reported a frame on an empty socket")
	}
	for i := range 3 {
		sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), []byte{byte(i)}))
	}
	if !w.WaitFrame(int64(5 * time.Second)) {
		t.Fatal("WaitFrame ended without the frames sent")
	}
	time.Sleep(20 * time.Millisecond) // all three at the socket
	// The wait took the first frame itself (its blocking recvfrom) and
	// the Recv after it says nil without a system call, as after a short
	// batch; the next look takes one frame (recvfrom), and the third
	// stays at the socket for the next wait, which returns at once.
	for i, want := range []int{0, -1, 1} {
		f := b.Recv()
		if want < 0 {
			if f != nil {
				t.Fatalf("receive %d: got %x, want nil after the wait's frame", i, f)
			}
			continue
		}
		if f == nil || f[14] != byte(want) {
			t.Fatalf("receive %d: got %x, want frame %d", i, f, want)
		}
		b.Release(f)
	}
	if !w.WaitFrame(int64(5 * time.Second)) {
		t.Fatal("WaitFrame did not report the frame waiting at the socket")
	}
	f := b.Recv()
	if f == nil || f[14] != 2 {
		t.Fatalf("frame 2: got %x", f)
	}
	b.Release(f)
	if w.WaitFrame(int64(5 * time.Millisecond)) {
		t.Fatal("WaitFrame reported a frame after the three were received")
	}
	b.Close()
	if w.WaitFrame(int64(time.Second)) {
		t.Fatal("WaitFrame on a closed port reported a frame")
	}
}

// A port without a descriptor (the hub) is no FrameWaiter: its driver
// spins as before.
func TestFrameWaiterOfHub(t *testing.T) {
	hub := link.NewHub(1500, 16)
	p, err := hub.Attach(wire.NodeMAC(1))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if link.FrameWaiterOf(p) != nil {
		t.Fatal("a hub port claims to block on a descriptor")
	}
}

// A frame the wait takes itself (its blocking recvfrom) goes through the
// same checks as one a batch takes: a datagram from an address the peers
// file does not give its source is dropped and counted as spoofed, one
// longer than the MTU as dropped, and the genuine frame after them comes
// through whole.
func TestUDPWaitFrameScreens(t *testing.T) {
	a, b, bAddr := udpPairAt(t, 64)
	w := link.FrameWaiterOf(b)
	stranger, err := net.Dial("udp", bAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	spoof := frame(a, b.MAC(), uint16(wire.EtherType), []byte("spoofed"))
	if _, err := stranger.Write(spoof); err != nil {
		t.Fatal(err)
	}
	long := frame(a, b.MAC(), uint16(wire.EtherType), make([]byte, 100))
	if _, err := stranger.Write(long); err != nil {
		t.Fatal(err)
	}
	sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), []byte("genuine")))
	sc := b.(link.Screener)
	dc := b.(link.DropCounter)
	var got []byte
	for end := time.Now().Add(5 * time.Second); got == nil && time.Now().Before(end); {
		if !w.WaitFrame(int64(time.Millisecond)) {
			continue
		}
		for f := b.Recv(); f != nil; f = b.Recv() {
			if got != nil {
				t.Fatalf("a second frame came through: %q", f[14:])
			}
			got = append([]byte(nil), f...)
			b.Release(f)
		}
	}
	if got == nil || string(got[14:]) != "genuine" {
		t.Fatalf("got %q, want the genuine frame", got)
	}
	if n := sc.Screened().Spoofed; n != 1 {
		t.Errorf("spoofed %d, want 1", n)
	}
	if n := dc.Dropped(); n != 1 {
		t.Errorf("dropped %d, want 1 (the datagram longer than the MTU)", n)
	}
}

// An empty datagram from anyone but the port itself is a runt, counted
// dropped: it is not taken for the wake timer's, whether a deadline wait
// or a pass's receive finds it.
func TestUDPStrangersEmptyDatagramDropped(t *testing.T) {
	_, b, bAddr := udpPairAt(t, 1500)
	c, err := net.Dial("udp", bAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := link.FrameWaiterOf(b)
	for i := range 2 {
		if _, err := c.Write(nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // at the socket before the look
		if i == 0 {
			w.WaitFrame(int64(50 * time.Microsecond)) // a deadline wait takes it
		}
		if f := b.Recv(); f != nil {
			t.Fatalf("datagram %d: an empty datagram was handed out: %x", i, f)
		}
		if n := b.(link.DropCounter).Dropped(); n != uint64(i+1) {
			t.Fatalf("after empty datagram %d: dropped %d, want %d", i, n, i+1)
		}
	}
}

// A wait bounded under preciseNs (a retransmission deadline) on a UDP
// port is ended by the port's wake timer with an empty datagram to
// itself: the wait reports no frame, the empty datagram is never handed
// out nor counted as dropped (whether the wait or a later Recv takes
// it), and real frames still come through whole. Many short waits in a
// row leave nothing behind.
func TestUDPDeadlineWait(t *testing.T) {
	a, b := udpPair(t, 1500)
	w := link.FrameWaiterOf(b)
	for i := range 50 {
		if w.WaitFrame(int64(50 * time.Microsecond)) {
			if f := b.Recv(); f != nil {
				t.Fatalf("wait %d: an empty socket handed out %x", i, f)
			}
		}
	}
	time.Sleep(5 * time.Millisecond) // a wake that came after its wait ended waits at the socket
	if f := b.Recv(); f != nil {
		t.Fatalf("a wake timer's datagram was handed out: %x", f)
	}
	sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), []byte{7}))
	var f []byte
	for i := 0; f == nil && i < 1000; i++ {
		if w.WaitFrame(int64(200 * time.Microsecond)) {
			f = b.Recv()
		}
	}
	if f == nil || f[14] != 7 {
		t.Fatalf("the frame after the deadline waits: got %x", f)
	}
	b.Release(f)
	if n := b.(link.DropCounter).Dropped(); n != 0 {
		t.Fatalf("%d frames counted dropped: the wake timer's datagrams are not drops", n)
	}
	if s := b.(link.Screener).Screened(); s != (link.ScreenCounts{}) {
		t.Fatalf("screened %+v: the wake timer's datagrams come from the port itself", s)
	}
}

// TestUDPLoneFrameEndsTheLook: the look that took a lone frame (one
// recvfrom) ends the pass's looking, so the pass hands the frame on
// without an empty look on its answer's path; the next look takes what
// came since.
func TestUDPLoneFrameEndsTheLook(t *testing.T) {
	a, b := udpPair(t, 1500)
	for b.Recv() != nil { // the socket seen empty: the next look is a lone recvfrom
	}
	for b.Recv() != nil {
	}
	sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), []byte("first")))
	first := recvWait(t, b, 5*time.Second)
	if !bytes.HasSuffix(first, []byte("first")) {
		t.Fatalf("got %q, want the first frame", first)
	}
	b.Release(first)
	sendRetry(t, a, frame(a, b.MAC(), uint16(wire.EtherType), []byte("second")))
	time.Sleep(20 * time.Millisecond) // the second frame waits in the socket
	if f := b.Recv(); f != nil {
		t.Fatalf("the look after a lone frame returned %q, want the pass's end", f)
	}
	second := recvWait(t, b, 5*time.Second)
	if !bytes.HasSuffix(second, []byte("second")) {
		t.Fatalf("got %q, want the second frame", second)
	}
	b.Release(second)
}
