package datasheet

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
)

// The checked-in header and Python module are what the ABI generates: a
// change of package uapi without go generate fails here.
func TestGeneratedFormsUpToDate(t *testing.T) {
	for _, f := range []struct {
		path string
		want string
	}{{HeaderPath, Header()}, {PythonPath, Python()}} {
		got, err := os.ReadFile(filepath.Join("../..", f.path))
		if err != nil {
			t.Fatalf("read %s: %v", f.path, err)
		}
		if string(got) != f.want {
			t.Errorf("%s disagrees with package uapi: run go generate ./uapi", f.path)
		}
	}
}

func gcc(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed (.ci/run installs it)")
	}
	return cc
}

// The header compiles under C11 with every warning an error, its
// _Static_asserts hold, and a program built on it prints the offsets,
// sizes and values package uapi has.
func TestHeaderCompilesAndAgrees(t *testing.T) {
	cc := gcc(t)
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("#include <stdio.h>\n#include \"dimmnet.h\"\n")
	src.WriteString("_Static_assert(DIMMNET_DESC_SIZE == sizeof(struct dimmnet_desc), \"desc\");\n")
	src.WriteString("_Static_assert(DIMMNET_STATUS_SIZE == sizeof(struct dimmnet_status), \"status\");\n")
	src.WriteString("_Static_assert(offsetof(struct dimmnet_desc, seq) == DIMMNET_DESC_SEQ_OFF, \"seq\");\n")
	src.WriteString("int main(void)\n{\n")
	want := map[string]uint64{}
	pr := func(key, expr string, v uint64) {
		fmt.Fprintf(&src, "\tprintf(\"\\\"%s\\\": %%llu,\\n\", (unsigned long long)(%s));\n", key, expr)
		want[key] = v
	}
	for _, r := range uapi.Registers {
		name := strings.ToLower(cIdent(r.Name))
		pr("reg."+r.Name, "offsetof(struct dimmnet_regs, "+name+")", uint64(r.Off))
	}
	for _, f := range cFields(uapi.DescFields) {
		pr("desc."+f.name, "offsetof(struct dimmnet_desc, "+f.name+")", uint64(f.off))
	}
	for _, f := range cFields(uapi.StatusFields) {
		pr("status."+f.name, "offsetof(struct dimmnet_status, "+f.name+")", uint64(f.off))
	}
	for _, f := range cFields(uapi.AMTFields) {
		pr("amt."+f.name, "offsetof(struct dimmnet_amt, "+f.name+")", uint64(f.off))
	}
	pr("magic", "DIMMNET_MAGIC", uapi.Magic)
	pr("abi", "DIMMNET_ABI_VERSION", uapi.ABIVersion)
	pr("ctr.VIOLATIONS", "offsetof(struct dimmnet_regs, counters[DIMMNET_CTR_VIOLATIONS])", uint64(uapi.CtrViolations.Off()))
	pr("op.CAS8", "DIMMNET_OP_CAS8", uint64(uapi.OpCAS8))
	pr("st.PULL_DONE", "DIMMNET_ST_PULL_DONE", uint64(uapi.StPULLDone))
	pr("e.HOLD_LIMIT", "DIMMNET_E_HOLD_LIMIT", uint64(uapi.EHoldLimit))
	pr("feat.CHECK", "DIMMNET_FEAT_CHECK", uapi.FeatCheck)
	pr("flag.TAGGED", "DIMMNET_FLAG_TAGGED", uapi.FlagTagged)
	pr("vio.last", "DIMMNET_NUM_VIOLATION_KINDS", uint64(uapi.NumViolationKinds))
	src.WriteString("\tprintf(\"\\\"name\\\": %d\\n\", dimmnet_errno_name(DIMMNET_E_BAD_ALIGN)[4] == 'A');\n")
	want["name"] = 1
	src.WriteString("\treturn 0;\n}\n")
	c := filepath.Join(dir, "uses.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "uses")
	if out, err := exec.Command(cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", "..", "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]uint64
	if err := json.Unmarshal([]byte("{"+strings.TrimSuffix(strings.TrimSpace(string(out)), ",")+"}"), &got); err != nil {
		t.Fatalf("program output: %v\n%s", err, out)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: C says %#x, uapi %#x", k, got[k], v)
		}
	}
}

// A header whose asserted offset is wrong does not compile: the asserts
// are live, so the test above proves something.
func TestHeaderAssertsBite(t *testing.T) {
	cc := gcc(t)
	h := strings.Replace(Header(), "offsetof(struct dimmnet_desc, seq) == 56", "offsetof(struct dimmnet_desc, seq) == 48", 1)
	if h == Header() {
		t.Fatal("the header has no assert on the descriptor's SEQ offset")
	}
	p := filepath.Join(t.TempDir(), "bad.h")
	if err := os.WriteFile(p, []byte(h), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cc, "-std=c11", "-fsyntax-only", "-x", "c", p).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "dimmnet_desc.seq offset") {
		t.Fatalf("a wrong offset compiled: %v\n%s", err, out)
	}
}

// pyEquivalent maps each constant of docs/examples/pydriver.py to the
// generated module's name for it. The example keeps its own copies (it
// shows a driver written from the datasheet alone); this is what keeps
// them right. A constant missing here fails the test, so a new one is
// checked from its first day.
var pyEquivalent = map[string]string{
	"MAGIC_VALUE": "MAGIC", "ABI": "ABI_VERSION", "SEQ_OFF": "DESC_SEQ_OFF",
	"AMT_VALID": "AMT_FLAG_VALID", "ST_NAMES": "STATUS_NAMES",
	"SLEEP_S": "", "STALE_S": "", // the driver's own policy, not ABI
}

func TestPyDriverConstants(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	regs := map[string]bool{}
	for _, r := range uapi.Registers {
		regs[r.Name] = true
	}
	m, _ := json.Marshal(pyEquivalent)
	r, _ := json.Marshal(regs)
	script := `
import json, sys
sys.path.insert(0, "..")
sys.path.insert(0, "../../docs/examples")
import dimmnet_uapi as gen, pydriver as ex
eq, regs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
bad, n = [], 0
for name in dir(ex):
    if not name.isupper() or name.startswith("_"):
        continue
    g = eq.get(name, "REG_" + name if name in regs else name)
    if g == "":
        continue
    n += 1
    if not hasattr(gen, g):
        bad.append(f"{name}: no {g} in dimmnet_uapi")
    elif getattr(gen, g) != getattr(ex, name):
        bad.append(f"{name} = {getattr(ex, name)!r}, dimmnet_uapi.{g} = {getattr(gen, g)!r}")
print(json.dumps({"checked": n, "bad": bad}))
`
	cmd := exec.Command(py, "-c", script, string(m), string(r))
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1") // no __pycache__ in the tree
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	var res struct {
		Checked int
		Bad     []string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Logf("%d constants of pydriver.py checked", res.Checked)
	if res.Checked < 40 {
		t.Errorf("only %d constants of pydriver.py checked", res.Checked)
	}
	for _, b := range res.Bad {
		t.Error("pydriver.py: " + b)
	}
}
