package tests

import (
	"sync"
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/vdev/fabric"
)

type countData struct {
	mu  sync.Mutex
	got map[[2]uint64]int
}

func (c *countData) Received(rank, from int, k collective.Kind, op uint64) {
	if k == collective.Data {
		c.mu.Lock()
		c.got[[2]uint64{uint64(rank), op}]++
		c.mu.Unlock()
	}
}

// A daemon hosting 64 devices behind the 4x4 mesh of switches (serve
// --fabric): processes attached to it run every order's barrier and
// multicast, and every multicast reaches every rank exactly once.
func TestFabricDaemonOrders(t *testing.T) {
	d := startDaemon(t, 64, "--fabric", "mesh4x4:updown", "--region-mib", "1", "--mtu", "4096")
	drvs := make([]*driver.Driver, 64)
	for i := range drvs {
		drvs[i] = attach(t, d.sock(i))
	}
	topo := fabric.Mesh("mesh4x4", 4, 4, 4)
	m := collective.Map{HostSwitch: topo.HostSwitch}
	obs := &countData{got: map[[2]uint64]int{}}
	g, err := collective.NewGroup(drvs, m, collective.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	var lists [][]int
	for _, o := range collective.Orders {
		ls, err := m.Lists(o, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, ls[0])
	}
	err = g.Run(func(c *collective.Comm) error {
		for _, l := range lists {
			if err := c.Barrier(l); err != nil {
				return err
			}
			if err := c.Multicast(l, 64); err != nil {
				return err
			}
		}
		return c.Barrier(lists[0])
	})
	if err != nil {
		t.Fatalf("%v\ndaemon:\n%s", err, d.stderr)
	}
	for i, l := range lists {
		op := uint64(2*i + 2)
		for r := 0; r < 64; r++ {
			want := 1
			if r == l[0] {
				want = 0
			}
			if n := obs.got[[2]uint64{uint64(r), op}]; n != want {
				t.Errorf("list %d: rank %d got the multicast %d times, want %d", i, r, n, want)
			}
		}
	}
}
