package collective_test

import (
	"testing"

	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/vdev/fabric"
)

// Barrier latency over 64 real devices behind the 4x4 mesh, per order:
// what dimmnet barrier prints, as a benchmark (µs per barrier).
func BenchmarkBarrier64(b *testing.B) {
	for _, o := range collective.Orders {
		b.Run(o, func(b *testing.B) {
			g := newGroupOn(b, fabric.Mesh("mesh4x4", 4, 4, 4), "updown", nil, false)
			ls, err := g.m.Lists(o, 1, 1)
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			d, err := g.TimeBarriers(ls[0], b.N)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(d.Seconds()*1e6, "µs/barrier")
		})
	}
}
