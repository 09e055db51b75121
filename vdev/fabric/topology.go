// Package fabric models the RHiNET-2 switch fabric the multicast paper
// measured on: topologies of 8-port switches, the paper's deadlock-free
// table-lookup routings with their virtual-channel counts, and a
// discrete-event simulator of cut-through packets contending for links
// per virtual channel. It exists because the paper's numbers come from a
// real 64-host cluster: to regenerate its tables the host-side costs must
// be explicit, fitted parameters beside a network that is modelled, not
// folded into one constant.
package fabric

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnknownTopology is returned for a topology name the package does not build.
var ErrUnknownTopology = errors.New("fabric: unknown topology")

// SwitchPorts is the port count of an RHiNET-2/SW switch: a topology that
// needs more on one switch is not one the cluster could be wired as.
const SwitchPorts = 8

// Topology is a set of switches, the hosts hanging off them and the
// inter-switch cables. Host ids follow switch ids (switch 0 holds the first
// hosts), as on the paper's cluster, because HIO and SHIO depend on it.
type Topology struct {
	Name     string // NewTopology's name for it
	Switches int    // switch count; ids 0..Switches-1
	// HostSwitch is the switch each host hangs off, by host id.
	HostSwitch []int
	// Links are the inter-switch cables; parallel cables between one pair
	// are separate entries (the fat trees double their up-links).
	Links [][2]int
	// Cols is the mesh width for 2-D placed topologies (0 otherwise); only
	// documentation and plots use it.
	Cols int
}

// Hosts is the number of hosts.
func (t *Topology) Hosts() int { return len(t.HostSwitch) }

// SwitchHosts lists the hosts on switch s in id order.
func (t *Topology) SwitchHosts(s int) []int {
	var hs []int
	for h, sw := range t.HostSwitch {
		if sw == s {
			hs = append(hs, h)
		}
	}
	return hs
}

// HostSwitches lists, in id order, the switches that hold at least one host.
func (t *Topology) HostSwitches() []int {
	seen := make([]bool, t.Switches)
	var ss []int
	for _, s := range t.HostSwitch {
		if !seen[s] {
			seen[s] = true
			ss = append(ss, s)
		}
	}
	sort.Ints(ss)
	return ss
}

// LocalIndex is a host's rank among the hosts of its switch; routings use
// it to give each destination host a different one of several paths.
func (t *Topology) LocalIndex(h int) int {
	i := 0
	for g := 0; g < h; g++ {
		if t.HostSwitch[g] == t.HostSwitch[h] {
			i++
		}
	}
	return i
}

// Channel is one direction of an inter-switch cable: channel 2l runs
// Links[l][0] -> Links[l][1], 2l+1 the other way.
type Channel struct {
	From, To int // switch ids
}

// Channels lists the directed inter-switch channels, indexed by channel id.
func (t *Topology) Channels() []Channel {
	cs := make([]Channel, 0, 2*len(t.Links))
	for _, l := range t.Links {
		cs = append(cs, Channel{l[0], l[1]}, Channel{l[1], l[0]})
	}
	return cs
}

// Out lists, per switch, the ids of the channels leaving it.
func (t *Topology) Out() [][]int {
	out := make([][]int, t.Switches)
	for i, c := range t.Channels() {
		out[c.From] = append(out[c.From], i)
	}
	return out
}

// Distances is the hop-count matrix between switches (inter-switch cables
// crossed), -1 where unreachable.
func (t *Topology) Distances() [][]int {
	out := t.Out()
	cs := t.Channels()
	d := make([][]int, t.Switches)
	for s := range d {
		d[s] = make([]int, t.Switches)
		for i := range d[s] {
			d[s][i] = -1
		}
		d[s][s] = 0
		q := []int{s}
		for len(q) > 0 {
			u := q[0]
			q = q[1:]
			for _, c := range out[u] {
				v := cs[c].To
				if d[s][v] < 0 {
					d[s][v] = d[s][u] + 1
					q = append(q, v)
				}
			}
		}
	}
	return d
}

// Diameter is the largest switch-to-switch hop count.
func (t *Topology) Diameter() int {
	m := 0
	for _, r := range t.Distances() {
		for _, v := range r {
			if v > m {
				m = v
			}
		}
	}
	return m
}

// Validate checks that the fabric is connected and no switch uses more
// ports than an RHiNET-2/SW has.
func (t *Topology) Validate() error {
	ports := make([]int, t.Switches)
	for _, s := range t.HostSwitch {
		if s < 0 || s >= t.Switches {
			return fmt.Errorf("fabric: %s: host on switch %d of %d", t.Name, s, t.Switches)
		}
		ports[s]++
	}
	for _, l := range t.Links {
		if l[0] == l[1] {
			return fmt.Errorf("fabric: %s: loop cable on switch %d", t.Name, l[0])
		}
		ports[l[0]]++
		ports[l[1]]++
	}
	for s, p := range ports {
		if p > SwitchPorts {
			return fmt.Errorf("fabric: %s: switch %d uses %d ports, has %d", t.Name, s, p, SwitchPorts)
		}
	}
	for _, r := range t.Distances() {
		for v, d := range r {
			if d < 0 {
				return fmt.Errorf("fabric: %s: switch %d unreachable", t.Name, v)
			}
		}
	}
	return nil
}

func hostsOn(switches []int, per int) []int {
	var hs []int
	for _, s := range switches {
		for i := 0; i < per; i++ {
			hs = append(hs, s)
		}
	}
	return hs
}

