package wire

import "net"

// macPrefix is 02:44:4e:00: the 0x02 bit makes the address locally
// administered unicast (never clashes with a vendor-assigned MAC), and
// 0x44 0x4e spell "DN" so dimmnet traffic is recognisable in a capture.
var macPrefix = [4]byte{0x02, 0x44, 0x4e, 0x00}

// BroadcastMAC is the Ethernet broadcast address, for frames every node
// must see (e.g. discovery) where no node number applies.
var BroadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// NodeMAC returns the MAC address of dimmnet node number node,
// 02:44:4e:00:hi:lo. Deriving MACs from node numbers means no address
// resolution protocol is needed: a sender knows the destination MAC from
// DstNode alone. It allocates, so callers on a hot path should cache it.
func NodeMAC(node uint16) net.HardwareAddr {
	return net.HardwareAddr{macPrefix[0], macPrefix[1], macPrefix[2], macPrefix[3], byte(node >> 8), byte(node)}
}

// MACNode is the inverse of NodeMAC: it returns the node number encoded in
// mac and true, or false when mac is not a dimmnet node address (wrong
// length, other prefix, broadcast), so a receiver can reject or ignore
// frames from foreign stations.
func MACNode(mac net.HardwareAddr) (uint16, bool) {
	if len(mac) != 6 || [4]byte(mac[:4]) != macPrefix {
		return 0, false
	}
	return uint16(mac[4])<<8 | uint16(mac[5]), true
}
