package fmpl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/testenv"
)

// Ranks on AF_PACKET: each rank process runs inside a network namespace
// the test makes, its device on a veth of its own whose other end is on
// one bridge, as hosts on one Ethernet switch. No peers file: a device
// reaches a rank by its node's MAC (wire.NodeMAC).

// afpacketSegment makes a namespace with a bridge and n veths for one
// test and removes it afterwards; the test skips without root.
func afpacketSegment(t *testing.T, n int) *netsetup.Segment {
	t.Helper()
	testenv.NeedRoot(t, "makes a network namespace, a bridge and veths, and opens AF_PACKET sockets")
	name := fmt.Sprintf("dntest-fmpl-%d", os.Getpid())
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

// runRanksOn is runRanks with the ranks inside seg on AF_PACKET.
func runRanksOn(t *testing.T, seg *netsetup.Segment, n int, name string, env ...string) []string {
	t.Helper()
	outs, errs := startRanksOn(t, seg, n, name, append(env, "FMPL_TEST_LINK=afpacket")...)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d of %s: %v\nstdout: %s", r, name, err, outs[r])
		}
	}
	return outs
}

// Every size class, in link memory and host memory, contents checked at
// both ends, over raw Ethernet frames.
func TestAFPacketRanksPingPong(t *testing.T) {
	mustContain(t, runRanksOn(t, afpacketSegment(t, 2), 2, "pingpong"), "ok")
}

// Barrier, Bcast, Reduce and Allreduce of every type and op, checked by
// content, on four ranks over AF_PACKET.
func TestAFPacketRanksCollectives(t *testing.T) {
	mustContain(t, runRanksOn(t, afpacketSegment(t, 4), 4, "collectives"), "ok")
}

// Keyed links and checked devices on AF_PACKET: every frame on the
// bridge authenticated, FMPL's driver held to the datasheet.
func TestAFPacketRanksKeyedAndChecked(t *testing.T) {
	seg := afpacketSegment(t, 3)
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte("a pre-shared key of 32 bytes!!!!"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustContain(t, runRanksOn(t, seg, 3, "collectives", "DIMMNET_KEY="+key, "DIMMNET_CHECK=1"), "ok")
}
