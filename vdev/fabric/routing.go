package fabric

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnknownRouting is returned for a routing name the package does not build.
var ErrUnknownRouting = errors.New("fabric: unknown routing")

// ErrNoPath is returned when a routing leaves a switch pair unconnected.
var ErrNoPath = errors.New("fabric: routing has no path")

// Hop is one inter-switch channel of a path and the virtual channel the
// packet holds on it.
type Hop struct {
	Channel int // index into Topology.Channels
	VC      int // data virtual channel, 0..VCs-1
}

// Routing is a fixed, table-lookup routing: one path per source switch and
// destination host, as RHiNET-2/SW's tables give (indexed by destination;
// the VC from the input and output port).
type Routing struct {
	Name string // NewRouting's name for it
	// VCs is how many data virtual channels the routing uses.
	VCs  int
	topo *Topology
	// paths[src switch][dst host]
	paths [][][]Hop
}

// Path is the inter-switch hops a packet from a host on switch src takes to
// host dst (empty when dst hangs off src).
func (r *Routing) Path(src, dst int) []Hop { return r.paths[src][dst] }

// Topology is the topology the routing was built for.
func (r *Routing) Topology() *Topology { return r.topo }

// Switches is the number of switches a packet from host a to host b
// passes through, the figure per-hop delay multiplies.
func (r *Routing) Switches(a, b int) int {
	return len(r.paths[r.topo.HostSwitch[a]][b]) + 1
}

// RoutingNames lists the names NewRouting accepts ("ecube" on the full
// meshes only).
var RoutingNames = []string{"prefix", "updown", "dl", "sbp", "shortest", "ecube"}

// NewRouting builds routing name on t. Where several shortest legal paths
// join a switch pair, destination host h takes the (LocalIndex(h) mod k)th
// of the k in lexicographic order of their channels, so the hosts of one
// switch are reached over different paths (the paper's 4.1.1).
func NewRouting(t *Topology, name string) (*Routing, error) {
	var rule stateRule
	vcs := 1
	switch name {
	case "updown":
		rule, vcs = upDownRule(t, 0), 2
	case "dl":
		rule, vcs = dlRule(t), 2
	case "sbp":
		rule, vcs = sbpRule(t), t.Diameter()
	case "shortest":
		rule = shortestRule(t)
	case "prefix":
		return prefixRouting(t)
	case "ecube":
		return ecubeRouting(t)
	default:
		return nil, fmt.Errorf("%w: %q (have %v)", ErrUnknownRouting, name, RoutingNames)
	}
	r := &Routing{Name: name, VCs: vcs, topo: t, paths: make([][][]Hop, t.Switches)}
	for s := 0; s < t.Switches; s++ {
		r.paths[s] = make([][]Hop, t.Hosts())
		for d := range t.Switches {
			hs := t.SwitchHosts(d)
			if len(hs) == 0 {
				continue
			}
			cands := shortestLegal(t, rule, s, d)
			if len(cands) == 0 {
				return nil, fmt.Errorf("%w: %s on %s from switch %d to %d", ErrNoPath, name, t.Name, s, d)
			}
			for _, h := range hs {
				p := cands[t.LocalIndex(h)%len(cands)]
				switch name {
				case "sbp":
					p = withVCs(p, func(i int) int { return i })
				case "updown":
					// Both VCs carry up*/down* paths; destinations
					// alternate between them to spread the buffers.
					vc := t.LocalIndex(h) % 2
					p = withVCs(p, func(int) int { return vc })
				case "shortest":
					p = withVCs(p, func(int) int { return 0 })
				}
				r.paths[s][h] = p
			}
		}
	}
	return r, nil
}

func withVCs(p []Hop, f func(i int) int) []Hop {
	q := make([]Hop, len(p))
	for i, h := range p {
		q[i] = Hop{h.Channel, f(i)}
	}
	return q
}

// stateRule is a routing restriction as a state machine: start states,
// and for a state and channel the states a packet may be in after it (each
// with the VC it used), none if the turn is forbidden.
type stateRule struct {
	start []int
	next  func(state, channel int) []stateVC
}

type stateVC struct{ state, vc int }

