package plot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// WriteFile creates the file name and has draw render into it; a drawing
// that fails leaves no half-written file behind.
func WriteFile(name string, draw func(w io.Writer) error) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := draw(f); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	return f.Close()
}

// WriteEach draws one file per key, OUT-<kind><key>.EXT beside out (the
// fabric model's tables, mpbench's figures), printing each name to
// report as it is written.
func WriteEach(out, kind string, keys []string, draw func(w io.Writer, name, key string) error, report io.Writer) error {
	ext := filepath.Ext(out)
	for _, k := range keys {
		name := strings.TrimSuffix(out, ext) + "-" + kind + k + ext
		if err := WriteFile(name, func(w io.Writer) error { return draw(w, name, k) }); err != nil {
			return err
		}
		fmt.Fprintln(report, name)
	}
	return nil
}

// MPBenchResults turns the ping-pong records of dimmnet mpbench --json
// (one JSON object per line) into curves: one per library, buffer and
// medium, so FMPL, raw PUSH and Open MPI share one figure (the FMPL
// paper's Fig. 7). Its other tests' records are left out.
func MPBenchResults(b []byte) ([]pingpong.Result, error) {
	var res []pingpong.Result
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var r struct {
			Lib, Medium, Test, Buffer string
			Size                      int
			OnewayUS                  float64 `json:"oneway_us"`
			MBps                      float64
		}
		if err := dec.Decode(&r); err != nil {
			return nil, fmt.Errorf("plot: mpbench record: %w", err)
		}
		if r.Test != "pingpong" {
			continue
		}
		mode := r.Lib
		if r.Lib == "raw" {
			mode = "raw PUSH" // not pingpong.ModeRaw: here it is a curve over sizes
		}
		res = append(res, pingpong.Result{Mode: mode, Condition: r.Buffer, Link: r.Medium, Size: r.Size,
			RTTHalfUs: r.OnewayUS, RTTHalfP50Us: r.OnewayUS, MBps: r.MBps})
	}
	return res, nil
}
