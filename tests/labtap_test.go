package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/internal/testenv"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// --link tap: a daemon per guest, each device's TAP on a bridge in a
// network namespace the lab makes; every payload verified, the frames
// captured (--pcap), and nothing left behind: no process, namespace,
// bridge, TAP, socket or /dev/shm file. Root only.
func TestLabLinkTAP(t *testing.T) {
	if os.Getenv("DIMMNET_VM_TESTS") != "1" {
		t.Skip("VM test: set DIMMNET_VM_TESTS=1")
	}
	testenv.NeedRoot(t, "--link tap makes a network namespace, a bridge and TAPs")
	dir := t.TempDir()
	pcap := filepath.Join(t.TempDir(), "lab.pcap")
	stderr, lab := labLinkRun(t, dir, "tap", []string{"word", "irq"}, "--pcap", pcap)

	// The capture holds the pair's traffic in both directions.
	f, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := capture.NewReader(f) // pcapng or pcap
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[[2]uint16]int{}
	p := wire.NewParser()
	for {
		frame, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if h, _, err := p.Parse(frame); err == nil && h.Type == wire.TypePush {
			dirs[[2]uint16{h.SrcNode, h.DstNode}]++
		}
	}
	if dirs[[2]uint16{0, 1}] == 0 || dirs[[2]uint16{1, 0}] == 0 {
		t.Fatalf("PUSH frames captured per direction %v, want both", dirs)
	}

	// Nothing left behind.
	if o, _ := exec.Command("pgrep", "-f", filepath.Join(dir, "sock")).Output(); len(o) > 0 {
		t.Fatalf("processes left: %s", o)
	}
	// The daemons' regions, as their ready lines named them, and the raw one.
	regions := regexp.MustCompile(`region (\S+)`).FindAllStringSubmatch(stderr, -1)
	if len(regions) != 2 {
		t.Fatalf("%d daemon regions named, want 2\n%s", len(regions), stderr)
	}
	for _, m := range regions {
		if _, err := os.Stat(m[1]); err == nil {
			t.Fatalf("region %s left behind", m[1])
		}
	}
	// The lab's own raw region and namespace, by its pid: other labs may
	// run on this machine meanwhile.
	if _, err := os.Stat(fmt.Sprintf("/dev/shm/dimmnet-lab-%d-raw", lab)); err == nil {
		t.Fatal("raw region left behind")
	}
	ns := fmt.Sprintf("dimmnet-lab-%d", lab)
	if !strings.Contains(stderr, "network namespace "+ns+": bridge dnlabbr") {
		t.Fatalf("the lab did not name its namespace %s\n%s", ns, stderr)
	}
	// The bridge and TAPs lived only in the namespace: they went with it.
	if _, err := os.Lstat(filepath.Join("/run/netns", ns)); err == nil {
		t.Fatalf("network namespace %s left behind", ns)
	}
	if socks, _ := filepath.Glob(filepath.Join(dir, "sock", "*", "*.sock")); len(socks) > 0 {
		t.Fatalf("sockets left: %v", socks)
	}
}

// Without root, --link tap and afpacket are refused before anything is
// made, naming what needs root and the unprivileged choice. Run as
// nobody (setpriv) when the tests run as root.
func TestLabTAPNeedsRoot(t *testing.T) {
	testenv.NeedRoot(t, "the test drops to nobody with setpriv")
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv (util-linux) to drop privileges with")
	}
	// A copy nobody can reach: the built binary's directory is private.
	dir, err := os.MkdirTemp("", "dimmnet-nobody")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	b, err := os.ReadFile(dimmnet(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "dimmnet")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"tap", "afpacket"} {
		work := filepath.Join(dir, "lab-"+kind)
		out, err := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "lab", "pingpong", "--link", kind, "--dir", work).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--link "+kind+" needs root") || !strings.Contains(string(out), "--link udp without root") {
			t.Fatalf("--link %s as nobody: %v: %s", kind, err, out)
		}
		if _, err := os.Stat(work); err == nil {
			t.Fatalf("--link %s as nobody made %s before refusing", kind, work)
		}
	}
}
