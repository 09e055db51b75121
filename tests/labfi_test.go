package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/qemu/lab"
)

// Issue 35's "between the two VMs": libfabric's own fi_pingpong, the
// host's dynamically linked binary unmodified, runs in two TCG guests over
// their dimmnet devices through the project's provider (FI_DIMMNET_LINK=pci,
// loaded from the initramfs by FI_PROVIDER_PATH), every size from 0 bytes
// to 32 KiB (eager and rendezvous), data checked by fi_pingpong itself
// (-c). The client's table parses into a row per size with its figures,
// each guest's provider counted the sends and receives it made, and both
// guests attached through VFIO. Iterations stay few: TCG is slow.
func TestLabFiPingpong(t *testing.T) {
	if os.Getenv("DIMMNET_VM_TESTS") != "1" {
		t.Skip("VM test: set DIMMNET_VM_TESTS=1 (it boots two QEMU guests under TCG)")
	}
	if _, err := exec.LookPath("fi_pingpong"); err != nil {
		t.Skip("no fi_pingpong: Debian's libfabric-bin")
	}
	if _, err := os.Stat("/usr/include/rdma/providers/fi_prov.h"); err != nil {
		t.Skip("no libfabric headers to build the provider: Debian's libfabric-dev")
	}
	dir := t.TempDir()
	const iters, maxSize = 10, 32 << 10
	cmd := exec.Command(dimmnet(t), "lab", "fi_pingpong", "--dir", dir, "--json", "--max", fmt.Sprint(maxSize), "--iters", fmt.Sprint(iters))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lab: %v\n%s", err, stderr.String())
	}
	var rep lab.FiReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	// fi_pingpong -S all: 0, 1, 2, 3, 4, 6, 8, 12, ... 24k, 32k.
	if len(rep.Results) < 20 || rep.Results[0].Size != 0 || rep.Results[len(rep.Results)-1].Size != maxSize {
		t.Fatalf("sizes %+v, want 0 .. %d", rep.Results, maxSize)
	}
	for _, r := range rep.Results {
		if r.Iters != iters || r.UsecPerXfer <= 0 || (r.Size > 0 && r.MBps < 0) {
			t.Fatalf("row %+v", r)
		}
	}
	if rep.Attach != [2]string{"vfio", "vfio"} {
		t.Fatalf("attached through %v, want vfio in both guests", rep.Attach)
	}
	// Every ping and pong went through the provider: each side sent and
	// received one message per iteration and size (fi_pingpong adds a
	// few of its own for synchronisation), the 32 KiB ones by rendezvous.
	msgs := iters * len(rep.Results)
	for i, st := range rep.Stats {
		var node, sends, rdv, recvs, w, r, a int
		if _, err := fmt.Sscanf(st, "node %d {Sends:%d Rendezvous:%d Recvs:%d RMAWrites:%d RMAReads:%d Atomics:%d}",
			&node, &sends, &rdv, &recvs, &w, &r, &a); err != nil || node != i || sends < msgs || recvs < msgs || rdv < iters {
			t.Fatalf("guest %d's provider counts %q (%v): want node %d, at least %d sends and receives, %d rendezvous", i, st, err, i, msgs, iters)
		}
	}
	for _, g := range []string{"guest0.log", "guest1.log"} {
		b, err := os.ReadFile(filepath.Join(dir, g))
		if err != nil || !strings.Contains(string(b), "DIMMNET-DONE ok") {
			t.Fatalf("%s: %v\n%s", g, err, b)
		}
	}
	labLeftNothing(t, dir)
	t.Logf("\n%s", stderr.String())
}
