package devinfo

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// A device's listing is what its register page says, and a region that
// is not a device is refused by name.
func TestReadAndWrite(t *testing.T) {
	l, err := vdev.NewLocal(vdev.Config{Check: true}, 0, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	region := l.Devices[0].Region()
	r := uapi.Region(region)
	d, err := Read("node3", region)
	if err != nil {
		t.Fatal(err)
	}
	g := r.ReadGeometry()
	if d.Node != 3 || d.State != "RUNNING" || d.ABIVersion != uapi.ABIVersion || d.MTU != g.MTU ||
		d.MaxInflight != r.Load64(uapi.RegMaxInflight) || d.CmdqEntries != g.CmdqEntries || d.RegionSize != uint64(len(region)) ||
		d.LinkMemSize != g.LinkMemSize || d.AMTEntries != g.AMTEntries {
		t.Fatalf("listing disagrees with the register page: %+v", d)
	}
	if !strings.Contains(strings.Join(d.Features, " "), "CHECK") {
		t.Errorf("a checked device's features %v lack CHECK", d.Features)
	}
	d.Link, d.Peers = "mem", others([]uint16{3, 4}, 3)
	var b bytes.Buffer
	if err := Write(&b, []Device{d}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"device:\tnode3", "max_inflight:", "link:\t\tmem", "peers:\t\t4", "violations:\t0"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}

	bad := make([]byte, len(region))
	copy(bad, region)
	uapi.Region(bad).Store64(uapi.RegABIVersion, uapi.ABIVersion+1)
	if _, err := Read("x", bad); !errors.Is(err, ErrNotDevice) {
		t.Errorf("another ABI version: %v", err)
	}
	if _, err := Read("x", bad[:4096]); !errors.Is(err, ErrNotDevice) {
		t.Errorf("a short region: %v", err)
	}
}

func TestOthers(t *testing.T) {
	if p := others([]uint16{0, 1, 2}, 1); len(p) != 2 || p[0] != 0 || p[1] != 2 {
		t.Errorf("others: %v", p)
	}
	if others(nil, 1) != nil {
		t.Error("unknown peers became known")
	}
}

// A register page with any words in it is listed or refused by name,
// never read outside the region.
func FuzzRead(f *testing.F) {
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1)
	if err != nil {
		f.Fatal(err)
	}
	defer l.Close()
	good := l.Devices[0].Region()
	f.Add(uint16(uapi.RegCmdqOff), uint64(1<<40))
	f.Add(uint16(uapi.RegLinkMemSize), uint64(1<<20))
	f.Add(uint16(uapi.RegFeatures), ^uint64(0))
	f.Add(uint16(uapi.RegMagic), uint64(0))
	f.Fuzz(func(t *testing.T, off uint16, v uint64) {
		r := make([]byte, len(good))
		copy(r, good)
		o := uint32(off) % uapi.RegPageSize &^ 7
		uapi.Region(r).Store64(o, v)
		d, err := Read("x", r)
		if err != nil {
			if !errors.Is(err, ErrNotDevice) {
				t.Fatalf("word %#x = %#x: %v", o, v, err)
			}
			return
		}
		if d.RegionSize != uint64(len(r)) || d.Features == nil {
			t.Fatalf("word %#x = %#x: listed %+v", o, v, d)
		}
	})
}
