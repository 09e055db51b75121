package netsetup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/vishvananda/netns"
)

// Segment is one Ethernet segment for n stations in a network namespace of
// its own: a bridge and, per station, a veth pair whose one end is on the
// bridge and whose other end (IfName) the station opens with AF_PACKET.
// It is what ranks on AF_PACKET need on one host (tests, `mpbench --link
// afpacket`): several processes' devices on one switch, as hosts on a
// real one, with nothing left in the host's own namespace.
type Segment struct {
	// Name is the namespace's name (under /run/netns).
	Name string
	// NS is a handle to the namespace.
	NS  netns.NsHandle
	ifs []string
}

// segment interface names (inside the segment's own namespace, so they
// cannot clash with the host's).
const (
	segBridge = "dnbr"
	segEnd    = "dnr"  // dnr<i>: station i's end
	segPort   = "dnbp" // dnbp<i>: its peer, on the bridge
)

// NewSegment makes the namespace name (see NewNamespace; name it
// prefix+pid so DeleteOrphans can remove it after a crash) holding a
// bridge and n veth pairs, every interface up with the given MTU (0:
// the kernel's 1500; 9000 carries an 8 KiB payload in one frame). On
// error, what was made is removed.
func NewSegment(name string, n, mtu int) (*Segment, error) {
	ns, err := NewNamespace(name)
	if err != nil {
		return nil, err
	}
	s := &Segment{Name: name, NS: ns}
	fail := func(err error) (*Segment, error) {
		return nil, errors.Join(err, s.Close())
	}
	if err := Bridge(ns, segBridge); err != nil {
		return fail(err)
	}
	h, err := handle("segment "+name, ns)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	br, err := h.LinkByName(segBridge)
	if err != nil {
		return fail(wrap("segment "+name, err))
	}
	for i := range n {
		end, port := fmt.Sprintf("%s%d", segEnd, i), fmt.Sprintf("%s%d", segPort, i)
		if err := VethPair(ns, end, port, nil, nil); err != nil {
			return fail(err)
		}
		for _, ifn := range []string{end, port} {
			l, err := h.LinkByName(ifn)
			if err != nil {
				return fail(wrap("segment: "+ifn, err))
			}
			if mtu != 0 && l.Attrs().MTU != mtu {
				if err := h.LinkSetMTU(l, mtu); err != nil {
					return fail(wrap(fmt.Sprintf("segment: mtu %d on %s", mtu, ifn), err))
				}
			}
			if ifn == port && l.Attrs().MasterIndex != br.Attrs().Index {
				if err := h.LinkSetMaster(l, br); err != nil {
					return fail(wrap("segment: attach "+ifn+" to "+segBridge, err))
				}
			}
		}
		s.ifs = append(s.ifs, end)
	}
	if mtu != 0 { // the bridge follows its ports' MTU only when none was set on it
		if err := h.LinkSetMTU(br, mtu); err != nil {
			return fail(wrap(fmt.Sprintf("segment: mtu %d on %s", mtu, segBridge), err))
		}
	}
	// A port given a new MTU or master settles asynchronously: return
	// only when every interface runs, as VethPair does.
	for i := range s.ifs {
		for _, ifn := range []string{s.ifs[i], fmt.Sprintf("%s%d", segPort, i), segBridge} {
			if err := waitOperUp(h, ifn, 2*time.Second); err != nil {
				return fail(wrap("segment "+name, err))
			}
		}
	}
	return s, nil
}

// IfName is the interface station i opens (i from 0).
func (s *Segment) IfName(i int) string { return s.ifs[i] }

// Start starts c inside the segment's namespace: the process, and
// everything it opens, sees the segment's interfaces as its own, as a
// rank on a host of the segment would.
func (s *Segment) Start(c *exec.Cmd) error {
	// A forked child inherits the namespace of the thread that forks it.
	return Run(s.NS, c.Start)
}

// Close removes the namespace; its bridge and veths go with it once the
// processes and sockets in it are gone.
func (s *Segment) Close() error {
	s.NS.Close()
	return DeleteNamespace(s.Name)
}

// NewSegmentFor is NewSegment for a tool run: the namespace is named
// prefix+pid, and the segments of earlier runs of the tool that were
// killed before they could remove theirs (prefix+pid of a process that is
// gone) are removed first, so repeated crashes leave no pile.
func NewSegmentFor(prefix string, n, mtu int) (*Segment, error) {
	if _, err := DeleteOrphans(prefix); err != nil {
		return nil, err
	}
	return NewSegment(prefix+strconv.Itoa(os.Getpid()), n, mtu)
}
