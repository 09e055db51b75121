package plot

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mpbench's records become curves: ping-pong records only, raw PUSH as a
// curve of its own.
func TestMPBenchResultsToCurves(t *testing.T) {
	in := `{"lib":"raw","medium":"shm","test":"pingpong","buffer":"link","size":8,"p":2,"oneway_us":1,"mbps":8}
{"lib":"fmpl","medium":"shm","test":"pingpong","buffer":"host","size":8,"p":2,"oneway_us":2,"mbps":4}
{"lib":"fmpl","medium":"shm","test":"barrier","size":0,"p":4,"oneway_us":9}
`
	res, err := MPBenchResults([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Mode != "raw PUSH" || res[1].Mode != "fmpl" || res[1].Condition != "host" || res[1].RTTHalfUs != 2 {
		t.Fatalf("got %+v", res)
	}
	if _, err := MPBenchResults([]byte(`{"lib":`)); err == nil {
		t.Error("a cut record was taken")
	}
}

// WriteEach writes one file per key named after out, reports each, and a
// drawing that fails leaves no file and stops the rest.
func TestWriteEach(t *testing.T) {
	dir := t.TempDir()
	var report bytes.Buffer
	draw := func(w io.Writer, name, key string) error {
		if key == "bad" {
			return errors.New("no such table")
		}
		_, err := io.WriteString(w, key)
		return err
	}
	if err := WriteEach(filepath.Join(dir, "f.svg"), "table", []string{"2", "10"}, draw, &report); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"2", "10"} {
		name := filepath.Join(dir, "f-table"+k+".svg")
		if b, err := os.ReadFile(name); err != nil || string(b) != k {
			t.Errorf("%s: %q, %v", name, b, err)
		}
		if !strings.Contains(report.String(), name+"\n") {
			t.Errorf("report lacks %s:\n%s", name, report.String())
		}
	}
	err := WriteEach(filepath.Join(dir, "g.svg"), "fig", []string{"bad", "3"}, draw, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Errorf("a failing drawing: %v", err)
	}
	for _, n := range []string{"g-figbad.svg", "g-fig3.svg"} {
		if _, err := os.Stat(filepath.Join(dir, n)); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", n, err)
		}
	}
}
