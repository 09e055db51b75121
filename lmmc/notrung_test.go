package lmmc

import (
	"bytes"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/drivertest"
	"github.com/dimmnet/dimmnet/vdev"
)

// Writes and pagings whose commands find both nodes' doorbells dead
// (driver.ErrNotRung) are posted, and LMMC treats them so: every Write
// succeeds, every byte is read back on the receiver, the paging tables
// of both ends agree, and Stats counts the commands as NotRung. LMMC took
// the error for a failure: a Write that still landed was reported
// failed, and a paging request the receiver acted on left the sender's
// tables as they were.
func TestWriteNotRungStillPages(t *testing.T) {
	const ports, writes = 5, 40
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var ns []*Node
	var bells []*drivertest.Bell
	for _, dev := range l.Devices {
		bell := drivertest.NewBell(driver.InProcessDevice(dev))
		d, err := driver.Open(bell)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		n, err := Init(d, Config{Nodes: []uint16{1, 2}, FramesPerPeer: 2, Policy: "lru"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		ns, bells = append(ns, n), append(bells, bell)
	}
	a, b := ns[0], ns[1]
	ps := a.PageSize()
	w, r := a.NewProcess("w"), b.NewProcess("r")
	for port := uint16(1); port <= ports; port++ {
		if err := w.MapSend(uint64(port)*ps, 2, port); err != nil {
			t.Fatal(err)
		}
		if err := r.MapRecv(uint64(port)*ps, 1, port); err != nil {
			t.Fatal(err)
		}
	}
	for _, bell := range bells {
		bell.Kill(true)
	}
	want := map[uint16][]byte{}
	for i := range writes {
		port := uint16(1 + i%ports) // five ports through two frames: every write pages
		if want[port] == nil {
			want[port] = make([]byte, ps)
		}
		off := (i * 97) % int(ps-64)
		data := bytes.Repeat([]byte{byte(i + 1)}, 64)
		copy(want[port][off:], data)
		if err := drivertest.WaitAsleep(a.Driver(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := w.Write(uint64(port)*ps+uint64(off), data); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	quiesce(t, a, b)
	checkPorts(t, r, ps, want)
	sa, sb := a.Stats(), b.Stats()
	if sa.Writes != writes {
		t.Fatalf("%d remote writes posted for %d one-page writes", sa.Writes, writes)
	}
	if sa.Faults == 0 || sb.PagesOut == 0 {
		t.Fatalf("no paging happened: %+v %+v", sa, sb)
	}
	if bells[0].Failed() == 0 || sa.NotRung == 0 {
		t.Fatalf("no command of the writer met its dead doorbell (%d failed kicks): %+v", bells[0].Failed(), sa)
	}
	t.Logf("writer: %d failed kicks, %+v; receiver: %d failed kicks, %+v", bells[0].Failed(), sa, bells[1].Failed(), sb)
}
