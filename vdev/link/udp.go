package link

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// maxUDPFrame is the largest UDP payload over IPv4.
const maxUDPFrame = 65507

// udpPeer is one destination with its socket address prepared once, so a
// send converts nothing and allocates nothing.
type udpPeer struct {
	name string
	sa   unsafe.Pointer // *unix.RawSockaddrInet4 or *unix.RawSockaddrInet6
	len  uintptr
	tx   txDest // its frames in the transmit queue
}

type udpPort struct {
	fdPort
	tab   atomic.Pointer[udpPeers] // replaced whole by Admit, read without a lock
	admit sync.Mutex               // serialises Admit's copies
	v6    bool
	learn atomic.Bool // admit unknown stations from their first datagram (Learn)
	q     txq         // large frames go out on the sender goroutine

	unknown, spoofed atomic.Uint64 // frames screened out: see Screened
}

// udpPeers is the accepted set of stations: by MAC, and all of them in a
// fixed order for broadcast.
type udpPeers struct {
	byMAC map[[6]byte]*udpPeer
	all   []*udpPeer
}

func (p *udpPort) peer(mac [6]byte) *udpPeer { return p.tab.Load().byMAC[mac] }

// Admitter is a port whose accepted set of stations can grow while it is
// open: a peer learned at run time (a libfabric address vector insert)
// rather than from a peers file.
type Admitter interface {
	// Admit accepts frames from, and sends frames for, station mac at
	// addr (host:port). Admitting a station again at another address is
	// refused with ErrStationMoved.
	Admit(mac net.HardwareAddr, addr string) error
}

// Learner is a port that can admit a station it never heard of from its
// first frame, at the address that frame came from: a program that adds
// its peers lazily (Open MPI inserts a peer's address only when it first
// sends to it) still hears from a peer that sent first.
type Learner interface {
	// Learn turns learning on or off. Learned stations are admitted as
	// Admit admits them; a known station's frames from another address
	// are still dropped as spoofed.
	Learn(on bool)
}

// Learn turns learning of unknown stations on or off.
func (p *udpPort) Learn(on bool) { p.learn.Store(on) }

// learnPeer admits the unknown station mac at the datagram's source.
func (p *udpPort) learnPeer(mac [6]byte, from *unix.RawSockaddrAny) *udpPeer {
	var ua *net.UDPAddr
	switch from.Addr.Family {
	case unix.AF_INET:
		a := (*unix.RawSockaddrInet4)(unsafe.Pointer(from))
		pb := (*[2]byte)(unsafe.Pointer(&a.Port))
		ua = &net.UDPAddr{IP: net.IP(append([]byte(nil), a.Addr[:]...)), Port: int(pb[0])<<8 | int(pb[1])}
	case unix.AF_INET6:
		a := (*unix.RawSockaddrInet6)(unsafe.Pointer(from))
		pb := (*[2]byte)(unsafe.Pointer(&a.Port))
		ua = &net.UDPAddr{IP: net.IP(append([]byte(nil), a.Addr[:]...)), Port: int(pb[0])<<8 | int(pb[1])}
	default:
		return nil
	}
	if err := p.Admit(net.HardwareAddr(mac[:]), ua.String()); err != nil {
		return nil
	}
	return p.peer(mac)
}

// ErrStationMoved reports an Admit of a known station at another address.
var ErrStationMoved = errors.New("link: station already admitted at another address")

// Admit adds station mac at addr to the accepted set.
func (p *udpPort) Admit(mac net.HardwareAddr, addr string) error {
	if len(mac) != 6 {
		return fmt.Errorf("link: udp: MAC %q is not 6 bytes", mac)
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return fmt.Errorf("link: udp: peer %s: %w", mac, err)
	}
	pe, err := newUDPPeer(ua, p.v6)
	if err != nil {
		return fmt.Errorf("link: udp: peer %s: %w", mac, err)
	}
	p.admit.Lock()
	defer p.admit.Unlock()
	old := p.tab.Load()
	if cur := old.byMAC[[6]byte(mac)]; cur != nil {
		if cur.name == pe.name {
			return nil
		}
		return fmt.Errorf("link: udp: %s at %s, not %s: %w", mac, cur.name, pe.name, ErrStationMoved)
	}
	t := &udpPeers{byMAC: make(map[[6]byte]*udpPeer, len(old.byMAC)+1), all: append(old.all[:len(old.all):len(old.all)], pe)}
	for k, v := range old.byMAC {
		t.byMAC[k] = v
	}
	t.byMAC[[6]byte(mac)] = pe
	p.tab.Store(t)
	return nil
}

