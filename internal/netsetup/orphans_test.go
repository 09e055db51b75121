package netsetup_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/testenv"
)

// A namespace named after a process that is gone is removed; one named
// after a live process (ours) stays.
func TestDeleteOrphans(t *testing.T) {
	testenv.NeedTUN(t, "creates network namespaces and devices")
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("dntest-orphan%d-", os.Getpid())
	orphan := fmt.Sprintf("%s%d", prefix, dead.Process.Pid)
	live := fmt.Sprintf("%s%d", prefix, os.Getpid())
	for _, name := range []string{orphan, live} {
		ns, err := netsetup.NewNamespace(name)
		if err != nil {
			t.Fatal(err)
		}
		ns.Close()
		defer netsetup.DeleteNamespace(name)
	}
	gone, err := netsetup.DeleteOrphans(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(gone, []string{orphan}) {
		t.Fatalf("removed %v, want only %s", gone, orphan)
	}
	if _, err := os.Lstat(filepath.Join("/run/netns", orphan)); err == nil {
		t.Fatal("the orphan is still there")
	}
	if _, err := os.Lstat(filepath.Join("/run/netns", live)); err != nil {
		t.Fatalf("the live process's namespace went too: %v", err)
	}
}
