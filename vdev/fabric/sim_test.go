package fabric

import (
	"errors"
	"testing"

	"github.com/dimmnet/dimmnet/driver/collective"
)

// Fig. 6 calibration: a 2-host barrier grows by 2 x HopDelay per extra
// switch on the path, and costs 2 x (host cost + serialization + hops) in
// all.
func TestTwoHostBarrierPerHop(t *testing.T) {
	topo := &Topology{Name: "line", Switches: 4, HostSwitch: []int{0, 0}, Links: [][2]int{{0, 1}, {1, 2}, {2, 3}}}
	par := PaperParams(17, 2*Microsecond)
	var prev int64
	for far := 0; far < 4; far++ {
		topo.HostSwitch[1] = far
		r, err := NewRouting(topo, "shortest")
		if err != nil {
			t.Fatal(err)
		}
		res, err := Barriers(r, collective.Binomial{}, []int{0, 1}, par, 200)
		if err != nil {
			t.Fatal(err)
		}
		want := 2 * (par.HostCost + par.Serialization() + int64(far+1)*par.HopDelay)
		if res.Mean != want {
			t.Errorf("%d switches apart: %d ps, want %d", far, res.Mean, want)
		}
		if far > 0 && res.Mean-prev != 2*par.HopDelay {
			t.Errorf("per switch +%d ps, want %d", res.Mean-prev, 2*par.HopDelay)
		}
		prev = res.Mean
	}
}

// The steady state is found and extrapolated exactly: a run that stops
// early and extrapolates gives the mean a run simulated through does.
func TestPeriodicExtrapolationExact(t *testing.T) {
	topo := Mesh("mesh4x4", 4, 4, 4)
	r, err := NewRouting(topo, "updown")
	if err != nil {
		t.Fatal(err)
	}
	l := collective.Map{HostSwitch: topo.HostSwitch}
	lists, _ := l.Lists("RO", 3, 1)
	par := PaperParams(69, 3*Microsecond)
	long, err := Barriers(r, collective.Binomial{}, lists[0], par, 100000)
	if err != nil {
		t.Fatal(err)
	}
	if long.Period == 0 || long.Simulated >= 100000 {
		t.Fatalf("no steady state found: %+v", long)
	}
	if long.MaxQueueBytes > 4096 {
		t.Errorf("a VC buffer held %d bytes, more than RHiNET-2/SW's 4 KB", long.MaxQueueBytes)
	}
	n := long.Simulated + 3*long.Period + 1
	fast, err := Barriers(r, collective.Binomial{}, lists[0], par, n)
	if err != nil {
		t.Fatal(err)
	}
	extrapolate = false
	defer func() { extrapolate = true }()
	slow, err := Barriers(r, collective.Binomial{}, lists[0], par, n)
	if err != nil {
		t.Fatal(err)
	}
	if fast.Simulated >= n || slow.Simulated != n || fast.Mean != slow.Mean {
		t.Fatalf("extrapolated %+v, simulated %+v", fast, slow)
	}
}

func TestMulticastSteps(t *testing.T) {
	topo := Mesh("mesh4x4", 4, 4, 4)
	r, _ := NewRouting(topo, "sbp")
	par := PaperParams(17, 2*Microsecond)
	l := collective.Map{HostSwitch: topo.HostSwitch}
	d, err := Multicast(r, collective.Binomial{}, l.SHIO(), par)
	if err != nil {
		t.Fatal(err)
	}
	one := par.HostCost + par.Serialization() + par.HopDelay
	if d < 6*one || d > 6*one+6*4*par.HopDelay+int64(6)*par.HostCost/2 {
		t.Fatalf("64-host multicast %d ps, 6 steps of %d", d, one)
	}
}

func TestBadListRefused(t *testing.T) {
	topo := Clos(16)
	r, err := NewRouting(topo, "shortest")
	if err != nil {
		t.Fatal(err)
	}
	par := PaperParams(17, Microsecond)
	for _, l := range [][]int{{0, 1}, append(make([]int, 15), 0)} {
		if _, err := Barriers(r, collective.Binomial{}, l, par, 1); !errors.Is(err, ErrBadList) {
			t.Errorf("list %v: %v, want ErrBadList", l, err)
		}
	}
	if _, err := Multicast(r, collective.Binomial{}, []int{0, 3, 3}, par); !errors.Is(err, ErrBadList) {
		t.Errorf("multicast with a repeated host: %v", err)
	}
}