// ListenUDP opens a port that carries each Ethernet frame as one UDP
// datagram, so devices on any hosts that can route to each other talk
// without privileges. local is the host:port to bind; peers maps each
// remote MAC (as net.HardwareAddr.String spells it) to its host:port; mtu
// is the largest frame (at most 65507). A datagram is received only from
// the address and port peers gives the station its Ethernet source names:
// anyone can send a datagram, so a frame from elsewhere (RX_SPOOFED), or
// naming a station not in peers (RX_UNKNOWN_PEER), is dropped before the
// device keeps anything of it.
func ListenUDP(local string, mac net.HardwareAddr, peers map[string]string, mtu int) (Port, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("link: udp %s: MAC %q is not 6 bytes", local, mac)
	}
	if mtu < wire.EthHeaderLen || mtu > maxUDPFrame {
		return nil, fmt.Errorf("link: udp %s: mtu %d outside [%d, %d]", local, mtu, wire.EthHeaderLen, maxUDPFrame)
	}
	la, err := net.ResolveUDPAddr("udp", local)
	if err != nil {
		return nil, fmt.Errorf("link: udp: local address: %w", err)
	}
	c, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, fmt.Errorf("link: udp: %w", err)
	}
	p := &udpPort{}
	tab := &udpPeers{byMAC: map[[6]byte]*udpPeer{}}
	fail := func(err error) (Port, error) {
		c.Close()
		return nil, fmt.Errorf("link: udp %s: %w", local, err)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return fail(err)
	}
	fd, err := rawFD(rc)
	if err != nil {
		return fail(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return fail(fmt.Errorf("getsockname: %w", err))
	}
	_, v6 := sa.(*unix.SockaddrInet6)
	for m, addr := range peers {
		hw, err := net.ParseMAC(m)
		if err != nil || len(hw) != 6 {
			return fail(fmt.Errorf("peer MAC %q: not a 6-byte MAC", m))
		}
		ua, err := net.ResolveUDPAddr("udp", addr)
		if err != nil {
			return fail(fmt.Errorf("peer %s: %w", m, err))
		}
		pe, err := newUDPPeer(ua, v6)
		if err != nil {
			return fail(fmt.Errorf("peer %s: %w", m, err))
		}
		tab.byMAC[[6]byte(hw)] = pe
		tab.all = append(tab.all, pe)
	}
	p.tab.Store(tab)
	p.v6 = v6
	setSockBufs(fd)
	p.mtu, p.mac, p.kind, p.fd, p.rc, p.conn = mtu, append(net.HardwareAddr(nil), mac...), kindSocket, fd, rc, c
	p.screen = p.fromPeer
	if self, err := unix.Getsockname(fd); err == nil {
		p.self = self
		p.selfWake.Store(true)
	}
	p.init()
	return p, nil
}

// fromPeer admits a frame only from the address peers gives the station
// its Ethernet source names.
func (p *udpPort) fromPeer(f []byte, from *unix.RawSockaddrAny) bool {
	pe := p.peer([6]byte(f[6:12]))
	if pe == nil && p.learn.Load() && f[6]&1 == 0 {
		pe = p.learnPeer([6]byte(f[6:12]), from)
	}
	if pe == nil {
		p.unknown.Add(1)
		return false
	}
	if !pe.is(from) {
		p.spoofed.Add(1)
		return false
	}
	return true
}

// is reports whether from is the peer's own address and port.
func (pe *udpPeer) is(from *unix.RawSockaddrAny) bool {
	switch from.Addr.Family {
	case unix.AF_INET:
		a, b := (*unix.RawSockaddrInet4)(unsafe.Pointer(from)), (*unix.RawSockaddrInet4)(pe.sa)
		return pe.len == unsafe.Sizeof(*b) && b.Family == unix.AF_INET && a.Port == b.Port && a.Addr == b.Addr
	case unix.AF_INET6:
		a, b := (*unix.RawSockaddrInet6)(unsafe.Pointer(from)), (*unix.RawSockaddrInet6)(pe.sa)
		return pe.len == unsafe.Sizeof(*b) && b.Family == unix.AF_INET6 && a.Port == b.Port && a.Addr == b.Addr
	}
	return false
}

