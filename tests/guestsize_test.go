package tests

import (
	"os/exec"
	"strings"
	"testing"
)

// The dimmnet binary is also a lab guest's /init, unpacked into a 128 MiB
// guest's memory: the plotting library (8 MB of code and fonts) once made
// the initramfs fail to unpack. It belongs to cmd/dimmnet-plot only.
func TestGuestBinaryHasNoPlotting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/dimmnet/dimmnet/cmd/dimmnet").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "gonum.org/") || strings.HasPrefix(pkg, "golang.org/x/image") {
			t.Fatalf("cmd/dimmnet depends on %s: keep plotting in cmd/dimmnet-plot", pkg)
		}
	}
}
