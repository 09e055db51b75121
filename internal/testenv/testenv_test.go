package testenv

import (
	"os"
	"testing"
)

// NeedRoot skips exactly when the process is not root: a test that runs
// past it as non-root, or is skipped as root, fails.
func TestNeedRootSkipsOnlyNonRoot(t *testing.T) {
	ran := false
	ok := t.Run("inner", func(t *testing.T) {
		NeedRoot(t, "checks the helper")
		ran = true
	})
	if !ok {
		t.Fatal("inner test failed")
	}
	if root := os.Geteuid() == 0; ran != root {
		t.Errorf("euid %d: ran past NeedRoot %v, want %v", os.Geteuid(), ran, root)
	}
}
