package collective_test

import (
	"testing"

	"github.com/dimmnet/dimmnet/vdev/fabric"
)

// All-to-all of 8-byte messages on 64 devices (4x4 mesh of switches)
// against 2 devices on one switch, in aggregate messages per second: the
// issue's target is 64 at no less than half the rate of 2, which holds
// only if idle devices cost nothing and one engine shares 2 cores well.
// Reported, not asserted (a shared 2-core machine). The pair runs to
// completion (each waiting goroutine runs its device, the fastest for
// two); 64 devices are served by the process's one engine, and also
// measured running to completion, where each device's frames wait for
// its own goroutine's turn among 64 on 2 cores.
func BenchmarkAllToAll(b *testing.B) {
	two := &fabric.Topology{Name: "pair", Switches: 1, HostSwitch: []int{0, 0}}
	for _, c := range []struct {
		name string
		topo func() *fabric.Topology
		rt   string
		rtc  bool
	}{
		{"devices=2", func() *fabric.Topology { return two }, "shortest", true},
		{"devices=64", func() *fabric.Topology { return fabric.Mesh("mesh4x4", 4, 4, 4) }, "updown", false},
		{"devices=64/run-to-completion", func() *fabric.Topology { return fabric.Mesh("mesh4x4", 4, 4, 4) }, "updown", true},
	} {
		b.Run(c.name, func(b *testing.B) {
			g := newGroupOn(b, c.topo(), c.rt, nil, c.rtc)
			n := len(g.Comms)
			rounds := max(1, b.N/(n*(n-1)))
			b.ResetTimer()
			rate, err := g.AllToAllRate(rounds)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(rate, "msgs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}