// KnowsPeer reports whether mac is in the peers file.
func (p *udpPort) KnowsPeer(mac [6]byte) bool { return p.peer(mac) != nil }

// Vouches is true: the port takes frames only from the peers file's
// addresses.
func (p *udpPort) Vouches() bool { return true }

// Screened counts the datagrams dropped for their source.
func (p *udpPort) Screened() ScreenCounts {
	return ScreenCounts{UnknownPeer: p.unknown.Load(), Spoofed: p.spoofed.Load()}
}

// newUDPPeer prepares the raw socket address of ua for a socket of the
// given family (an IPv6 socket reaches IPv4 peers through mapped addresses).
func newUDPPeer(ua *net.UDPAddr, v6 bool) (*udpPeer, error) {
	pe := &udpPeer{name: ua.String()}
	if ip4 := ua.IP.To4(); ip4 != nil && !v6 {
		sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte(ip4)}
		putPort(&sa.Port, ua.Port)
		pe.sa, pe.len = unsafe.Pointer(sa), unsafe.Sizeof(*sa)
		return pe, nil
	}
	if !v6 {
		return nil, fmt.Errorf("%s: IPv6 peer for an IPv4 socket", ua)
	}
	ip16 := ua.IP.To16()
	if ip16 == nil {
		return nil, fmt.Errorf("%s: no IP address", ua)
	}
	sa := &unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: [16]byte(ip16)}
	putPort(&sa.Port, ua.Port)
	pe.sa, pe.len = unsafe.Pointer(sa), unsafe.Sizeof(*sa)
	return pe, nil
}

// putPort stores port in network byte order.
func putPort(dst *uint16, port int) {
	b := (*[2]byte)(unsafe.Pointer(dst))
	b[0], b[1] = byte(port>>8), byte(port)
}

// Send transmits the frame to the peer owning its destination MAC; a group
// address (broadcast, multicast) goes to every peer and succeeds when at
// least one peer took it.
func (p *udpPort) Send(f []byte) error {
	if len(f) < wire.EthHeaderLen {
		return errors.New("link: udp: runt frame")
	}
	if len(f) > p.mtu {
		return fmt.Errorf("link: udp: frame of %d bytes exceeds mtu %d", len(f), p.mtu)
	}
	if !p.acquire() {
		return ErrClosed
	}
	defer p.release()
	if f[0]&1 == 0 {
		pe := p.peer([6]byte(f[:6]))
		if pe == nil {
			return ErrNoRoute
		}
		if !p.q.idle() { // behind the queued frames, never ahead of them
			return p.q.put(txSlot{head: f, name: pe.name, sa: pe.sa, salen: pe.len, dst: &pe.tx}, p.startSender)
		}
		if err := p.sendTo(f, pe); err != nil {
			return err
		}
		p.Release(f)
		return nil
	}
	all := p.tab.Load().all
	if len(all) == 0 {
		return ErrNoRoute
	}
	if !p.q.idle() {
		return ErrFull // a group frame waits for the queue to drain: order is kept
	}
	var err error
	sent := false
	for _, pe := range all {
		if e := p.sendTo(f, pe); e != nil {
			err = e
		} else {
			sent = true
		}
	}
	if !sent {
		return err
	}
	p.Release(f)
	return nil
}

