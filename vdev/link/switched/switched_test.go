package switched

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev/fabric"
)

func meshFabric(t *testing.T, cfg Config) *Fabric {
	topo, err := fabric.NewTopology("mesh4x4")
	if err != nil {
		t.Fatal(err)
	}
	r, err := fabric.NewRouting(topo, "updown")
	if err != nil {
		t.Fatal(err)
	}
	return New(topo, r, cfg)
}

// A frame's tail arrives after one hop delay per switch crossed and one
// serialization; a second frame over the same links and VC waits for the
// first, one on another VC does not.
func TestHopsAndChannels(t *testing.T) {
	f := meshFabric(t, PaperConfig(1500))
	const n = 600 // bytes: 800 ns at 6 Gbps
	ser := int64(800)
	for _, c := range []struct{ a, b int }{{0, 1}, {0, 4}, {0, 63}, {20, 43}} {
		f := meshFabric(t, PaperConfig(1500))
		due := f.reserve(c.a, c.b, n, 1000)
		if want := 1000 + int64(f.Switches(c.a, c.b))*350 + ser; due != want {
			t.Errorf("%d->%d crossing %d switches: due %d, want %d", c.a, c.b, f.Switches(c.a, c.b), due, want)
		}
	}
	first := f.reserve(0, 8, n, 0)
	if again := f.reserve(0, 8, n, 0); again != first+ser {
		t.Errorf("same path at once: %d, want %d", again, first+ser)
	}
	// Hosts 1 -> 9 shares switch 0 -> 1 -> 2 with 0 -> 8 but not the
	// host links; 9 is its switch's second host, so it goes on the other VC.
	g := meshFabric(t, PaperConfig(1500))
	a := g.reserve(0, 8, n, 0)
	if b := g.reserve(1, 9, n, 0); b != a {
		t.Errorf("other VC waited: %d vs %d", b, a)
	}
	if c := g.reserve(2, 10, n, 0); c != a+ser {
		t.Errorf("same VC did not wait: %d, want %d", c, a+ser)
	}
}

// Through the Port: a frame is not received before its tail is due, the
// port says it is pending meanwhile (so its device keeps polling), and
// then it arrives whole.
func TestPortDeliversWhenDue(t *testing.T) {
	cfg := PaperConfig(1500)
	cfg.HopDelay = int64(100 * time.Millisecond)
	f := meshFabric(t, cfg)
	macA, macB := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	a, err := f.Attach(macA, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.Attach(macB, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Attach(net.HardwareAddr{2, 0, 0, 0, 0, 3}, 5); !errors.Is(err, ErrHost) {
		t.Fatalf("second device on host 5: %v", err)
	}
	fr := append(a.Buffer(), macB...)
	fr = append(fr, macA...)
	fr = append(fr, 0x88, 0xb5, 'h', 'i')
	sent := time.Now()
	if err := a.Send(fr); err != nil {
		t.Fatal(err)
	}
	if got := b.Recv(); got != nil {
		t.Fatal("frame received before its hop delays passed")
	}
	if !b.(*port).Pending() {
		t.Fatal("a frame in flight is not pending")
	}
	var got []byte
	for got == nil && time.Since(sent) < 10*time.Second {
		time.Sleep(time.Millisecond)
		got = b.Recv()
	}
	if got == nil || string(got[14:]) != "hi" {
		t.Fatalf("got %q", got)
	}
	// 0 -> 5 crosses switches 0, 1 at least: two hop delays.
	if el := time.Since(sent); el < 200*time.Millisecond {
		t.Fatalf("arrived after %v, before two hop delays", el)
	}
	b.Release(got)
}
