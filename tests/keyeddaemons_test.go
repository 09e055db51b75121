package tests

import (
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/uapi"
)

// keyFile writes a fresh 32-byte pre-shared key, mode 0600.
func keyFile(t *testing.T) string {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, k, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Two daemons sharing a key over UDP: their devices make a session each
// way and ping-pong with every frame authenticated (no CRC on the wire:
// the tag replaces it); a daemon with another key gets nothing through.
func TestTwoKeyedDaemonsOverUDP(t *testing.T) {
	key := keyFile(t)
	peers := udpPeersFile(t)
	a := startDaemon(t, 1, "--link", "udp", "--peers", peers, "--node-base", "0", "--key", key)
	b := startDaemon(t, 1, "--link", "udp", "--peers", peers, "--node-base", "1", "--key", key)
	out, err := exec.Command(dimmnet(t), "pingpong", "--attach", a.sock(0)+","+b.sock(1),
		"--json", "-q", "--max", "4096", "--iters", "20", "--raw-time", "50ms", "--verify").Output()
	if err != nil {
		t.Fatalf("pingpong over keyed UDP: %v\n%s\n%s", err, a.stderr, b.stderr)
	}
	var all []pingpong.Result
	if err := json.Unmarshal(out, &all); err != nil {
		t.Fatal(err)
	}
	if recs, _ := splitRaw(all); len(recs) == 0 {
		t.Fatalf("no records:\n%s", out)
	}
	for i, sock := range []string{a.sock(0), b.sock(1)} {
		d := attach(t, sock)
		if d.Counter(uapi.CtrAuthSessions) == 0 || d.Counter(uapi.CtrRxPkts) == 0 || d.Counter(uapi.CtrAuthFail) != 0 {
			t.Fatalf("node %d: AUTH_SESSIONS %d RX_PKTS %d AUTH_FAIL %d", i,
				d.Counter(uapi.CtrAuthSessions), d.Counter(uapi.CtrRxPkts), d.Counter(uapi.CtrAuthFail))
		}
	}
}

// A daemon refuses a key file others may read, and one that is too short,
// naming why.
func TestServeRefusesWeakKey(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	if err := os.WriteFile(open, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{open: "readable by group or others", short: "shorter than 16 bytes"} {
		out, err := exec.Command(dimmnet(t), "serve", "--dir", filepath.Join(dir, "d"+filepath.Base(key)), "--key", key).CombinedOutput()
		if err == nil || !strings.Contains(string(out), want) {
			t.Fatalf("serve --key %s: %v, want an error naming %q:\n%s", key, err, want, out)
		}
	}
}
