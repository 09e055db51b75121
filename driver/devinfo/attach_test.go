package devinfo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A daemon's sockets come in node order, not name order; a directory
// with none is refused by name, and a socket nobody serves fails the
// attach naming it. (Attaching to a live daemon is tests/host_test.go's
// `dimmnet fs` and `stat`.)
func TestSocketsAndAttachAll(t *testing.T) {
	dir := t.TempDir()
	if _, err := Sockets(dir); !errors.Is(err, ErrNoDevices) {
		t.Fatalf("empty directory: %v, want ErrNoDevices", err)
	}
	if _, err := AttachAll(dir); !errors.Is(err, ErrNoDevices) {
		t.Fatalf("empty directory: AttachAll: %v, want ErrNoDevices", err)
	}
	for _, n := range []string{"node10.sock", "node2.sock", "node0.sock", "other.sock"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	socks, err := Sockets(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range socks {
		names = append(names, filepath.Base(s))
	}
	if got := strings.Join(names, " "); got != "node0.sock node2.sock node10.sock" {
		t.Errorf("sockets %s, want node0 node2 node10", got)
	}
	if _, err := AttachAll(dir); err == nil || !strings.Contains(err.Error(), "node0.sock") {
		t.Errorf("attaching to a plain file: %v, want an error naming node0.sock", err)
	}
}