func seq(a, b int) []int {
	var s []int
	for i := a; i < b; i++ {
		s = append(s, i)
	}
	return s
}

// Mesh is a cols x rows 2-D mesh of switches numbered row-major from the top
// left, with per hosts on each switch.
func Mesh(name string, cols, rows, per int) *Topology {
	t := &Topology{Name: name, Switches: cols * rows, Cols: cols, HostSwitch: hostsOn(seq(0, cols*rows), per)}
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			s := r*cols + c
			if c+1 < cols {
				t.Links = append(t.Links, [2]int{s, s + 1})
			}
			if r+1 < rows {
				t.Links = append(t.Links, [2]int{s, s + cols})
			}
		}
	}
	return t
}

// TopologyA reconstructs the paper's "Topology A" (its Fig. 4 is missing
// from our copy): 16 switches placed 2-D and numbered row-major like the
// mesh, 4 hosts each, irregular. We take the 4x4 mesh without the two
// middle horizontal cables of rows 1 and 2 (switches 5-6 and 9-10): the
// switch-order neighbours SHIO visits (s-8, s-4, s-2, s-1) keep their mesh
// distances, as the paper's SHIO/HIO figures (within 0.5% of the mesh's
// under Up*/Down*, DL and SBP) demand; random pairs are longer on average
// (2.93 switch hops against the mesh's 2.67), as its RO, SHO and 1SHO-3RO
// figures (5-10% above the mesh's) demand; the diameter stays 6, the SBP
// VC count the paper gives; and Up*/Down* loses minimality there (4.05
// switches per message against DL's 3.79), as the paper's Up*/Down*
// column (5% behind DL for RO) suggests. Of the candidates we scored
// against Table 2 (this one, the cables 9-10 and 13-14 instead: diameter
// 7) it fits best; it is still the least certain reconstruction.
func TopologyA() *Topology {
	m := Mesh("topoA", 4, 4, 4)
	t := &Topology{Name: "topoA", Switches: 16, Cols: 4, HostSwitch: m.HostSwitch}
	for _, l := range m.Links {
		if l == [2]int{5, 6} || l == [2]int{9, 10} {
			continue
		}
		t.Links = append(t.Links, l)
	}
	return t
}

// FatTree6 is the 2,4,1 fat tree of 6 switches with 16 hosts: leaves 0-3
// with 4 hosts each, spines 4 and 5, every leaf cabled twice to each spine
// (4 up-links for 4 hosts, so the tree is "fat"; each spine's 8 ports are
// all used, which is why it holds no hosts).
func FatTree6() *Topology {
	t := &Topology{Name: "fattree6", Switches: 6, HostSwitch: hostsOn(seq(0, 4), 4)}
	for l := 0; l < 4; l++ {
		for s := 4; s < 6; s++ {
			t.Links = append(t.Links, [2]int{l, s}, [2]int{l, s})
		}
	}
	return t
}

// FatTree14 is the 2,4,2 fat tree of 14 switches with 16 hosts, 2 on each
// of the 8 bottom switches (0-7). Middle switches 8-11 come in two pods
// (8,9 serve bottoms 0-3; 10,11 serve 4-7), each bottom cabled once to
// both of its pod's middles; each middle is cabled twice to each of the
// top switches 12 and 13.
func FatTree14() *Topology {
	t := &Topology{Name: "fattree14", Switches: 14, HostSwitch: hostsOn(seq(0, 8), 2)}
	for b := 0; b < 8; b++ {
		pod := b / 4
		t.Links = append(t.Links, [2]int{b, 8 + 2*pod}, [2]int{b, 9 + 2*pod})
	}
	for m := 8; m < 12; m++ {
		for top := 12; top < 14; top++ {
			t.Links = append(t.Links, [2]int{m, top}, [2]int{m, top})
		}
	}
	return t
}

// Clos is the Myrinet-style Clos of 8 switches: leaves 0-3 and spines 4-7,
// every leaf cabled once to every spine. With hosts on the spines too
// (32 hosts, 4 per switch) the spines' free ports are used; with 16 hosts
// only the leaves hold hosts.
func Clos(hosts int) *Topology {
	name := fmt.Sprintf("clos%d", hosts)
	t := &Topology{Name: name, Switches: 8}
	if hosts == 32 {
		t.HostSwitch = hostsOn(seq(0, 8), 4)
	} else {
		t.HostSwitch = hostsOn(seq(0, 4), 4)
	}
	for l := 0; l < 4; l++ {
		for s := 4; s < 8; s++ {
			t.Links = append(t.Links, [2]int{l, s})
		}
	}
	return t
}

// TopologyNames lists the names NewTopology accepts.
var TopologyNames = []string{"mesh4x4", "mesh4x2", "topoA", "fattree6", "fattree14", "clos16", "clos32"}

// NewTopology builds a topology by name.
func NewTopology(name string) (*Topology, error) {
	switch name {
	case "mesh4x4", "mesh":
		return Mesh("mesh4x4", 4, 4, 4), nil
	case "mesh4x2":
		return Mesh("mesh4x2", 4, 2, 4), nil
	case "topoA":
		return TopologyA(), nil
	case "fattree6":
		return FatTree6(), nil
	case "fattree14":
		return FatTree14(), nil
	case "clos16":
		return Clos(16), nil
	case "clos32":
		return Clos(32), nil
	}
	return nil, fmt.Errorf("%w: %q (have %v)", ErrUnknownTopology, name, TopologyNames)
}
