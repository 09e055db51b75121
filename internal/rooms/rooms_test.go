package rooms

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestModuleImportsFollowTheTable runs go list over the whole module and
// checks every package's non-test imports against docs/design.md's table.
func TestModuleImportsFollowTheTable(t *testing.T) {
	f, err := os.Open("../../docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tb, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	pkgs := modulePackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(pkgs))
	}
	for _, b := range tb.Check(pkgs) {
		t.Error(b)
	}
}

// modulePackages lists the module's packages with go list -json.
func modulePackages(t *testing.T) []Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Module", "./...")
	cmd.Dir = "../.."
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []Package
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Module     struct{ Path string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		mod := p.Module.Path + "/"
		rel := strings.TrimPrefix(p.ImportPath, mod)
		var imps []string
		for _, i := range p.Imports {
			if r, ok := strings.CutPrefix(i, mod); ok {
				imps = append(imps, r)
			}
		}
		pkgs = append(pkgs, Package{Path: rel, Imports: imps})
	}
	return pkgs
}

const sample = `intro

| room | packages | may import |
|---|---|---|
| low | ` + "`a/...`" + ` | low |
| mid | ` + "`a/b`, `c`" + ` | low, mid |
| high | ` + "`a/b/...`" + ` | low, mid, high |

after
`

// The checker itself: an import against the table is named, the most
// specific entry decides a package's room, and an unplaced package fails.
func TestCheckNamesImportsAgainstTheTable(t *testing.T) {
	tb, err := Parse(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"a": "low", "a/x": "low", "a/b": "mid", "a/b/c": "high", "c": "mid", "c/d": "", "ab": ""} {
		if got := tb.RoomOf(rel); got != want {
			t.Errorf("RoomOf(%q) = %q, want %q", rel, got, want)
		}
	}
	bad := tb.Check([]Package{
		{Path: "a/b", Imports: []string{"a/x", "c"}},   // mid -> low, mid: fine
		{Path: "a/x", Imports: []string{"a/b"}},        // low -> mid: against
		{Path: "c", Imports: []string{"a/b/c"}},        // mid -> high: against
		{Path: "a/b/c", Imports: []string{"a", "a/b"}}, // high -> low, mid: fine
		{Path: "elsewhere", Imports: nil},              // in no room
	})
	want := []string{
		"a/x (low) imports a/b (mid): low may not import mid",
		"c (mid) imports a/b/c (high): mid may not import high",
		"elsewhere is in no room",
	}
	if strings.Join(bad, "\n") != strings.Join(want, "\n") {
		t.Errorf("Check:\n%s\nwant:\n%s", strings.Join(bad, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseRefusesBadTables(t *testing.T) {
	for name, md := range map[string]string{
		"no table":     "nothing here\n",
		"short row":    "| room | packages | may import |\n|---|---|---|\n| low | `a` |\n",
		"unknown room": "| room | packages | may import |\n|---|---|---|\n| low | `a` | low, top |\n",
		"twice":        "| room | packages | may import |\n|---|---|---|\n| low | `a` | low |\n| low | `b` | low |\n",
	} {
		if _, err := Parse(strings.NewReader(md)); !errors.Is(err, ErrTable) {
			t.Errorf("%s: err %v, want ErrTable", name, err)
		}
	}
}
