package ranks

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
)

// ErrNoInterface reports an afpacket rank whose interface does not exist
// in its network namespace, or that has none: none given, no
// $DIMMNET_IFNAME and no default route to take one from. A rank started
// outside the namespace its interface lives in sees this.
var ErrNoInterface = errors.New("ranks: afpacket: no such network interface")

// ErrNeedRoot reports an afpacket rank without the privilege raw sockets
// need (root, or CAP_NET_RAW): the kernel refused the AF_PACKET socket.
var ErrNeedRoot = errors.New("ranks: afpacket needs root (CAP_NET_RAW)")

// routeFile is the kernel's IPv4 routing table; a variable so a test can
// point the default-interface lookup at a file of its own.
var routeFile = "/proc/net/route"

// DefaultInterface is the interface of the host's IPv4 default route: on
// a cluster node the NIC that reaches the other hosts, so ranks started
// by mpirun without $DIMMNET_IFNAME find the network their peers are on.
// ok is false when there is no default route.
func DefaultInterface() (string, bool) {
	f, err := os.Open(routeFile)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header: Iface Destination Gateway Flags RefCnt Use Metric Mask ...
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 || fs[1] != "00000000" || fs[7] != "00000000" {
			continue
		}
		if fl, err := strconv.ParseUint(fs[3], 16, 32); err != nil || fl&unix.RTF_UP == 0 {
			continue
		}
		return fs[0], true
	}
	return "", false
}

// openAFPacket embeds the device on an AF_PACKET socket bound to the
// rank's interface: its frames carry the device's node MAC as source and
// the peer's node MAC as destination, so every rank on one Ethernet
// segment (a switch, a bridge) reaches every other by node id alone.
func openAFPacket(cfg vdev.Config, o *Options, key *auth.Key) (*vdev.Local, error) {
	if o.IfName == "" {
		o.IfName = os.Getenv("DIMMNET_IFNAME")
	}
	if o.IfName == "" {
		var ok bool
		if o.IfName, ok = DefaultInterface(); !ok {
			return nil, fmt.Errorf("no DIMMNET_IFNAME and no default route to take the interface from: %w", ErrNoInterface)
		}
	}
	if _, err := net.InterfaceByName(o.IfName); err != nil {
		return nil, fmt.Errorf("%q in this network namespace (DIMMNET_IFNAME): %w: %w", o.IfName, ErrNoInterface, err)
	}
	return vdev.NewLocalPorts(cfg, []uint16{o.Node}, func(d *vdev.Device) (link.Port, error) {
		p, err := link.OpenAFPacket(o.IfName, d.MAC())
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("interface %s: %w: %w", o.IfName, ErrNeedRoot, err)
		}
		if err != nil {
			return nil, err
		}
		return auth.Keyed(p, key)
	})
}
