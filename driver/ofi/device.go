//go:build dimmnet_ofi

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/vdev/link"
	"golang.org/x/sys/unix"
)

// device is an endpoint's own dimmnet device, embedded in this process as
// an FMPL rank's is (package driver/ranks), on the medium FI_DIMMNET_LINK names.
type device struct {
	rd     *ranks.Device // nil on pci, where closing drv releases the function
	drv    *driver.Driver
	node   uint16
	addr   [addrLen]byte
	medium string
	netns  uint32
}

// maxShmNode bounds the search for a free node id on the shared-memory
// medium: GPIDs (node x 16 + process) stay inside 32 bits and a directory
// scan stays short.
const maxShmNode = 4095

func regionBytes() int {
	if v, err := strconv.Atoi(param("region_mb")); err == nil && v >= 8 {
		return v << 20
	}
	return 64 << 20
}

// netnsID is the inode of this process's network namespace: processes
// in two namespaces are two hosts, whatever /dev/shm and /tmp they share.
func netnsID() uint32 {
	l, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return 0
	}
	l = strings.TrimSuffix(strings.TrimPrefix(l, "net:["), "]")
	v, _ := strconv.ParseUint(l, 10, 64)
	return uint32(v)
}

func openDevice() (*device, error) {
	medium := param("link")
	if medium == "" {
		medium = "shm"
	}
	switch medium {
	case "shm":
		return openShm()
	case "udp":
		return openUDP()
	case "pci":
		return openPCI()
	}
	return nil, fmt.Errorf("FI_DIMMNET_LINK=%q: want shm, udp or pci", medium)
}

// openShm claims the first free node id in the per-user, per-namespace
// rendezvous directory, so processes that never heard of each other (two
// fi_pingpong started by hand) each get one and meet there.
func openShm() (*device, error) {
	ns := netnsID()
	dir := param("dir")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), fmt.Sprintf("dimmnet-ofi-%d-%d", os.Getuid(), ns))
	}
	first := uint16(1)
	if v, err := strconv.ParseUint(param("node"), 10, 16); err == nil && v > 0 {
		first = uint16(v)
	}
	for node := first; node <= maxShmNode; node++ {
		rd, err := ranks.Open(ranks.Options{Link: "shm", Dir: dir, Node: node, RegionSize: regionBytes()})
		if errors.Is(err, link.ErrNodeInUse) {
			if param("node") != "" {
				return nil, fmt.Errorf("FI_DIMMNET_NODE=%d: %w", node, err)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		return &device{rd: rd, drv: rd.Driver, node: node, medium: "shm", netns: ns,
			addr: makeAddr(mediumShm, node, nil, ns)}, nil
	}
	return nil, fmt.Errorf("shm %s: nodes %d..%d all held: %w", dir, first, maxShmNode, errNoNode)
}

// admit lets a peer's frames in: on shm every process of the directory
// is reachable already; udp adds the peer to the port's accepted set.
func (d *device) admit(a address) error {
	switch {
	case d.medium == "shm" && a.medium != mediumShm, d.medium == "udp" && a.medium != mediumUDP,
		d.medium == "pci" && a.medium != mediumPCI:
		return fmt.Errorf("node %d: %w", a.node, errOtherMedium)
	case d.medium == "shm" && a.netns != d.netns:
		return fmt.Errorf("node %d: %w", a.node, errOtherNetns)
	case a.node == d.node && a.raw != d.addr:
		return fmt.Errorf("node %d is ours: %w", a.node, errCollision)
	}
	if d.medium == "udp" {
		return d.admitUDP(a)
	}
	return nil
}

func (d *device) close() {
	if d.rd == nil {
		if err := d.drv.Close(); err != nil {
			logf("close pci node %d: %v", d.node, err)
		}
		return
	}
	if err := d.rd.Close(); err != nil {
		logf("close node %d: %v", d.node, err)
	}
}

// udpPortBase is where a udp endpoint's port search starts: the k-th
// endpoint of a host (k = 1..255) binds udpPortBase+k and is node
// (last octet of its address)<<8 | k, so endpoints on hosts whose
// addresses differ in the last octet never collide, and two that do
// are named by fi_av_insert (errCollision) instead of crossing frames.
const udpPortBase = 47300

// openUDP binds the first free port of the udp range on the address
// FI_DIMMNET_UDP_ADDR names (default: this namespace's first
// non-loopback IPv4 address, so two network namespaces joined by a
// veth are two hosts).
func openUDP() (*device, error) {
	ip := net.ParseIP(param("udp_addr")).To4()
	if ip == nil {
		var err error
		if ip, err = firstIPv4(); err != nil {
			return nil, err
		}
	}
	for k := 1; k < 256; k++ {
		node := uint16(ip[3])<<8 | uint16(k)
		if v, err := strconv.ParseUint(param("node"), 10, 16); err == nil && v > 0 {
			node = uint16(v)
		}
		ua := &net.UDPAddr{IP: ip, Port: udpPortBase + k}
		rd, err := ranks.Open(ranks.Options{Link: "udp", UDPLocal: ua.String(), Learn: true, Node: node, RegionSize: regionBytes()})
		if errors.Is(err, unix.EADDRINUSE) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &device{rd: rd, drv: rd.Driver, node: node, medium: "udp", addr: makeAddr(mediumUDP, node, ua, 0)}, nil
	}
	return nil, fmt.Errorf("udp %s: ports %d..%d all taken: %w", ip, udpPortBase+1, udpPortBase+255, errNoNode)
}

func firstIPv4() (net.IP, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagUp == 0 || i.Flags&net.FlagLoopback != 0 {
			continue
		}
		as, _ := i.Addrs()
		for _, a := range as {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP.To4(), nil
			}
		}
	}
	return net.IPv4(127, 0, 0, 1).To4(), nil
}

// admitUDP adds a peer to the udp port's accepted set.
func (d *device) admitUDP(a address) error {
	if err := d.rd.Admit(a.node, a.udpAddr()); err != nil {
		return fmt.Errorf("node %d at %s: %w", a.node, a.udpAddr(), err)
	}
	return nil
}

// openPCI drives this machine's dimmnet PCI function (a lab guest's
// device, bound to vfio-pci by the guest's init, or mapped through sysfs
// without an IOMMU): the device and its node id are the daemon's, which
// links it to its peers, so every pci address is reachable and admit has
// nothing to add. One endpoint at a time: the function has one command
// queue.
func openPCI() (*device, error) {
	bdfs, err := driver.FindPCI()
	if err != nil {
		return nil, fmt.Errorf("pci: %w", err)
	}
	t, err := driver.AttachPCI(bdfs[0])
	if err != nil {
		return nil, fmt.Errorf("pci %s: %w", bdfs[0], err)
	}
	drv, err := driver.Open(t)
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("pci %s: %w", bdfs[0], err)
	}
	node := drv.Node()
	logf("pci %s: node %d, attached through %s", bdfs[0], node, driver.AttachKind(t))
	return &device{drv: drv, node: node, medium: "pci", addr: makeAddr(mediumPCI, node, nil, 0)}, nil
}
