package tests

import (
	"encoding/json"
	"os/exec"
	"runtime"
	"testing"

	"github.com/dimmnet/dimmnet/internal/provenance"
	"github.com/dimmnet/dimmnet/uapi"
)

// checkProvenance decodes records (one object, or an array of them) and
// checks each carries the provenance of this machine and ABI.
func checkProvenance(t *testing.T, what string, out []byte) int {
	t.Helper()
	var recs []map[string]json.RawMessage
	if json.Unmarshal(out, &recs) != nil {
		var one map[string]json.RawMessage
		if err := json.Unmarshal(out, &one); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", what, err, out)
		}
		recs = append(recs, one)
	}
	for i, r := range recs {
		var p provenance.Info
		if err := json.Unmarshal(r[provenance.Key], &p); err != nil {
			t.Fatalf("%s: record %d has no provenance: %v", what, i, err)
		}
		if p.ABIVersion != uapi.ABIVersion || p.Cores != runtime.NumCPU() || p.GoVersion == "" || p.Module != "github.com/dimmnet/dimmnet" || p.CPUModel == "" {
			t.Errorf("%s: record %d provenance %+v", what, i, p)
		}
	}
	return len(recs)
}

// `dimmnet version --json` and a command's --json records carry the same
// provenance, from one place; pingpong's names its medium.
func TestJSONRecordsCarryProvenance(t *testing.T) {
	bin := dimmnet(t)
	out, err := exec.Command(bin, "version", "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	checkProvenance(t, "version", out)
	out, err = exec.Command(bin, "pingpong", "-q", "--json", "--max", "8", "--iters", "5", "--raw-time", "5ms").Output()
	if err != nil {
		t.Fatal(err)
	}
	if n := checkProvenance(t, "pingpong", out); n < 2 {
		t.Fatalf("pingpong: %d records", n)
	}
	var recs []struct {
		Provenance provenance.Info `json:"provenance"`
	}
	if err := json.Unmarshal(out, &recs); err != nil || recs[0].Provenance.Medium != "mem" {
		t.Fatalf("pingpong's medium: %+v %v", recs, err)
	}
}
