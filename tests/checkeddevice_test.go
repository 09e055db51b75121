package tests

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/uapi"
)

// A daemon's checked devices: the project's own driver ping-pongs through
// them with no violation; a driver that stores into a read-only register
// and moves its status head past the tail gets both named once, by
// `dimmnet stat`, with the datasheet section that states each rule.
func TestCheckedDaemonNamesAWrongDriver(t *testing.T) {
	d := startDaemon(t, 2, "--check")
	out, err := exec.Command(dimmnet(t), "pingpong", "--attach", d.sock(0)+","+d.sock(1),
		"--json", "-q", "--max", "4096", "--iters", "200", "--raw-time", "50ms").Output()
	if err != nil {
		t.Fatalf("pingpong: %v\n%s", err, d.stderr)
	}
	var all []pingpong.Result
	if err := json.Unmarshal(out, &all); err != nil {
		t.Fatal(err)
	}
	recs, _ := splitRaw(all)
	if len(recs) == 0 {
		t.Fatal("no records")
	}
	for _, r := range recs {
		if r.Violations != 0 {
			t.Fatalf("the project's driver broke the datasheet %d times (%s %s %d B)", r.Violations, r.Mode, r.Condition, r.Size)
		}
	}
	drv := attach(t, d.sock(0))
	if n := drv.Counter(uapi.CtrViolations); n != 0 {
		t.Fatalf("node 0: %d violations after a correct ping-pong", n)
	}
	if drv.Region().Load64(uapi.RegFeatures)&uapi.FeatCheck == 0 {
		t.Fatal("FEATURES lacks CHECK")
	}

	// Now a wrong driver.
	r := drv.Region()
	r.Store64(uapi.RegNodeID, 42)
	r.Store64(uapi.RegStatqHead, r.Load64(uapi.RegStatqTail)+3)
	eventually(t, "both violations counted", func() bool { return drv.Counter(uapi.CtrViolations) == 2 })
	st, err := exec.Command(dimmnet(t), "stat", d.sock(0)).CombinedOutput()
	if err != nil {
		t.Fatalf("stat: %v\n%s", err, st)
	}
	text := string(st)
	_, viol, ok := strings.Cut(text, "\nviolations\n")
	if !ok {
		t.Fatalf("stat has no violations section:\n%s", text)
	}
	for _, want := range []string{"READ_ONLY index 0 at NODE_ID: expected 0x0, got 0x2a (datasheet: Registers)", "STATUS_HEAD", "(datasheet: Consuming statuses)"} {
		if !strings.Contains(viol, want) {
			t.Fatalf("violations section lacks %q:\n%s", want, viol)
		}
	}
	if n := strings.Count(viol, "READ_ONLY"); n != 1 {
		t.Fatalf("READ_ONLY named %d times, want once:\n%s", n, viol)
	}
	r.Store64(uapi.RegNodeID, 0) // put it back, as the daemon's stop checks nothing of it
}
