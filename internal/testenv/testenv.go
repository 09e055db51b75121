// Package testenv holds what tests across the tree ask of the machine
// they run on, once: a test that needs root skips the same way, with its
// reason, everywhere, instead of each package writing its own check.
package testenv

import (
	"os"
	"testing"
)

// NeedRoot skips t unless the process runs as root; why says what the
// test does with it (it is the skip message).
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why)
	}
}

// NeedTUN is NeedRoot for tests that make network devices: it also skips
// when the kernel has no /dev/net/tun (a container without it).
func NeedTUN(t testing.TB, why string) {
	t.Helper()
	NeedRoot(t, why)
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
}
