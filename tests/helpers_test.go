// Package tests holds integration tests that run real devices (shared
// memory regions, eventfds, the engine goroutine) and real drivers against
// them, asserting bytes, statuses and counters.
package tests

import (
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

const waitNs = 5_000_000_000 // generous: these machines are noisy

// cluster starts n devices (nodes 1..n) on an in-memory hub and opens a driver on each.
func cluster(t *testing.T, cfg vdev.Config, payload, n int) (*vdev.Local, []*driver.Driver) {
	t.Helper()
	nodes := make([]uint16, n)
	for i := range nodes {
		nodes[i] = uint16(i + 1)
	}
	l, err := vdev.NewLocal(cfg, payload, nodes...)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	var ds []*driver.Driver
	for _, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			t.Fatalf("open driver on node %d: %v", dev.Node(), err)
		}
		ds = append(ds, d)
	}
	return l, ds
}

func wait(t *testing.T, d *driver.Driver) uapi.Status {
	t.Helper()
	s, err := d.Wait(waitNs)
	if err != nil {
		t.Fatalf("node %d: wait status: %v", d.Node(), err)
	}
	return s
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}
