package fabric

import (
	"errors"
	"fmt"
)

// ErrNotMesh is returned for e-cube routing on a topology that is not a
// full 2-D mesh: dimension order needs every row and column cabled, and on
// an irregular fabric (Topology A, the fat trees, the Clos) a packet could
// reach a switch with no cable in the direction its next dimension says.
var ErrNotMesh = errors.New("fabric: e-cube routing needs a full 2-D mesh")

// MeshShape reports the columns and rows of t if it is a full cols x rows
// mesh numbered row-major (what Mesh builds), so a routing that depends on
// the coordinates can refuse anything else.
func (t *Topology) MeshShape() (cols, rows int, ok bool) {
	if t.Cols <= 0 || t.Switches%t.Cols != 0 {
		return 0, 0, false
	}
	cols, rows = t.Cols, t.Switches/t.Cols
	want := map[[2]int]int{}
	for _, l := range Mesh("", cols, rows, 0).Links {
		want[l]++
	}
	have := map[[2]int]int{}
	for _, l := range t.Links {
		if l[0] > l[1] {
			l[0], l[1] = l[1], l[0]
		}
		have[l]++
	}
	if len(have) != len(want) {
		return 0, 0, false
	}
	for l, n := range want {
		if have[l] != n {
			return 0, 0, false
		}
	}
	return cols, rows, true
}

// ecubeRouting is dimension-order routing on a 2-D mesh, the routing the
// paper's Fig. 5 draws SHIO on: a packet first corrects its column (X)
// along its row, then its row (Y) along the destination's column. No
// packet turns from Y back to X, so the channel dependencies are acyclic
// on one VC, and every path is minimal and unique: the hosts of a switch
// cannot be spread over several paths, which is why HIO's simultaneous
// packets between neighbouring switch groups contend under it while
// SHIO's do not.
func ecubeRouting(t *Topology) (*Routing, error) {
	cols, _, ok := t.MeshShape()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotMesh, t.Name)
	}
	chanOf := map[[2]int]int{}
	for i, c := range t.Channels() {
		chanOf[[2]int{c.From, c.To}] = i
	}
	r := &Routing{Name: "ecube", VCs: 1, topo: t, paths: make([][][]Hop, t.Switches)}
	for s := 0; s < t.Switches; s++ {
		r.paths[s] = make([][]Hop, t.Hosts())
		for h, d := range t.HostSwitch {
			var p []Hop
			u := s
			step := func(v int) {
				p = append(p, Hop{chanOf[[2]int{u, v}], 0})
				u = v
			}
			for u%cols < d%cols {
				step(u + 1)
			}
			for u%cols > d%cols {
				step(u - 1)
			}
			for u/cols < d/cols {
				step(u + cols)
			}
			for u/cols > d/cols {
				step(u - cols)
			}
			r.paths[s][h] = p
		}
	}
	return r, nil
}
