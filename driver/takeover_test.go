package driver_test

import (
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// A driver taking over a used device starts after every command already
// published, even one whose driver died before it stored CMDQ_TAIL: the
// device will still take that slot, so it must not be rewritten.
func TestTakeoverStartsAfterPublishedCommands(t *testing.T) {
	dev, err := vdev.New(vdev.Config{Node: 1}) // not started: nothing takes the commands
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	open := func() *driver.Driver {
		d, err := driver.Open(driver.InProcess(dev.Region(), dev.DoorbellFD(), dev.InterruptFD()))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := open()
	for want := uint64(0); want < 3; want++ {
		idx, err := a.Post(&uapi.Desc{Opcode: uapi.OpNOP})
		if err != nil || idx != want {
			t.Fatalf("post %d: index %d, %v", want, idx, err)
		}
	}
	// A fourth command published without its tail, as by a driver that
	// died between the two stores.
	g := a.Geometry()
	a.Region().WriteDesc(g.CmdqOff+3*uapi.DescSize, &uapi.Desc{Opcode: uapi.OpNOP}, 3)
	if tail := a.Region().Load64(uapi.RegCmdqTail); tail != 3 {
		t.Fatalf("CMDQ_TAIL %d, want 3", tail)
	}
	a.Close()
	b := open()
	defer b.Close()
	idx, err := b.Post(&uapi.Desc{Opcode: uapi.OpNOP})
	if err != nil || idx != 4 {
		t.Fatalf("the new driver's first index %d (%v), want 4: it would rewrite a published slot", idx, err)
	}
}
