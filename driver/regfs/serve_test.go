package regfs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev"
)

// TestServeUnmountsWhenDone serves a device's view until its context
// ends: the view is there while it serves, Serve says what it mounted,
// and once it returns the mount point is an empty directory again.
func TestServeUnmountsWhenDone(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("regfs needs FUSE and /dev/fuse is missing: %v", err)
	}
	mnt := t.TempDir()
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	devs := []Device{{Name: "node1", Region: l.Devices[0].Region()}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, mnt, devs, Options{}, &out) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(mnt, "node1")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("node1 never appeared under the mount (Serve: %v)", <-served)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if !strings.Contains(out.String(), "mounted 1 devices on "+mnt+" (read-only)") {
		t.Errorf("Serve said %q", out.String())
	}
	ents, err := os.ReadDir(mnt)
	if err != nil || len(ents) != 0 {
		t.Errorf("after Serve the mount point holds %d entries (%v), want an empty directory", len(ents), err)
	}
}
