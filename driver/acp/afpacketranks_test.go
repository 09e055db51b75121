package acp_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/testenv"
)

// afpacketSegment makes a namespace with a bridge and n veths for one
// test and removes it afterwards; the test skips without root.
func afpacketSegment(t *testing.T, n int) *netsetup.Segment {
	t.Helper()
	testenv.NeedRoot(t, "makes a network namespace, a bridge and veths, and opens AF_PACKET sockets")
	name := fmt.Sprintf("dntest-acp-%d", os.Getpid())
	seg, err := netsetup.NewSegment(name, n, 9000)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := seg.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Lstat(filepath.Join("/run/netns", name)); err == nil {
			t.Errorf("namespace %s left behind", name)
		}
	})
	return seg
}

// TestConformanceOverAFPacket is the conformance program once more, the
// ranks' devices exchanging raw Ethernet frames: each rank process runs
// inside a namespace the test makes, on a veth of its own whose other end
// is on one bridge, as hosts on one switch. Same checks as in-process, on
// the shared-memory link and on UDP: the paper's section 7, one program
// on every transport.
func TestConformanceOverAFPacket(t *testing.T) {
	sameResults(t, runRanksOn(t, afpacketSegment(t, 3), 3, "conformance", "ACP_TEST_LINK=afpacket"))
}

// TestDeviceAtomicsOverAFPacket is the conformance program with Add8 and
// CAS8 done by the target's receive engine, on AF_PACKET.
func TestDeviceAtomicsOverAFPacket(t *testing.T) {
	sameResults(t, runRanksOn(t, afpacketSegment(t, 3), 3, "conformance", "ACP_TEST_LINK=afpacket", "ACP_TEST_DEVICE_ATOMICS=1"))
}
