package link

import (
	"fmt"
	"net"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/vdev/wire"
)

type tapPort struct {
	fdPort
	ifname string
}

// OpenTAP attaches a port to the TAP interface name (made, if it does not
// exist and the caller may, as a non-persistent one), the set-up for
// devices standing in for VMs on a Linux bridge: what the device writes
// enters the bridge, and what the bridge forwards to the TAP is read back.
// Frames pass as is (IFF_NO_PI). Frames of other EtherTypes the kernel sends
// (IPv6 neighbour discovery and the like) are returned too: the device
// counts and ignores them. Unicast frames for other stations, which a
// bridge floods until it learns, are dropped here. mac is the device's
// address; it must differ from the TAP interface's own, or the bridge keeps
// frames for it instead of forwarding them to the TAP. Opening the TAP turns
// its carrier on, and the kernel may take up to a second to let the bridge
// forward to it; frames lost meanwhile are the device's retransmissions.
// Open it in the namespace of the interface (see netsetup.Run).
func OpenTAP(name string, mac net.HardwareAddr) (Port, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("link: tap %s: MAC %q is not 6 bytes", name, mac)
	}
	// Blocking open first: a tun descriptor works with epoll only after
	// TUNSETIFF, so it goes non-blocking (and into the poller) afterwards.
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("link: tap %s: open /dev/net/tun: %w", name, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("link: tap %s: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("link: tap %s: TUNSETIFF: %w", name, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("link: tap %s: non-blocking: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "/dev/net/tun")
	fail := func(err error) (Port, error) {
		f.Close()
		return nil, fmt.Errorf("link: tap %s: %w", name, err)
	}
	ifname := ifr.Name()
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return fail(err)
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return fail(err)
	}
	p := &tapPort{ifname: ifname}
	p.mtu, p.mac, p.kind, p.fd, p.rc, p.conn = ifi.MTU+wire.EthHeaderLen, append(net.HardwareAddr(nil), mac...), kindTAP, fd, rc, f
	p.filter = true
	p.init()
	return p, nil
}

// Send writes the frame into the TAP, which hands it to the bridge.
func (p *tapPort) Send(f []byte) error {
	return p.sendFrame("tap write", p.ifname, f, func(fd int, f []byte) unix.Errno {
		_, _, errno := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&f[0])), uintptr(len(f)))
		return errno
	})
}