// shortestLegal enumerates every shortest path from switch s to switch d
// the rule allows, sorted by channel sequence, one per channel sequence
// (the first VC assignment met in state order).
func shortestLegal(t *Topology, rule stateRule, s, d int) [][]Hop {
	if s == d {
		return [][]Hop{nil}
	}
	dist := t.Distances()
	cs := t.Channels()
	out := t.Out()
	// The rule may force detours: try growing lengths until paths appear.
	for limit := dist[s][d]; limit <= 4*t.Switches; limit++ {
		seen := map[string]bool{}
		var found [][]Hop
		var path []Hop
		var walk func(u, st int)
		walk = func(u, st int) {
			if u == d {
				if len(path) == limit {
					k := fmt.Sprint(channelsOf(path))
					if !seen[k] {
						seen[k] = true
						found = append(found, append([]Hop(nil), path...))
					}
				}
				return
			}
			if len(path)+dist[u][d] > limit {
				return
			}
			for _, c := range out[u] {
				for _, n := range rule.next(st, c) {
					path = append(path, Hop{c, n.vc})
					walk(cs[c].To, n.state)
					path = path[:len(path)-1]
				}
			}
		}
		for _, st := range rule.start {
			walk(s, st)
		}
		if len(found) > 0 {
			sort.SliceStable(found, func(i, j int) bool {
				a, b := channelsOf(found[i]), channelsOf(found[j])
				for k := range a {
					if a[k] != b[k] {
						return a[k] < b[k]
					}
				}
				return false
			})
			return found
		}
	}
	return nil
}

func channelsOf(p []Hop) []int {
	c := make([]int, len(p))
	for i, h := range p {
		c[i] = h.Channel
	}
	return c
}

// levels is the BFS depth of every switch from root.
func levels(t *Topology, root int) []int {
	return t.Distances()[root]
}

// upChannels marks the channels that go "up" in the Autonet orientation
// from root: toward a smaller BFS level, ties toward the smaller id.
func upChannels(t *Topology, root int) []bool {
	lv := levels(t, root)
	cs := t.Channels()
	up := make([]bool, len(cs))
	for i, c := range cs {
		up[i] = lv[c.To] < lv[c.From] || (lv[c.To] == lv[c.From] && c.To < c.From)
	}
	return up
}

// upDownRule is Up*/Down* (Autonet): any up channels, then only down ones.
// The spanning tree's root is switch root (the paper does not name it; we
// take switch 0, the top-left corner on the meshes).
func upDownRule(t *Topology, root int) stateRule {
	up := upChannels(t, root)
	return stateRule{start: []int{0}, next: func(st, c int) []stateVC {
		if up[c] {
			if st == 0 {
				return []stateVC{{0, 0}}
			}
			return nil
		}
		return []stateVC{{1, 0}}
	}}
}

