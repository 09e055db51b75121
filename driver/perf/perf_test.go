package perf

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// pair is two in-process devices, nodes 1 and 2, on medium (mem: the hub;
// shm: each on its own shared-memory link port, as two processes would
// be), set up for messages up to maxSize, verifying ping-pong payloads.
func pair(t *testing.T, medium string, maxSize int, verify bool) (*Pair, [2]*driver.Driver) {
	t.Helper()
	var open func(d *vdev.Device) (link.Port, error)
	switch medium {
	case "mem":
		hub := link.NewHub(vdev.DefaultHubPayload+wire.FrameOverhead, 256)
		open = func(d *vdev.Device) (link.Port, error) { return hub.Attach(d.MAC()) }
	case "shm":
		dir := t.TempDir()
		open = func(d *vdev.Device) (link.Port, error) {
			return link.ListenShm(dir, d.Node(), vdev.DefaultHubPayload+wire.FrameOverhead)
		}
	}
	l, err := vdev.NewLocalPorts(vdev.Config{}, []uint16{1, 2}, open)
	if err != nil {
		t.Fatal(err)
	}
	var ds [2]*driver.Driver
	var sides [2]*pingpong.Side
	for i, dev := range l.Devices {
		if ds[i], err = driver.Open(driver.InProcessDevice(dev)); err != nil {
			t.Fatal(err)
		}
		sides[i] = &pingpong.Side{D: ds[i], Peer: l.Devices[1-i].Node(), Verify: verify}
	}
	if err := pingpong.Setup(sides[0], sides[1], maxSize); err != nil {
		t.Fatal(err)
	}
	p := InProcess(sides[0], sides[1], medium)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
		l.Close()
	})
	return p, ds
}

// TestPatterns runs each pattern briefly on mem and shm, PUSH and IPUSH,
// in both conditions, and checks what arrived: every ping-pong payload
// verified byte for byte on both sides, every streamed message copied
// out and compared (hostcopy), and the devices' placed-packet counters
// moved by at least the messages the records count (statuses: on mem and
// shm a PUSHB frame places several messages).
func TestPatterns(t *testing.T) {
	for _, medium := range []string{"mem", "shm"} {
		t.Run(medium, func(t *testing.T) {
			const maxSize = 64 << 10
			p, ds := pair(t, medium, maxSize, true)
			for _, pat := range []string{PatternLat, PatternBW, PatternRate} {
				for _, op := range []string{pingpong.ModePush, pingpong.ModeIPush} {
					for _, cond := range []string{pingpong.CondLinkMem, pingpong.CondHostCopy} {
						for _, size := range []int{8, 5000, maxSize} {
							if pat == PatternRate && size != 8 {
								continue
							}
							for _, bidir := range []bool{false, true} {
								if bidir && pat != PatternBW {
									continue
								}
								name := fmt.Sprintf("%s/%s/%s/%d/bidir=%v", pat, op, cond, size, bidir)
								sp := Spec{Pattern: pat, Op: op, Cond: cond, Size: size, Window: 16, Bidir: bidir, Time: 20 * time.Millisecond, Check: true}
								rx := ds[1].Counter(uapi.CtrStatusWritten) + ds[0].Counter(uapi.CtrStatusWritten)
								r, err := p.Session.Measure(sp)
								if err != nil {
									t.Fatalf("%s: %v", name, err)
								}
								placed := ds[1].Counter(uapi.CtrStatusWritten) + ds[0].Counter(uapi.CtrStatusWritten) - rx
								checkRecord(t, name, sp, r, placed)
							}
						}
					}
				}
			}
		})
	}
}

func checkRecord(t *testing.T, name string, sp Spec, r Record, placed uint64) {
	t.Helper()
	if r.Pattern != sp.Pattern || r.Op != sp.Op || r.Cond != sp.Cond || r.Size != sp.Size || r.Iters < 1 {
		t.Fatalf("%s: record %+v", name, r)
	}
	switch sp.Pattern {
	case PatternLat:
		// both sides verified every message, warm-up included
		if r.Checked < 2*r.Iters {
			t.Errorf("%s: %d payloads verified for %d timed round trips", name, r.Checked, r.Iters)
		}
		if !(r.MinUs > 0 && r.MinUs <= r.P50Us && r.P50Us <= r.P99Us && r.P99Us <= r.P999Us && r.P999Us <= r.MaxUs) {
			t.Errorf("%s: tails out of order: %+v", name, r)
		}
		if placed < uint64(2*r.Iters) {
			t.Errorf("%s: devices wrote %d statuses for %d round trips", name, placed, r.Iters)
		}
	default:
		if r.Window != sp.Window || r.Iters%sp.Window != 0 || r.MBps <= 0 || r.MsgsPerS <= 0 {
			t.Errorf("%s: record %+v", name, r)
		}
		msgs := r.Iters
		if sp.Bidir {
			msgs *= 2
		}
		if placed < uint64(msgs) {
			t.Errorf("%s: devices wrote %d statuses for %d messages", name, placed, msgs)
		}
		// hostcopy receivers compared every message, the calibration's
		// and warm-up's too
		if sp.Cond == pingpong.CondHostCopy && r.Checked < msgs {
			t.Errorf("%s: %d messages compared of %d", name, r.Checked, msgs)
		}
	}
}

// TestBadSpec: a measurement that cannot be made is refused with
// ErrSpec before anything is sent, and the session still measures.
func TestBadSpec(t *testing.T) {
	p, _ := pair(t, "mem", 4096, true)
	for _, sp := range []Spec{
		{Pattern: "nope", Op: "push", Cond: "linkmem", Size: 8},
		{Pattern: PatternLat, Op: "pull", Cond: "linkmem", Size: 8},
		{Pattern: PatternBW, Op: "push", Cond: "linkmem", Size: 8, Window: 0},
		{Pattern: PatternLat, Op: "push", Cond: "nowhere", Size: 8},
	} {
		if _, err := p.Session.Measure(sp); !errors.Is(err, ErrSpec) {
			t.Errorf("%+v: %v, want ErrSpec", sp, err)
		}
	}
	r, err := p.Session.Measure(Spec{Pattern: PatternLat, Op: "push", Cond: "hostcopy", Size: 8, Time: 10 * time.Millisecond})
	if err != nil || r.Checked < 2*r.Iters {
		t.Fatalf("after refusals: %+v, %v", r, err)
	}
}
