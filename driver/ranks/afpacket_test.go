package ranks

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// An afpacket rank names what is missing: its interface, or the
// privilege raw sockets need.
func TestAFPacketErrors(t *testing.T) {
	_, err := Open(Options{Link: "afpacket", IfName: "dnnosuch0", Node: 1, RegionSize: 1 << 20})
	if !errors.Is(err, ErrNoInterface) {
		t.Fatalf("missing interface: %v, want ErrNoInterface", err)
	}
	t.Setenv("DIMMNET_LINK", "afpacket")
	t.Setenv("DIMMNET_IFNAME", "dnnosuch1")
	if _, err := Open(Options{Node: 1, RegionSize: 1 << 20}); !errors.Is(err, ErrNoInterface) {
		t.Fatalf("from the environment: %v, want ErrNoInterface", err)
	}
	if os.Geteuid() == 0 {
		t.Log("running as root: the refusal of the raw socket cannot be seen")
		return
	}
	if _, err := Open(Options{Link: "afpacket", IfName: "lo", Node: 1, RegionSize: 1 << 20}); !errors.Is(err, ErrNeedRoot) {
		t.Fatalf("as a user: %v, want ErrNeedRoot", err)
	}
}

// Without DIMMNET_IFNAME an afpacket rank takes the interface of the
// default route.
func TestDefaultInterface(t *testing.T) {
	f := filepath.Join(t.TempDir(), "route")
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n" +
		"eth0\t00000000\t0102A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
	if err := os.WriteFile(f, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	old := routeFile
	routeFile = f
	defer func() { routeFile = old }()
	if n, ok := DefaultInterface(); !ok || n != "eth0" {
		t.Fatalf("default interface %q %v, want eth0", n, ok)
	}
	if err := os.WriteFile(f, []byte(table[:len(table)-len("eth0\t00000000\t0102A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n")]), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok := DefaultInterface(); ok {
		t.Fatal("a default interface without a default route")
	}
}