// dlRule reconstructs Descending Layers with two layers: VC 1 is an
// Up*/Down* layer rooted at switch 0, VC 0 one rooted at the last switch
// (the opposite corner on a mesh). A packet starts in either layer and may
// descend from layer 1 to layer 0 once, at any switch, never back: each
// layer is acyclic and the layers are ordered, so the whole is deadlock
// free while most pairs get a minimal path.
func dlRule(t *Topology) stateRule {
	up1 := upChannels(t, 0)
	up0 := upChannels(t, t.Switches-1)
	// states: layer*2 + downOnly
	step := func(up []bool, down bool, c int) (bool, bool) {
		if up[c] {
			return !down, false
		}
		return true, true
	}
	return stateRule{start: []int{2, 0}, next: func(st, c int) []stateVC {
		var r []stateVC
		layer, down := st/2, st%2 == 1
		if layer == 1 {
			if ok, d := step(up1, down, c); ok {
				r = append(r, stateVC{2 + b2i(d), 1})
			}
			if ok, d := step(up0, false, c); ok {
				r = append(r, stateVC{b2i(d), 0})
			}
			return r
		}
		if ok, d := step(up0, down, c); ok {
			r = append(r, stateVC{b2i(d), 0})
		}
		return r
	}}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sbpRule allows any channel: minimal paths; the structured buffer pool
// makes them deadlock free by putting hop i on VC i (set after).
func sbpRule(*Topology) stateRule {
	return stateRule{start: []int{0}, next: func(int, int) []stateVC { return []stateVC{{0, 0}} }}
}

// shortestRule is minimal routing for the fat trees and the Clos, which
// the paper runs on one VC. On the fat trees and the 16-host Clos every
// minimal path goes up then down, so it is acyclic as it is. With hosts on
// the Clos's spines (32 hosts), spine-to-spine paths turn at a leaf and
// leaf-to-leaf ones at a spine, which closes cycles on one VC; we let
// spine-to-spine packets turn only at leaf 0, which keeps every path
// minimal and the channels acyclic (a cycle needs such turns at two leaves).
func shortestRule(t *Topology) stateRule {
	minimal := sbpRule(t)
	if t.Name != "clos32" {
		return minimal
	}
	cs := t.Channels()
	isLeaf := func(s int) bool { return s < 4 }
	return stateRule{start: []int{0}, next: func(st, c int) []stateVC {
		ch := cs[c]
		if st == 1 && isLeaf(ch.From) && !isLeaf(ch.To) {
			return nil
		}
		if !isLeaf(ch.From) && isLeaf(ch.To) && ch.To != 0 {
			return []stateVC{{1, 0}}
		}
		return []stateVC{{0, 0}}
	}}
}

// prefixRouting reconstructs Prefix routing (Wu and Sheng) on a BFS
// spanning tree rooted at switch 0 whose switches take the highest-id
// neighbour one level up as parent (on the meshes: rows hang off column 0;
// the lowest-id choice, columns hanging off row 0, leaves every SHIO pair
// on a tree path and Prefix as fast as Up*/Down* for SHIO, against the
// paper's 14%): a packet whose current switch is not an
// ancestor of the destination switch climbs the tree, unless a neighbour
// (over any cable) is an ancestor-or-self of the destination, to which it
// jumps; from an ancestor it descends to the deepest neighbour that is
// still an ancestor-or-self of the destination. Every path is up-tree
// edges, at most one jump, then depth-increasing channels, which orders
// the channels and so needs one VC.
func prefixRouting(t *Topology) (*Routing, error) {
	lv := levels(t, 0)
	cs := t.Channels()
	out := t.Out()
	parent := make([]int, t.Switches)
	parentCh := make([]int, t.Switches)
	parent[0], parentCh[0] = -1, -1
	for s := 1; s < t.Switches; s++ {
		parent[s] = -1
		for _, c := range out[s] {
			v := cs[c].To
			if lv[v] == lv[s]-1 && (parent[s] < 0 || v > parent[s]) {
				parent[s], parentCh[s] = v, c
			}
		}
	}
	anc := func(a, d int) bool { // a is ancestor-or-self of d
		for ; d >= 0; d = parent[d] {
			if d == a {
				return true
			}
		}
		return false
	}
	// best neighbour channel from u toward d that lands on an ancestor of d,
	// deepest first, then lowest channel id; deeper than u if descending.
	jump := func(u, d int, deeper bool) int {
		best := -1
		for _, c := range out[u] {
			v := cs[c].To
			if !anc(v, d) || (deeper && lv[v] <= lv[u]) {
				continue
			}
			if best < 0 || lv[v] > lv[cs[best].To] {
				best = c
			}
		}
		return best
	}
	r := &Routing{Name: "prefix", VCs: 1, topo: t, paths: make([][][]Hop, t.Switches)}
	for s := 0; s < t.Switches; s++ {
		r.paths[s] = make([][]Hop, t.Hosts())
		for h, d := range t.HostSwitch {
			var p []Hop
			for u := s; u != d; {
				c := -1
				if anc(u, d) {
					c = jump(u, d, true)
				} else if c = jump(u, d, false); c < 0 {
					c = parentCh[u]
				}
				if c < 0 || len(p) > 2*t.Switches {
					return nil, fmt.Errorf("%w: prefix on %s from switch %d to %d", ErrNoPath, t.Name, s, d)
				}
				p = append(p, Hop{c, 0})
				u = cs[c].To
			}
			r.paths[s][h] = p
		}
	}
	return r, nil
}

// DependencyCycle reports a cycle in the routing's channel dependency graph
// (nodes: channel and VC; an edge where a path holds one and asks for the
// next), or nil if the graph is acyclic and the routing deadlock free.
func (r *Routing) DependencyCycle() []Hop {
	type node struct{ c, vc int }
	edges := map[node]map[node]bool{}
	for s := range r.paths {
		for _, p := range r.paths[s] {
			for i := 0; i+1 < len(p); i++ {
				a, b := node{p[i].Channel, p[i].VC}, node{p[i+1].Channel, p[i+1].VC}
				if edges[a] == nil {
					edges[a] = map[node]bool{}
				}
				edges[a][b] = true
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := map[node]int{}
	var stack []node
	var cycle []Hop
	var visit func(n node) bool
	visit = func(n node) bool {
		color[n] = grey
		stack = append(stack, n)
		succ := make([]node, 0, len(edges[n]))
		for m := range edges[n] {
			succ = append(succ, m)
		}
		sort.Slice(succ, func(i, j int) bool {
			return succ[i].c < succ[j].c || (succ[i].c == succ[j].c && succ[i].vc < succ[j].vc)
		})
		for _, m := range succ {
			switch color[m] {
			case grey:
				for i := len(stack) - 1; i >= 0; i-- {
					cycle = append([]Hop{{stack[i].c, stack[i].vc}}, cycle...)
					if stack[i] == m {
						break
					}
				}
				return true
			case white:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	keys := make([]node, 0, len(edges))
	for n := range edges {
		keys = append(keys, n)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].c < keys[j].c || (keys[i].c == keys[j].c && keys[i].vc < keys[j].vc)
	})
	for _, n := range keys {
		if color[n] == white && visit(n) {
			return cycle
		}
	}
	return nil
}

// MaxVC is the highest VC any path uses plus one: what the routing needs.
func (r *Routing) MaxVC() int {
	m := 0
	for s := range r.paths {
		for _, p := range r.paths[s] {
			for _, h := range p {
				if h.VC+1 > m {
					m = h.VC + 1
				}
			}
		}
	}
	return m
}
