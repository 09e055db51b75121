package fabric

import (
	"errors"
	"testing"

	"github.com/dimmnet/dimmnet/driver/collective"
)

// e-cube is dimension order: minimal, X before Y, deadlock free on one VC.
func TestECubePaths(t *testing.T) {
	for _, name := range []string{"mesh4x4", "mesh4x2"} {
		topo, err := NewTopology(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewRouting(topo, "ecube")
		if err != nil {
			t.Fatal(err)
		}
		if r.VCs != 1 || r.MaxVC() > 1 {
			t.Errorf("%s: e-cube uses %d VCs", name, r.MaxVC())
		}
		if cyc := r.DependencyCycle(); cyc != nil {
			t.Errorf("%s: dependency cycle %v", name, cyc)
		}
		dist := topo.Distances()
		cs := topo.Channels()
		for s := 0; s < topo.Switches; s++ {
			for h, d := range topo.HostSwitch {
				p := r.Path(s, h)
				if len(p) != dist[s][d] {
					t.Fatalf("%s: %d->%d takes %d hops, distance %d", name, s, d, len(p), dist[s][d])
				}
				turned := false
				u := s
				for _, hop := range p {
					c := cs[hop.Channel]
					if c.From != u {
						t.Fatalf("%s: path %d->%d not contiguous", name, s, d)
					}
					vertical := c.To/topo.Cols != c.From/topo.Cols
					if turned && !vertical {
						t.Fatalf("%s: path %d->%d turns back to X", name, s, d)
					}
					turned = turned || vertical
					u = c.To
				}
				if u != d {
					t.Fatalf("%s: path %d->%d ends at %d", name, s, d, u)
				}
			}
		}
	}
}

// On anything but a full mesh e-cube is refused by name, including
// Topology A, which is placed like the mesh but lacks two cables.
func TestECubeRefusedOffMesh(t *testing.T) {
	for _, name := range []string{"topoA", "fattree6", "fattree14", "clos16", "clos32"} {
		topo, err := NewTopology(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewRouting(topo, "ecube"); !errors.Is(err, ErrNotMesh) {
			t.Errorf("%s: %v, want ErrNotMesh", name, err)
		}
	}
}

// The paper's Fig. 5: on the 64-host mesh under e-cube routing, SHIO's
// multicast (the barrier's release) has no contention and no packet
// crosses more than two inter-switch hops, while HIO's does contend. The
// finding holds for every switch model variant, since it is about paths
// and timing, not buffering.
func TestFig5SHIOUnderECube(t *testing.T) {
	topo, _ := NewTopology("mesh4x4")
	r, err := NewRouting(topo, "ecube")
	if err != nil {
		t.Fatal(err)
	}
	m := collective.Map{HostSwitch: topo.HostSwitch}
	for _, spec := range []string{"flit", "packet", "input", "crossbar"} {
		sw, err := ParseSwitch(spec)
		if err != nil {
			t.Fatal(err)
		}
		for _, flits := range []int{17, 69} {
			par := PaperParams(flits, 3*Microsecond)
			par.Switch = sw
			shio, err := MulticastRun(r, collective.Binomial{}, m.SHIO(), par)
			if err != nil {
				t.Fatal(err)
			}
			hio, err := MulticastRun(r, collective.Binomial{}, m.HIO(), par)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, %d flits: SHIO %.2f µs, %d contended, %d hops max; HIO %.2f µs, %d contended, %d hops max",
				spec, flits, float64(shio.Time)/1e6, shio.Contended, shio.MaxHops, float64(hio.Time)/1e6, hio.Contended, hio.MaxHops)
			if shio.Contended != 0 {
				t.Errorf("%s, %d flits: SHIO under e-cube had %d contended packets", spec, flits, shio.Contended)
			}
			if shio.MaxHops > 2 {
				t.Errorf("%s, %d flits: SHIO under e-cube crossed %d hops", spec, flits, shio.MaxHops)
			}
			if hio.Contended == 0 {
				t.Errorf("%s, %d flits: HIO under e-cube had no contention", spec, flits)
			}
		}
	}
	// The same packets under Up*/Down* may take non-minimal paths: the hop
	// bound is e-cube's (and the mesh's SHIO order's) property together.
	ud, _ := NewRouting(topo, "updown")
	u, err := MulticastRun(ud, collective.Binomial{}, m.SHIO(), PaperParams(17, 3*Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SHIO under updown: %d contended, %d hops max", u.Contended, u.MaxHops)
}
