package lmmc

import (
	"fmt"
	"slices"
	"strings"
)

// PTE is a page table entry for one virtual link page. When Valid, Frame
// is the link page frame the page maps (a frame of the connected node's
// receive area for a send page, of the local receive area for a receive
// page); when not, the page's port is not resident and the entry holds the
// port id, as the paper's invalid entries do. Port is kept in both cases.
type PTE struct {
	Valid bool
	Send  bool   // a send page (writes go to Peer) or a receive page (reads of data from Peer)
	Peer  uint16 // the connected node
	Port  uint16
	Frame uint32
}

func (e PTE) String() string {
	dir := "recv"
	if e.Send {
		dir = "send"
	}
	if e.Valid {
		return fmt.Sprintf("%s peer %d port %d -> frame %d", dir, e.Peer, e.Port, e.Frame)
	}
	return fmt.Sprintf("%s peer %d port %d (not resident)", dir, e.Peer, e.Port)
}

// PageTable is a process's page table: virtual link page -> entry.
type PageTable map[uint64]PTE

func (t PageTable) String() string {
	var b strings.Builder
	for _, vp := range sortedKeys(t) {
		fmt.Fprintf(&b, "  vpage %d: %v\n", vp, t[vp])
	}
	return b.String()
}

// FrameTable is a link page frame table: frame Base+i holds port Ports[i]
// (0: free). A connection has a send one (the connected node's receive
// frames our data goes to, by the connected node's frame numbers) and a
// receive one (our frames its data lands in).
type FrameTable struct {
	Base  uint32
	Ports []uint16
}

// Port returns the port frame f holds and whether f is in the table.
func (t *FrameTable) Port(f uint32) (uint16, bool) {
	if f < t.Base || f-t.Base >= uint32(len(t.Ports)) {
		return 0, false
	}
	return t.Ports[f-t.Base], true
}

func (t *FrameTable) String() string {
	var b strings.Builder
	for i, p := range t.Ports {
		fmt.Fprintf(&b, " %d:%d", t.Base+uint32(i), p)
	}
	return strings.TrimSpace(b.String())
}

// Mapping is one (process, virtual link page) that maps a port.
type Mapping struct {
	Proc  *Process
	VPage uint64
}

// PortEntry is a port table entry: where the port is and who maps it.
type PortEntry struct {
	Port     uint16
	Peer     uint16
	Resident bool
	Frame    uint32 // when Resident
	Maps     []Mapping
}

func (e *PortEntry) String() string {
	var b strings.Builder
	if e.Resident {
		fmt.Fprintf(&b, "port %d peer %d frame %d:", e.Port, e.Peer, e.Frame)
	} else {
		fmt.Fprintf(&b, "port %d peer %d out:", e.Port, e.Peer)
	}
	for _, m := range e.Maps {
		fmt.Fprintf(&b, " %s/%d", m.Proc.name, m.VPage)
	}
	return b.String()
}

func sortedKeys[K uint16 | uint64, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
