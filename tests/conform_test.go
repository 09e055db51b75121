package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/conform"
)

// runConform runs `dimmnet conform --json` on a program and returns the
// verdicts by situation (the command's own exit status says whether all
// passed, which the verdicts already say).
func runConform(t *testing.T, only string, program ...string) map[string]conform.Result {
	t.Helper()
	args := []string{"conform", "--json", "-q", "--limit", "25s"}
	if only != "" {
		args = append(args, "--only", only)
	}
	out, _ := exec.Command(dimmnet(t), append(append(args, "--"), program...)...).Output()
	var res []conform.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("conform output: %v\n%s", err, out)
	}
	m := map[string]conform.Result{}
	for _, r := range res {
		m[r.Situation] = r
	}
	return m
}

func python(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	return py
}

// The project's own driver and the datasheet-only Python example pass
// every situation.
func TestConformPassesGoodDrivers(t *testing.T) {
	py := python(t)
	bin := dimmnet(t)
	for name, prog := range map[string][]string{
		"python example": {py, "../docs/examples/pydriver.py"},
		"project driver": {"sh", "-c", bin + " pingpong --attach $DIMMNET_DIR/node0.sock,$DIMMNET_DIR/node1.sock -q --max 64 --iters 5 --raw-time 20ms"},
	} {
		res := runConform(t, "", prog...)
		if len(res) != len(conform.Situations()) {
			t.Fatalf("%s: %d verdicts, want %d", name, len(res), len(conform.Situations()))
		}
		for _, r := range res {
			if !r.Pass || r.Violations != 0 {
				t.Errorf("%s: %s: %s (%d violations %v)\n%s", name, r.Situation, r.Verdict, r.Violations, r.Logged, r.Output)
			}
		}
	}
}

// Broken drivers fail where they are broken: one that never rings the
// doorbell is named NO_DOORBELL where the device sleeps; one that skips
// its first command index is named SKIPPED_INDEX; one that never
// publishes its status head stalls a 2-entry status ring and times out,
// while it passes where the ring is large.
func TestConformFailsBrokenDrivers(t *testing.T) {
	py := python(t)
	src, err := os.ReadFile("../docs/examples/pydriver.py")
	if err != nil {
		t.Fatal(err)
	}
	broken := func(name, old, new string) string {
		t.Helper()
		if !strings.Contains(string(src), old) {
			t.Fatalf("pydriver.py no longer has %q", old)
		}
		p := filepath.Join(t.TempDir(), name+".py")
		if err := os.WriteFile(p, []byte(strings.Replace(string(src), old, new, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noBell := broken("nobell", "        if self.ld(DEV_SLEEP):\n            self.ring()", "        pass  # broken: never rings")
	res := runConform(t, "sleeping-device", py, noBell)
	r := res["sleeping-device"]
	if r.Pass || !strings.Contains(strings.Join(r.Logged, "\n"), "NO_DOORBELL") {
		t.Fatalf("a driver that never rings passed the sleeping device: %+v", r)
	}

	// A driver whose first index is one too far stalls the queue: the
	// checked device names the index it waits at.
	skip := broken("skip", "        idx = self.next_index\n", "        idx = self.next_index + (self.next_index == self.first_index)  # broken: skips its first index\n")
	res = runConform(t, "plain", py, skip)
	if r := res["plain"]; r.Pass || !strings.Contains(strings.Join(r.Logged, "\n"), "SKIPPED_INDEX") {
		t.Fatalf("a driver that skips an index was not named SKIPPED_INDEX: %+v", r)
	}

	noHead := broken("nohead", "        self.st(STATQ_HEAD, self.head)  # after reading the entry", "        pass  # broken: never publishes its head")
	res = runConform(t, "plain,status-ring-full", py, noHead)
	if r := res["plain"]; !r.Pass {
		t.Fatalf("the head-less driver fails even the plain situation: %+v", r)
	}
	if r := res["status-ring-full"]; r.Pass {
		t.Fatalf("a driver that never publishes its status head passed a 2-entry status ring: %+v", r)
	}
}
