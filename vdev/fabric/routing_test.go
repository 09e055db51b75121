package fabric

import (
	"errors"
	"testing"
)

// Every routing the paper ran, on every topology it ran it on, must be
// deadlock free with the VC count the paper gives: an acyclic channel
// dependency graph.
func TestRoutingsAcyclicWithPaperVCs(t *testing.T) {
	cases := []struct {
		topo, routing string
		vcs           int
	}{
		{"mesh4x4", "prefix", 1}, {"mesh4x4", "updown", 2}, {"mesh4x4", "dl", 2}, {"mesh4x4", "sbp", 6},
		{"topoA", "prefix", 1}, {"topoA", "updown", 2}, {"topoA", "dl", 2}, {"topoA", "sbp", 0},
		{"mesh4x2", "updown", 2},
		{"fattree6", "shortest", 1}, {"fattree14", "shortest", 1},
		{"clos16", "shortest", 1}, {"clos32", "shortest", 1},
	}
	for _, c := range cases {
		topo, err := NewTopology(c.topo)
		if err != nil {
			t.Fatal(err)
		}
		if err := topo.Validate(); err != nil {
			t.Fatal(err)
		}
		r, err := NewRouting(topo, c.routing)
		if err != nil {
			t.Fatal(err)
		}
		want := c.vcs
		if want == 0 {
			want = topo.Diameter()
		}
		if r.MaxVC() > want || r.VCs != want {
			t.Errorf("%s/%s uses %d VCs (declares %d), paper: %d", c.topo, c.routing, r.MaxVC(), r.VCs, want)
		}
		if cyc := r.DependencyCycle(); cyc != nil {
			t.Errorf("%s/%s: channel dependency cycle %v", c.topo, c.routing, cyc)
		}
		for a := 0; a < topo.Hosts(); a++ {
			for b := 0; b < topo.Hosts(); b++ {
				u := topo.HostSwitch[a]
				for _, h := range r.Path(u, b) {
					if ch := topo.Channels()[h.Channel]; ch.From != u {
						t.Fatalf("%s/%s: path %d->%d not contiguous", c.topo, c.routing, a, b)
					} else {
						u = ch.To
					}
				}
				if u != topo.HostSwitch[b] {
					t.Fatalf("%s/%s: path %d->%d ends on switch %d", c.topo, c.routing, a, b, u)
				}
			}
		}
	}
}

// Unrestricted minimal routing on the mesh has cycles on one VC: the check
// must see them, or the test above proves nothing.
func TestDependencyCheckFindsMeshCycle(t *testing.T) {
	topo := Mesh("m", 4, 4, 4)
	r, err := NewRouting(topo, "shortest")
	if err != nil {
		t.Fatal(err)
	}
	if r.DependencyCycle() == nil {
		t.Fatal("minimal routing on one VC of a mesh reported deadlock free")
	}
}

func TestRoutingSpreadsHostsOverPaths(t *testing.T) {
	topo := Clos(16)
	r, err := NewRouting(topo, "shortest")
	if err != nil {
		t.Fatal(err)
	}
	spines := map[int]bool{}
	for _, h := range topo.SwitchHosts(3) {
		p := r.Path(0, h)
		spines[topo.Channels()[p[0].Channel].To] = true
	}
	if len(spines) != 4 {
		t.Fatalf("4 hosts of leaf 3 reached over %d spines from leaf 0, want 4", len(spines))
	}
}

func TestUnknownNames(t *testing.T) {
	if _, err := NewTopology("torus"); !errors.Is(err, ErrUnknownTopology) {
		t.Fatal(err)
	}
	if _, err := NewRouting(Clos(16), "xy-adaptive"); !errors.Is(err, ErrUnknownRouting) {
		t.Fatal(err)
	}
}