// SendVec sends a unicast frame as head and payload gathered by the kernel
// (link.VectorSender); a group address goes through Send, to every peer.
// A payload of asyncMin bytes or more, and any frame while others wait, is
// queued for the sender goroutine (see txq): payload must then stay
// unchanged until Backlog shows it sent.
func (p *udpPort) SendVec(head, payload []byte) error {
	if len(head) < wire.EthHeaderLen || head[0]&1 != 0 {
		return p.Send(append(head, payload...))
	}
	pe := p.peer([6]byte(head[:6]))
	if pe == nil {
		return ErrNoRoute
	}
	if len(head)+len(payload) > p.mtu {
		return fmt.Errorf("link: udp send to %s: frame of %d bytes exceeds mtu %d", pe.name, len(head)+len(payload), p.mtu)
	}
	if len(payload) >= asyncMin || !p.q.idle() {
		if !p.acquire() { // Close waits for this: no sender starts after it
			return ErrClosed
		}
		defer p.release()
		return p.q.put(txSlot{head: head, payload: payload, name: pe.name, sa: pe.sa, salen: pe.len, dst: &pe.tx}, p.startSender)
	}
	return p.sendVec("udp send", pe.name, pe.sa, pe.len, head, payload)
}

// Backlog is how many frames for dst the port accepted and has not put on
// the wire yet, and when it last put one there (link.Backlogger).
func (p *udpPort) Backlog(dst [6]byte) (queued int, lastSent int64) {
	pe := p.peer(dst)
	if pe == nil {
		return 0, 0
	}
	return int(pe.tx.queued.Load()), pe.tx.lastSent.Load()
}

// TxErrors counts queued frames the kernel refused for good (not
// backpressure): the device's retransmission recovers them.
func (p *udpPort) TxErrors() uint64 { return p.q.errs.Load() }

// startSender runs the sender goroutine, once, with the first queued frame.
func (p *udpPort) startSender() {
	p.q.send = func(s *txSlot) error {
		for {
			err := p.sendVec("udp send", s.name, s.sa, s.salen, s.head, s.payload)
			if err != ErrFull {
				return err // nil: sendVec released the head
			}
			if p.closed.Load() {
				return ErrClosed
			}
			runtime.Gosched() // the socket buffer is full: the receiver is draining it
		}
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.q.run(p.done, monotime.Now, p.Release)
	}()
}

func (p *udpPort) sendTo(f []byte, pe *udpPeer) error {
	for {
		_, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(p.fd), uintptr(unsafe.Pointer(&f[0])), uintptr(len(f)),
			unix.MSG_DONTWAIT, uintptr(pe.sa), pe.len)
		switch errno {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		if err := sendErr(errno); err == ErrFull {
			return err
		}
		return fmt.Errorf("link: udp send to %s: %w", pe.name, errno)
	}
}

// ParsePeers reads a peers file: one `node <id> <host:port>` line per
// remote device (its MAC is wire.NodeMAC(id), so the file never spells
// MACs), blank lines and `#` comments ignored. The result is ListenUDP's
// peers argument.
func ParsePeers(r io.Reader) (map[string]string, error) {
	peers := map[string]string{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		fs := strings.Fields(s)
		if len(fs) == 0 {
			continue
		}
		if len(fs) != 3 || fs[0] != "node" {
			return nil, fmt.Errorf("link: peers line %d: want `node <id> <host:port>`, got %q", line, sc.Text())
		}
		id, err := strconv.ParseUint(fs[1], 0, 16)
		if err != nil {
			return nil, fmt.Errorf("link: peers line %d: node id %q: %w", line, fs[1], err)
		}
		if _, _, err := net.SplitHostPort(fs[2]); err != nil {
			return nil, fmt.Errorf("link: peers line %d: %w", line, err)
		}
		m := wire.NodeMAC(uint16(id)).String()
		if _, dup := peers[m]; dup {
			return nil, fmt.Errorf("link: peers line %d: node %d listed twice", line, id)
		}
		peers[m] = fs[2]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("link: peers: %w", err)
	}
	return peers, nil
}

// WriteLoopbackPeers writes a peers file (ParsePeers' format) giving each
// of nodes a loopback UDP port free when it was chosen, for a job whose
// devices all run on this host (benchmarks, conformance runs, tests).
// Every port is held until all are chosen, so no two nodes get one port.
func WriteLoopbackPeers(path string, nodes ...uint16) error {
	var b strings.Builder
	held := make([]net.PacketConn, 0, len(nodes))
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, n := range nodes {
		l, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("peers %s: %w", path, err)
		}
		held = append(held, l)
		fmt.Fprintf(&b, "node %d %s\n", n, l.LocalAddr())
	}
	return os.WriteFile(path, []byte(b.String()), 0o600)
}
