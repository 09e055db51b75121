package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// plotCmd draws ping-pong results saved with --json, one line per run,
// mode and condition, so links or machines can be compared in one picture.
func plotCmd(args []string) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	out := fs.String("o", "pingpong.svg", "output file: .svg or .png")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dimmnet plot [-o OUT.svg|OUT.png] RESULTS.json...\n\nRESULTS.json: the output of dimmnet pingpong --json (one per run to compare).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("no results file given")
	}
	var series []pingpong.Series
	for _, name := range fs.Args() {
		b, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		var res []pingpong.Result
		if err := json.Unmarshal(b, &res); err != nil {
			return fmt.Errorf("%s: not pingpong --json output: %w", name, err)
		}
		prefix := ""
		if fs.NArg() > 1 {
			prefix = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
		}
		series = append(series, pingpong.SeriesOf(prefix, res)...)
	}
	return writePlot(*out, series)
}

// writePlot renders series into the file name (.svg or .png).
func writePlot(name string, series []pingpong.Series) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pingpong.Plot(f, name, series); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	return f.Close()
}
