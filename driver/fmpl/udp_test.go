package fmpl_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ranks on hosts of their own talk UDP, each finding the others in a
// peers file; here the hosts are loopback ports.
func TestUDPPeersFile(t *testing.T) {
	var b strings.Builder
	for r := 0; r < 2; r++ {
		l, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "node %d %s\n", r+1, l.LocalAddr())
		l.Close()
	}
	peers := filepath.Join(t.TempDir(), "peers")
	if err := os.WriteFile(peers, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	mustContain(t, runRanks(t, 2, "pingpong", "FMPL_TEST_LINK=udp", "FMPL_TEST_PEERS="+peers), "ok")
}
