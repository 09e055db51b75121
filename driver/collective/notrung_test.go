package collective_test

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/driver/drivertest"
	"github.com/dimmnet/dimmnet/vdev"
)

// kinds counts every message taken in, by kind and operation.
type kinds struct {
	mu  sync.Mutex
	got map[[2]uint64]int // (kind, op) -> messages, all ranks
}

func (k *kinds) Received(rank, from int, kind collective.Kind, op uint64) {
	k.mu.Lock()
	k.got[[2]uint64{uint64(kind), op}]++
	k.mu.Unlock()
}

// Barriers and multicasts whose messages find the ranks' doorbells dead
// (driver.ErrNotRung) still run: those messages are posted, so each
// operation completes on every rank with each message taken in once and
// the multicast's bytes at every rank, and NotRung counts them. The
// rank that met a dead doorbell returned the error: it left the
// operation while its message went out all the same.
func TestBarrierNotRungStillCompletes(t *testing.T) {
	const n, ops = 4, 6
	nodes := []uint16{1, 2, 3, 4}
	l, err := vdev.NewLocal(vdev.Config{RegionSize: 1 << 20}, 0, nodes...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var drvs []*driver.Driver
	var bells []*drivertest.Bell
	for _, dev := range l.Devices {
		b := drivertest.NewBell(driver.InProcessDevice(dev))
		d, err := driver.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		b.Kill(true)
		drvs, bells = append(drvs, d), append(bells, b)
	}
	obs := &kinds{got: map[[2]uint64]int{}}
	g, err := collective.NewGroup(drvs, collective.Map{}, collective.Options{Observer: obs, WaitNs: int64(30 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	list := []int{0, 1, 2, 3}
	err = g.Run(func(c *collective.Comm) error {
		d := drvs[c.Rank()]
		for i := range ops {
			// Each operation starts on a sleeping device: its first post
			// rings (and finds the doorbell dead).
			if err := drivertest.WaitAsleep(d, 10*time.Second); err != nil {
				return err
			}
			if i%2 == 0 {
				if err := c.Barrier(list); err != nil {
					return err
				}
				continue
			}
			want := payload(c.Op() + 1)
			if c.Rank() == 0 {
				d.CopyIn(4096, want)
			}
			if err := c.Multicast(list, uint32(len(want))); err != nil {
				return err
			}
			if got := d.LinkMem()[4096 : 4096+len(want)]; !bytes.Equal(got, want) {
				return fmt.Errorf("rank %d: multicast %d holds %q, want %q", c.Rank(), c.Op(), got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var failed, notRung uint64
	for r, c := range g.Comms {
		failed += bells[r].Failed()
		notRung += c.NotRung()
	}
	if failed == 0 || notRung == 0 {
		t.Fatalf("no message met a dead doorbell (%d failed kicks, NotRung %d)", failed, notRung)
	}
	for op := uint64(1); op <= ops; op++ {
		want := map[collective.Kind]int{collective.Gather: n - 1, collective.Release: n - 1}
		if op%2 == 0 {
			want = map[collective.Kind]int{collective.Data: n - 1}
		}
		for _, k := range []collective.Kind{collective.Gather, collective.Release, collective.Data} {
			if got := obs.got[[2]uint64{uint64(k), op}]; got != want[k] {
				t.Errorf("operation %d: %d %s messages taken in, want %d", op, got, k, want[k])
			}
		}
	}
	t.Logf("%d failed kicks, %d messages posted not rung", failed, notRung)
}
