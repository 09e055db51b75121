package figplot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/fmpl/mpbench"
)

func recs() []mpbench.Fig {
	var r []mpbench.Fig
	for p := 2; p <= 16; p++ {
		for _, l := range []struct{ lib, where string }{{"fmpl", "processes"}, {"ompi", "vader"}} {
			r = append(r, mpbench.Fig{Figure: "11", Lib: l.lib, Where: l.where, Ranks: p, Size: 8192, US: float64(10 * p), Cores: 2})
		}
	}
	for s := 8; s <= 16<<20; s *= 8 {
		r = append(r, mpbench.Fig{Figure: "7", Lib: "fmpl", Where: "inprocess", Ranks: 2, Size: s, US: 2, MBps: float64(s) / 2, Cores: 2})
	}
	return r
}

// Each figure draws well-formed SVG with its lines and the paper's marks:
// Fig. 7's stated bandwidths, Fig. 11's "about half of MPI".
func TestDraw(t *testing.T) {
	rs := recs()
	if got := strings.Join(Figures(rs), ","); got != "7,11" {
		t.Fatalf("figures %s", got)
	}
	for fig, want := range map[string][]string{
		"7":  {"fmpl inprocess", "paper FMPL: 999 MB/s", "paper MPI (rdma) (no counterpart)"},
		"11": {"fmpl processes", "ompi vader", "about half of MPI"},
	} {
		var b bytes.Buffer
		if err := Draw(&b, "f.svg", fig, rs); err != nil {
			t.Fatal(err)
		}
		d := xml.NewDecoder(bytes.NewReader(b.Bytes()))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("fig %s: SVG not well-formed: %v", fig, err)
			}
		}
		for _, w := range want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("fig %s: no %q", fig, w)
			}
		}
	}
	if err := Draw(io.Discard, "f.svg", "9", rs); !errors.Is(err, ErrNoRecords) {
		t.Errorf("absent figure: %v", err)
	}
	if err := Draw(io.Discard, "f.gif", "7", rs); !errors.Is(err, ErrFormat) {
		t.Errorf("gif: %v", err)
	}
}
