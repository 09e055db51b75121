package tests

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// pingpong --attach --verify: both processes check every payload. Each
// record counts the initiator's checks (warm-up + iters), and the table
// reports the responder's too: every message of the plan, each way.
func TestTwoProcessPingPongVerified(t *testing.T) {
	d := startDaemon(t, 2)
	const iters, warm, runs = 20, 2, 6 * 4 // 8 B .. 256 B x PUSH/IPUSH x linkmem/hostcopy
	args := []string{"pingpong", "--attach", d.sock(0) + "," + d.sock(1), "--verify", "-q", "--max", "256", "--iters", strconv.Itoa(iters), "--raw-time", "50ms"}
	out, err := exec.Command(dimmnet(t), append(args, "--json")...).Output()
	if err != nil {
		t.Fatalf("pingpong --json: %v\n%s", err, d.stderr)
	}
	var all []pingpong.Result
	if err := json.Unmarshal(out, &all); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	recs, _ := splitRaw(all)
	if len(recs) != runs {
		t.Fatalf("%d records, want %d", len(recs), runs)
	}
	for _, r := range recs {
		if r.Verified != warm+iters {
			t.Fatalf("record %+v: verified %d, want %d (the initiator's checks)", r, r.Verified, warm+iters)
		}
	}
	out, err = exec.Command(dimmnet(t), args...).Output()
	if err != nil {
		t.Fatalf("pingpong: %v\n%s", err, d.stderr)
	}
	m := regexp.MustCompile(`payloads verified byte for byte: (\d+) by the initiator, (\d+) by the responder`).FindSubmatch(out)
	want := strconv.Itoa(runs * (warm + iters))
	if m == nil || string(m[1]) != want || string(m[2]) != want {
		t.Fatalf("verified counts %q, want %s each\n%s", m, want, out)
	}
}
