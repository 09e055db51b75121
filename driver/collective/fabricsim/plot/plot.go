// Package plot draws regenerated RHiNET-2 tables (dimmnet fabric-bench
// --json): per table, barrier time against visiting order, the model's
// line beside the paper's for every column. It lives apart from package
// fabricsim so the dimmnet binary, a lab guest's /init too, does not carry
// the plotting library.
package plot

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/driver/collective/fabricsim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrFormat is returned for an output name that is neither .svg nor .png.
var ErrFormat = errors.New("plot: output must end in .svg or .png")

// Tables lists the tables present in records, in order of appearance.
func Tables(records []fabricsim.Record) []string {
	var ts []string
	seen := map[string]bool{}
	for _, r := range records {
		if !seen[r.Table] {
			seen[r.Table] = true
			ts = append(ts, r.Table)
		}
	}
	return ts
}

// Draw draws one table of records as SVG or PNG by name's extension:
// orders on the x axis in the paper's row order, µs on the y axis, a solid
// line per column for the model and a dashed one for the paper.
func Draw(w io.Writer, name, table string, records []fabricsim.Record) error {
	ext := strings.ToLower(filepath.Ext(name))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("%s: %w", name, ErrFormat)
	}
	p := plot.New()
	p.Title.Text = "Table " + table + ": barrier time per visiting order (solid: model, dashed: paper)"
	p.Y.Label.Text = "µs"
	p.X.Label.Text = "visiting order"
	idx := map[string]int{}
	var ticks []plot.Tick
	for i, o := range collective.Orders {
		idx[o] = i
		ticks = append(ticks, plot.Tick{Value: float64(i), Label: o})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	var cols []string
	ours, paper := map[string]plotter.XYs{}, map[string]plotter.XYs{}
	for _, r := range records {
		if r.Table != table {
			continue
		}
		if _, ok := ours[r.Column]; !ok {
			cols = append(cols, r.Column)
		}
		x := float64(idx[r.Order])
		ours[r.Column] = append(ours[r.Column], plotter.XY{X: x, Y: r.US})
		paper[r.Column] = append(paper[r.Column], plotter.XY{X: x, Y: r.PaperUS})
	}
	if len(cols) == 0 {
		return fmt.Errorf("plot %s: no records of table %s", name, table)
	}
	for i, c := range cols {
		color := plotutil.Color(i)
		for _, set := range []struct {
			xy    plotter.XYs
			label string
			dash  []vg.Length
		}{{ours[c], c + " (model)", nil}, {paper[c], c + " (paper)", []vg.Length{vg.Points(4), vg.Points(3)}}} {
			l, pts, err := plotter.NewLinePoints(set.xy)
			if err != nil {
				return fmt.Errorf("plot %s: %w", name, err)
			}
			l.Color, pts.Color = color, color
			l.Dashes = set.dash
			pts.Shape = draw.CircleGlyph{}
			p.Add(l, pts)
			p.Legend.Add(set.label, l, pts)
		}
	}
	wt, err := p.WriterTo(20*vg.Centimeter, 13*vg.Centimeter, strings.TrimPrefix(ext, "."))
	if err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	return nil
}
