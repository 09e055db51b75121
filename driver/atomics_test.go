package driver_test

import (
	"encoding/binary"
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// TestRemoteAtomicsOnceOverALossyLink: the receive engine performs each
// FADD8 and CAS8 exactly once although the link loses, duplicates and
// reorders frames, the old value comes back in PULL_DONE and at
// LOCAL_ADDR, and a word outside the window is refused untouched.
func TestRemoteAtomicsOnceOverALossyLink(t *testing.T) {
	fc, err := impair.Parse("loss=0.1,dup=0.1,reorder=0.1,seed=3")
	if err != nil {
		t.Fatal(err)
	}
	hub := link.NewHub(4096+wire.FrameOverhead, 256)
	l, err := vdev.NewLocalPorts(vdev.Config{}, []uint16{1, 2}, func(d *vdev.Device) (link.Port, error) {
		p, err := hub.Attach(d.MAC())
		if err != nil {
			return nil, err
		}
		c := fc
		c.Seed += int64(d.Node())
		return impair.Wrap(p, c), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := driver.Open(driver.InProcessDevice(l.Devices[1]))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const word, n = 4096, 300
	wait := func(op uapi.Opcode) uapi.Status {
		t.Helper()
		for {
			s, err := a.Wait(0)
			if err != nil {
				t.Fatal(err)
			}
			if s.Type == uapi.StError {
				t.Fatalf("%v failed: %v", op, s.Err)
			}
			if s.Type == uapi.StPULLDone && s.Opcode == op {
				return s
			}
		}
	}
	seen := map[uint64]bool{}
	for i := range n {
		if _, err := a.FetchAdd8(2, 64, word, 1, uint64(i)); err != nil {
			t.Fatal(err)
		}
		s := wait(uapi.OpFADD8)
		if at := binary.LittleEndian.Uint64(a.LinkMem()[64:]); at != s.Imm || seen[s.Imm] || s.Imm >= n {
			t.Fatalf("fetch-add %d: old value %d (at LOCAL_ADDR %d), seen before %v", i, s.Imm, at, seen[s.Imm])
		}
		seen[s.Imm] = true
	}
	if v := binary.LittleEndian.Uint64(b.LinkMem()[word:]); v != n {
		t.Fatalf("word after %d fetch-adds of 1: %d", n, v)
	}
	if a.Counter(uapi.CtrRetransmits)+b.Counter(uapi.CtrRetransmits) == 0 || b.Counter(uapi.CtrDuplicates) == 0 {
		t.Fatal("no frame was resent or duplicated: the link tested nothing")
	}
	if _, err := a.CAS8(2, 64, word, n, 7, 0); err != nil {
		t.Fatal(err)
	}
	if s := wait(uapi.OpCAS8); s.Imm != n {
		t.Fatalf("CAS8 that should swap returned %d", s.Imm)
	}
	if _, err := a.CAS8(2, 64, word, n, 9, 0); err != nil {
		t.Fatal(err)
	}
	if s := wait(uapi.OpCAS8); s.Imm != 7 {
		t.Fatalf("CAS8 that should not swap returned %d", s.Imm)
	}
	if v := binary.LittleEndian.Uint64(b.LinkMem()[word:]); v != 7 {
		t.Fatalf("word after the CASes: %d, want 7", v)
	}
	b.SetWindow(8192, 4096)
	if _, err := a.FetchAdd8(2, 64, word, 1, 0); err != nil {
		t.Fatal(err)
	}
	for {
		s, err := a.Wait(0)
		if err != nil {
			t.Fatal(err)
		}
		if s.Type == uapi.StError {
			if s.Err != uapi.ERemoteAddr {
				t.Fatalf("outside the window: %v, want REMOTE_ADDR", s.Err)
			}
			break
		}
		if s.Type == uapi.StPULLDone {
			t.Fatal("a fetch-add outside the window completed")
		}
	}
	if v := binary.LittleEndian.Uint64(b.LinkMem()[word:]); v != 7 {
		t.Fatalf("word outside the window changed to %d", v)
	}
	if _, err := a.FetchAdd8(2, 64, 8196, 1, 0); err != nil {
		t.Fatal(err)
	}
	for {
		s, err := a.Wait(0)
		if err != nil {
			t.Fatal(err)
		}
		if s.Type == uapi.StError {
			if s.Err != uapi.EBadAlign {
				t.Fatalf("misaligned: %v, want BAD_ALIGN", s.Err)
			}
			break
		}
	}
}
