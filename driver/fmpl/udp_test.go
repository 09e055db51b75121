package fmpl_test

import (
	"path/filepath"
	"testing"

	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// Ranks on hosts of their own talk UDP, each finding the others in a
// peers file; here the hosts are loopback ports.
func TestUDPPeersFile(t *testing.T) {
	peers := filepath.Join(t.TempDir(), "peers")
	if err := link.WriteLoopbackPeers(peers, ranks.Nodes(2)...); err != nil {
		t.Fatal(err)
	}
	mustContain(t, runRanks(t, 2, "pingpong", "FMPL_TEST_LINK=udp", "FMPL_TEST_PEERS="+peers), "ok")
}
