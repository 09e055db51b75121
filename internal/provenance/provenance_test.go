package provenance

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
)

func TestCollect(t *testing.T) {
	in := Collect()
	if in.GoVersion != runtime.Version() || in.ABIVersion != uapi.ABIVersion || in.Cores != runtime.NumCPU() {
		t.Fatalf("Collect: %+v", in)
	}
	if in.CPUModel == "" {
		t.Error("no CPU model from /proc/cpuinfo")
	}
	if in.Module == "" {
		t.Error("no module path from the build info")
	}
	if in.LoadAverage == [3]float64{} {
		t.Log("load average 0 0 0 (an idle machine?)")
	}
}

func TestParsers(t *testing.T) {
	x86 := "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n\nprocessor\t: 1\nmodel name\t: other\n"
	if m := parseCPUModel(strings.NewReader(x86)); m != "Intel(R) Xeon(R) CPU @ 2.20GHz" {
		t.Errorf("x86 model %q", m)
	}
	arm := "processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n\nModel\t: Raspberry Pi 4 Model B\n"
	if m := parseCPUModel(strings.NewReader(arm)); m != "Raspberry Pi 4 Model B" {
		t.Errorf("arm model %q", m)
	}
}

// Records keep their fields in order with the provenance last; arrays get
// it on every object; anything but objects is refused.
func TestStamp(t *testing.T) {
	in := Info{Module: "m", GoVersion: "go1", ABIVersion: 6, Cores: 2, Medium: "shm"}
	type rec struct {
		Z int    `json:"z"`
		A string `json:"a"`
	}
	b, err := Stamp(rec{1, "x"}, in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(`{"z":1,"a":"x","provenance":{"module":"m"`)) {
		t.Fatalf("stamped record %s", b)
	}
	var back struct {
		Provenance Info `json:"provenance"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Provenance != in {
		t.Fatalf("round trip: %+v %v", back.Provenance, err)
	}
	b, err = Stamp([]rec{{1, "x"}, {2, "y"}}, in)
	if err != nil || strings.Count(string(b), `"provenance"`) != 2 {
		t.Fatalf("array: %s %v", b, err)
	}
	if b, err := Stamp(struct{}{}, in); err != nil || !strings.HasPrefix(string(b), `{"provenance":`) {
		t.Fatalf("empty object: %s %v", b, err)
	}
	for _, v := range []any{3, "s", []int{1}} {
		if _, err := Stamp(v, in); err == nil {
			t.Errorf("%v stamped", v)
		}
	}
	var out bytes.Buffer
	e := NewEncoder(&out)
	if err := e.Encode(rec{3, "z"}); err != nil || !json.Valid(out.Bytes()) || !strings.Contains(out.String(), `"abi_version":`) {
		t.Fatalf("encoder: %s %v", out.String(), err)
	}
}

// Whatever /proc/cpuinfo holds, the parser returns a value, no panic.
// (The load average's parser is fuzzed in internal/loadavg.)
func FuzzParsers(f *testing.F) {
	f.Add("model name\t: AMD EPYC\n")
	f.Add(":::\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		parseCPUModel(strings.NewReader(s))
	})
}
