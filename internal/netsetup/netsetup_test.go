package netsetup_test

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/testenv"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

func TestSetupIdempotentAndTeardown(t *testing.T) {
	testenv.NeedTUN(t, "creates network namespaces and devices")
	name := fmt.Sprintf("dntest-setup-%d", os.Getpid())
	ns, err := netsetup.NewNamespace(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	defer netsetup.DeleteNamespace(name)
	ns2, err := netsetup.NewNamespace(name) // again: the same namespace
	if err != nil {
		t.Fatal(err)
	}
	if !ns.Equal(ns2) {
		t.Fatal("second NewNamespace returned another namespace")
	}
	ns2.Close()
	self, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer self.Close()
	if self.Equal(ns) {
		t.Fatal("NewNamespace left this thread in the new namespace")
	}

	for range 2 { // everything twice: the second round must succeed and change nothing
		if err := netsetup.VethPair(ns, "va", "vb", wire.NodeMAC(1), wire.NodeMAC(2)); err != nil {
			t.Fatal(err)
		}
		if err := netsetup.Bridge(ns, "br0"); err != nil {
			t.Fatal(err)
		}
		if err := netsetup.TAP(ns, "tap0", "br0", wire.NodeMAC(100)); err != nil {
			t.Fatal(err)
		}
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links := map[string]netlink.Link{}
	for _, n := range []string{"va", "vb", "br0", "tap0"} {
		l, err := h.LinkByName(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if l.Attrs().Flags&(1<<0) == 0 { // net.FlagUp
			t.Errorf("%s is down", n)
		}
		links[n] = l
	}
	if links["va"].Attrs().HardwareAddr.String() != wire.NodeMAC(1).String() || links["vb"].Attrs().HardwareAddr.String() != wire.NodeMAC(2).String() {
		t.Errorf("veth MACs %s %s", links["va"].Attrs().HardwareAddr, links["vb"].Attrs().HardwareAddr)
	}
	if links["tap0"].Attrs().MasterIndex != links["br0"].Attrs().Index {
		t.Error("tap0 is not on br0")
	}
	if _, err := netlink.LinkByName("va"); err == nil {
		t.Error("va also exists in the test's own namespace")
	}
	// A name taken by another kind of link is an error, not silently reused.
	if err := netsetup.Bridge(ns, "tap0"); err == nil {
		t.Error("Bridge over an existing TAP succeeded")
	}
	// Run enters the namespace and comes back.
	err = netsetup.Run(ns, func() error {
		_, err := netlink.LinkByName("br0")
		return err
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	for range 2 {
		for _, n := range []string{"va", "br0", "tap0"} {
			if err := netsetup.Delete(ns, n); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, n := range []string{"va", "vb", "br0", "tap0"} {
		var nf netlink.LinkNotFoundError
		if _, err := h.LinkByName(n); !errors.As(err, &nf) {
			t.Errorf("%s after Delete: %v", n, err)
		}
	}
	for range 2 {
		if err := netsetup.DeleteNamespace(name); err != nil {
			t.Fatal(err)
		}
	}
	if h, err := netns.GetFromName(name); err == nil {
		h.Close()
		t.Fatal("namespace still there after DeleteNamespace")
	}
}

func TestNotRootError(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: the refusal cannot be seen")
	}
	if _, err := netsetup.NewNamespace("dntest-x"); !errors.Is(err, netsetup.ErrNotRoot) {
		t.Fatalf("NewNamespace as a user: %v, want ErrNotRoot", err)
	}
	if err := netsetup.Bridge(netns.None(), "br-x"); !errors.Is(err, netsetup.ErrNotRoot) {
		t.Fatalf("Bridge as a user: %v, want ErrNotRoot", err)
	}
}
