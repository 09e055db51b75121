package tests

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// `dimmnet pingpong --link shm` runs its two ends as two processes, each
// embedding its device, on the shared-memory link; every payload is
// checked, and the raw baselines between processes (memcpy included, for
// the bandwidth ratio) come in the same JSON.
func TestShmPingPongCLI(t *testing.T) {
	out, err := exec.Command(dimmnet(t), "pingpong", "--link", "shm", "--verify",
		"--json", "-q", "--max", "65536", "--iters", "50", "--raw-time", "50ms").Output()
	if err != nil {
		t.Fatalf("pingpong --link shm: %v", err)
	}
	var all []pingpong.Result
	if err := json.Unmarshal(out, &all); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	recs, raw := splitRaw(all)
	if len(recs) != 14*4 {
		t.Fatalf("%d records, want 56 (14 sizes x PUSH/IPUSH x linkmem/hostcopy)", len(recs))
	}
	for _, r := range recs {
		if r.Link != "shm" || r.Path != "process" || r.Iters != 50 || r.RTTHalfUs <= 0 || r.MBps <= 0 || r.Verified < r.Iters {
			t.Fatalf("record %+v", r)
		}
	}
	var lat []pingpong.Result
	memcpy := 0.0
	for _, r := range raw {
		if r.Condition == pingpong.CondMemcpy {
			memcpy = r.MBps
			continue
		}
		lat = append(lat, r)
	}
	checkRaw(t, lat)
	if memcpy <= 0 {
		t.Fatalf("no memcpy baseline among %+v", raw)
	}
}

// Its table sets the device beside the word ping-pong and memcpy.
func TestShmPingPongPrintsRatios(t *testing.T) {
	out, err := exec.Command(dimmnet(t), "pingpong", "--link", "shm", "-q", "--max", "1024", "--iters", "20", "--raw-time", "50ms").Output()
	if err != nil {
		t.Fatalf("pingpong --link shm: %v", err)
	}
	for _, want := range []string{"shared-memory link", "x the raw word ping-pong", "x memcpy", "hand-off limit"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
