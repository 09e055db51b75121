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
	"io"
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
			return plot.WriteEach(*out, "table", fabricplot.Tables(recs), func(w io.Writer, name, table string) error {
				return fabricplot.Draw(w, name, table, recs)
			}, os.Stdout)
		}
		if recs, ok := figureRecords(b); ok {
			return writeFigures(*out, recs)
		}
		var res []pingpong.Result
		if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
			if res, err = plot.MPBenchResults(t); err != nil {
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
	return plot.WriteFile(*out, func(w io.Writer) error { return plot.Draw(w, *out, series) })
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
	return plot.WriteEach(out, "fig", figplot.Figures(recs), func(w io.Writer, name, fig string) error {
		return figplot.Draw(w, name, fig, recs)
	}, os.Stdout)
}
