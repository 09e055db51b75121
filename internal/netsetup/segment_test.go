package netsetup_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/testenv"
)

// A segment is a namespace with a bridge and a veth per station, every
// interface up with the MTU asked for, one end of each pair on the bridge;
// a process started in it sees those interfaces; Close leaves nothing.
func TestSegment(t *testing.T) {
	testenv.NeedTUN(t, "creates network namespaces and devices")
	name := fmt.Sprintf("dntest-segment-%d", os.Getpid())
	seg, err := netsetup.NewSegment(name, 3, 9000)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			seg.Close()
		}
	}()
	err = netsetup.Run(seg.NS, func() error {
		br, err := netlink.LinkByName("dnbr")
		if err != nil {
			return err
		}
		for i := range 3 {
			end, err := netlink.LinkByName(seg.IfName(i))
			if err != nil {
				return err
			}
			port, err := netlink.LinkByName(fmt.Sprintf("dnbp%d", i))
			if err != nil {
				return err
			}
			if end.Attrs().MTU != 9000 || port.Attrs().MTU != 9000 || end.Attrs().OperState != netlink.OperUp {
				return fmt.Errorf("%s: mtu %d, state %s", seg.IfName(i), end.Attrs().MTU, end.Attrs().OperState)
			}
			if port.Attrs().MasterIndex != br.Attrs().Index || end.Attrs().MasterIndex != 0 {
				return fmt.Errorf("station %d: the port is not on the bridge, or the station's end is", i)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	c := exec.Command("cat", "/proc/net/dev")
	c.Stdout = &out
	if err := seg.Start(c); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), seg.IfName(2)+":") {
		t.Fatalf("a process started in the segment does not see %s:\n%s", seg.IfName(2), out.String())
	}
	closed = true
	if err := seg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join("/run/netns", name)); err == nil {
		t.Fatalf("namespace %s left behind", name)
	}
}
