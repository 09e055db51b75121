package pairs

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/perf"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// crossDevice opens this host's device as node on medium udp (listening
// on udpAddr, its peer at peerAddr) or afpacket (on ifname).
func crossDevice(node uint16, medium, ifname, udpAddr, peerAddr string, payload int) (*driver.Driver, func(), error) {
	peerNode := 3 - node
	l, err := vdev.NewLocalPorts(vdev.Config{}, []uint16{node}, func(d *vdev.Device) (link.Port, error) {
		switch medium {
		case "udp":
			mtu := min(payload, 65507-wire.FrameOverhead) + wire.FrameOverhead
			return link.ListenUDP(udpAddr, d.MAC(), map[string]string{wire.NodeMAC(peerNode).String(): peerAddr}, mtu)
		case "afpacket":
			if ifname == "" {
				return nil, fmt.Errorf("--link afpacket needs --ifname")
			}
			return link.OpenAFPacket(ifname, d.MAC())
		}
		return nil, fmt.Errorf("--link %q: across hosts, want udp or afpacket", medium)
	})
	if err != nil {
		return nil, nil, err
	}
	d, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return d, func() { d.Close(); l.Close() }, nil
}

// freeUDPPort reserves a UDP port on ip for the device to listen on.
func freeUDPPort(ip string) (string, error) {
	c, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", err
	}
	a := c.LocalAddr().String()
	c.Close()
	return a, nil
}

// The cross-host hello on the TCP control connection: the client is node
// 1 and says "hello 1 MEDIUM UDPPORT"; the server, node 2, answers
// "hello 2 UDPPORT" once its device is open. Then the control protocol
// of package perf runs on the same connection.

// PerfServe waits for one initiator at a time and serves its session.
func PerfServe(medium, ifname string, port, payload, maxSize int, progress func(string)) error {
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Fprintf(os.Stderr, "perf serve: waiting on %v (--link %s)\n", ln.Addr(), medium)
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		if err := serveOne(c, medium, ifname, payload, maxSize); err != nil {
			fmt.Fprintf(os.Stderr, "perf serve: %v: %v\n", c.RemoteAddr(), err)
		}
		c.Close()
	}
}

func serveOne(c net.Conn, medium, ifname string, payload, maxSize int) error {
	in := bufio.NewReader(c)
	var node, peerPort int
	var peerMedium string
	line, err := in.ReadString('\n')
	if err != nil {
		return err
	}
	if _, err := fmt.Sscanf(line, "hello %d %s %d", &node, &peerMedium, &peerPort); err != nil || node != 1 {
		return fmt.Errorf("bad hello %q", line)
	}
	if peerMedium != medium {
		fmt.Fprintf(c, "err the server runs --link %s, not %s\n", medium, peerMedium)
		return fmt.Errorf("the client asked for --link %s", peerMedium)
	}
	lhost, _, _ := net.SplitHostPort(c.LocalAddr().String())
	rhost, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	udpAddr, err := freeUDPPort(lhost)
	if err != nil {
		return err
	}
	d, release, err := crossDevice(2, medium, ifname, udpAddr, net.JoinHostPort(rhost, strconv.Itoa(peerPort)), payload)
	if err != nil {
		fmt.Fprintf(c, "err %v\n", err)
		return err
	}
	defer release()
	b := &pingpong.Side{D: d, Peer: 1}
	if err := pingpong.SetupSide(b, maxSize); err != nil {
		return err
	}
	_, p, _ := net.SplitHostPort(udpAddr)
	fmt.Fprintf(c, "hello 2 %s\n", p)
	return perf.Serve(b, rw{in, c})
}

// rw joins a buffered reader with the connection it reads.
type rw struct {
	*bufio.Reader
	net.Conn
}

func (x rw) Read(p []byte) (int, error) { return x.Reader.Read(p) }

// PerfDialHost opens this host's device as node 1 and pairs it with
// host's perf serve.
func PerfDialHost(host, medium, ifname string, port, payload, maxSize int) (*perf.Pair, error) {
	c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	lhost, _, _ := net.SplitHostPort(c.LocalAddr().String())
	rhost, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	udpAddr, err := freeUDPPort(lhost)
	if err != nil {
		c.Close()
		return nil, err
	}
	_, myPort, _ := net.SplitHostPort(udpAddr)
	fmt.Fprintf(c, "hello 1 %s %s\n", medium, myPort)
	in := bufio.NewReader(c)
	line, err := in.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("perf serve on %s: %w", host, err)
	}
	var peerPort int
	if _, err := fmt.Sscanf(line, "hello 2 %d", &peerPort); err != nil {
		c.Close()
		return nil, fmt.Errorf("perf serve on %s: %s", host, strings.TrimSpace(line))
	}
	d, release, err := crossDevice(1, medium, ifname, udpAddr, net.JoinHostPort(rhost, strconv.Itoa(peerPort)), payload)
	if err != nil {
		c.Close()
		return nil, err
	}
	a, err := SideSetup(d, maxSize)(2)
	if err != nil {
		release()
		c.Close()
		return nil, err
	}
	return perf.Remote(a, rw{in, c}, medium+" (hosts)").OnClose(func() error { release(); return nil }), nil
}
