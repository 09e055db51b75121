package link

import (
	"bytes"
	"fmt"
	"net"
	"unsafe"

	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/vdev/wire"
)

type afPacketPort struct {
	fdPort
	ifname string
}

// OpenAFPacket attaches a port to a network interface with an AF_PACKET
// socket bound to the dimmnet EtherType, so the kernel hands it dimmnet
// frames only and the device works over any Ethernet (a veth in a test
// namespace, a real NIC between hosts) without cgo. mac is the address the
// device answers to; nil means the interface's own. A different MAC turns on
// promiscuous mode, because a real NIC drops frames for addresses it does
// not own (a veth does not). The MTU is the interface's plus the Ethernet
// header. Open it in the namespace of the interface (see netsetup.Run).
func OpenAFPacket(ifname string, mac net.HardwareAddr) (Port, error) {
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		return nil, fmt.Errorf("link: afpacket: %w", err)
	}
	if mac == nil {
		mac = ifi.HardwareAddr
	}
	if len(mac) != 6 {
		return nil, fmt.Errorf("link: afpacket %s: MAC %q is not 6 bytes", ifname, mac)
	}
	c, err := packet.Listen(ifi, packet.Raw, int(wire.EtherType), nil)
	if err != nil {
		return nil, fmt.Errorf("link: afpacket %s: %w", ifname, err)
	}
	fail := func(err error) (Port, error) {
		c.Close()
		return nil, fmt.Errorf("link: afpacket %s: %w", ifname, err)
	}
	if err := c.SetBPF(stationFilter(mac)); err != nil {
		return fail(fmt.Errorf("station filter: %w", err))
	}
	if !bytes.Equal(mac, ifi.HardwareAddr) {
		if err := c.SetPromiscuous(true); err != nil {
			return fail(fmt.Errorf("promiscuous mode for MAC %s: %w", mac, err))
		}
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return fail(err)
	}
	fd, err := rawFD(rc)
	if err != nil {
		return fail(err)
	}
	setSockBufs(fd)
	// Other sockets' frames leaving this interface are not for us
	// (Linux 4.20+; older kernels deliver them and the MAC filter drops them).
	_ = unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1)
	p := &afPacketPort{ifname: ifname}
	p.mtu, p.mac, p.kind, p.fd, p.rc, p.conn = ifi.MTU+wire.EthHeaderLen, append(net.HardwareAddr(nil), mac...), kindSocket, fd, rc, c
	p.filter = true
	p.init()
	return p, nil
}

// stationFilter is a classic BPF program that passes a frame only when it
// is for mac or a group address. The kernel then drops, before any copy or
// system call of ours, the frames for other stations a promiscuous socket
// sees (sibling devices on one NIC or bridge); the port's own MAC check
// stays for the frames that arrived before the filter was attached.
func stationFilter(mac net.HardwareAddr) []bpf.RawInstruction {
	hi := uint32(mac[0])<<24 | uint32(mac[1])<<16 | uint32(mac[2])<<8 | uint32(mac[3])
	lo := uint32(mac[4])<<8 | uint32(mac[5])
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 0, Size: 1},                        // first byte of the destination
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: 1, SkipTrue: 4},   // group address: keep
		bpf.LoadAbsolute{Off: 0, Size: 4},                        // destination bytes 0-3
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: hi, SkipTrue: 3}, // not ours: drop
		bpf.LoadAbsolute{Off: 4, Size: 2},                        // destination bytes 4-5
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: lo, SkipTrue: 1},
		bpf.RetConstant{Val: 1 << 18}, // keep the whole frame
		bpf.RetConstant{Val: 0},       // drop
	})
	if err != nil {
		panic(fmt.Sprintf("link: station filter does not assemble: %v", err)) // a fixed program: a bug here, not bad input
	}
	return prog
}

// Send writes the frame as is; the socket is bound to the interface and
// EtherType, so the kernel needs no address and the frame's own
// destination MAC steers it.
func (p *afPacketPort) Send(f []byte) error {
	return p.sendFrame("afpacket send", p.ifname, f, func(fd int, f []byte) unix.Errno {
		_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&f[0])), uintptr(len(f)), unix.MSG_DONTWAIT, 0, 0)
		return errno
	})
}
