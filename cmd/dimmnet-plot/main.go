// Command dimmnet-plot draws saved ping-pong results (dimmnet pingpong
// --json) as RTT/2 and MB/s against message size, one line per run, mode
// and condition, so links or machines compare in one picture; given
// dimmnet fabric-bench --json it draws one plot per regenerated table
// (OUT-table2.svg, ...), the model beside the paper; given dimmnet mpbench
// --figures --json it draws the FMPL paper's Figs. 7-11 (OUT-fig7.svg,
// ...) with the paper's stated values marked. It is a
// command of its own so the dimmnet binary (a lab guest's /init too) stays
// free of the plotting library.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dimmnet/dimmnet/driver/collective/fabricsim"
	fabricplot "github.com/dimmnet/dimmnet/driver/collective/fabricsim/plot"
	"github.com/dimmnet/dimmnet/driver/fmpl/mpbench"
	"github.com/dimmnet/dimmnet/driver/fmpl/mpbench/figplot"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/driver/pingpong/plot"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "dimmnet-plot: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("dimmnet-plot", flag.ContinueOnError)
	out := fs.String("o", "pingpong.svg", "output file: .svg or .png")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dimmnet-plot [-o OUT.svg|OUT.png] RESULTS.json...\n\nRESULTS.json: the output of dimmnet pingpong --json or dimmnet mpbench --json (one per run to compare),\nor one output of dimmnet fabric-bench --json (one plot per table),\nor one output of dimmnet mpbench --figures --json (one plot per figure).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("no results file given")
	}
	var series []plot.Series
	for _, name := range fs.Args() {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if recs, ok := fabricRecords(b); ok {
			return writeTables(*out, recs)
		}
		if recs, ok := figureRecords(b); ok {
			return writeFigures(*out, recs)
		}
		var res []pingpong.Result
		if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
			if res, err = mpbenchRecords(t); err != nil {
				return fmt.Errorf("%s: not mpbench --json output: %w", name, err)
			}
		} else if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("%s: not pingpong --json output: %w", name, err)
		}
		prefix := ""
		if fs.NArg() > 1 {
			prefix = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
		}
		series = append(series, plot.SeriesOf(prefix, res)...)
	}
	return writePlot(*out, series)
}

// mpbenchRecords turns the ping-pong records of dimmnet mpbench --json
// (one JSON object per line) into curves: one per library, buffer and
// medium, FMPL, raw PUSH and Open MPI on one figure (the paper's Fig. 7).
func mpbenchRecords(b []byte) ([]pingpong.Result, error) {
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
			return nil, err
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

// writePlot renders series into the file name (.svg or .png).
func writePlot(name string, series []plot.Series) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := plot.Draw(f, name, series); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	return f.Close()
}

// fabricRecords recognises fabric-bench output: records that name a table.
func fabricRecords(b []byte) ([]fabricsim.Record, bool) {
	var recs []fabricsim.Record
	if err := json.Unmarshal(b, &recs); err != nil || len(recs) == 0 || recs[0].Table == "" {
		return nil, false
	}
	return recs, true
}

// figureRecords recognises mpbench --figures --json output: JSON lines
// that name a figure.
func figureRecords(b []byte) ([]mpbench.Fig, bool) {
	var recs []mpbench.Fig
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var r mpbench.Fig
		if err := dec.Decode(&r); err != nil || r.Figure == "" {
			return nil, false
		}
		recs = append(recs, r)
	}
	return recs, len(recs) > 0
}

// writeFigures draws each figure into OUT-figN.EXT.
func writeFigures(out string, recs []mpbench.Fig) error {
	ext := filepath.Ext(out)
	for _, fig := range figplot.Figures(recs) {
		name := strings.TrimSuffix(out, ext) + "-fig" + fig + ext
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		if err := figplot.Draw(f, name, fig, recs); err != nil {
			f.Close()
			os.Remove(name)
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Println(name)
	}
	return nil
}

// writeTables draws each table into OUT-tableN.EXT.
func writeTables(out string, recs []fabricsim.Record) error {
	ext := filepath.Ext(out)
	for _, t := range fabricplot.Tables(recs) {
		name := strings.TrimSuffix(out, ext) + "-table" + t + ext
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		if err := fabricplot.Draw(f, name, t, recs); err != nil {
			f.Close()
			os.Remove(name)
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		fmt.Println(name)
	}
	return nil
}
