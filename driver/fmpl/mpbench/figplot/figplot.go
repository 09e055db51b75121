// Package figplot draws the FMPL paper's Figs. 7-11 from mpbench
// --figures --json records: one plot per figure, a line per library and
// way of running, and the paper's stated values marked beside them. It
// lives apart from mpbench so the dimmnet binary does not carry the
// plotting library.
package figplot

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dimmnet/dimmnet/driver/fmpl/mpbench"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ErrFormat is returned for an output name that is neither .svg nor .png.
var ErrFormat = errors.New("figplot: output must end in .svg or .png")

// ErrNoRecords is returned for a figure the records have no point of.
var ErrNoRecords = errors.New("figplot: no records of the figure")

// Figures lists the figures present in records, in the paper's order.
func Figures(recs []mpbench.Fig) []string {
	var fs []string
	for _, f := range []string{"7", "8", "9", "10", "11"} {
		if slices.ContainsFunc(recs, func(r mpbench.Fig) bool { return r.Figure == f }) {
			fs = append(fs, f)
		}
	}
	return fs
}

func bySize(fig string) bool { return fig == "7" || fig == "10" }

// Draw draws figure fig of recs as SVG or PNG by name's extension: ranks
// or message size on x, µs or MB/s on y (log), a line per library and way
// of running; the paper's stated values as large glyphs (FMPL(HW)'s
// labelled as having no counterpart), and for the collectives the shape
// the paper states: FMPL(SW) growing as ceil(log2 p) from our 2-rank
// point (Figs. 8, 9) and about half of MPI's time (Fig. 11, from Open
// MPI's points).
func Draw(w io.Writer, name, fig string, recs []mpbench.Fig) error {
	ext := strings.ToLower(filepath.Ext(name))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("%s: %w", name, ErrFormat)
	}
	type key struct{ lib, where string }
	lines := map[key]plotter.XYs{}
	var order []key
	cores := 0
	for _, r := range recs {
		if r.Figure != fig {
			continue
		}
		cores = max(cores, r.Cores)
		k := key{r.Lib, r.Where}
		if _, ok := lines[k]; !ok {
			order = append(order, k)
		}
		x, y := float64(r.Ranks), r.US
		if bySize(fig) {
			x, y = float64(r.Size), r.MBps
		}
		if y > 0 {
			lines[k] = append(lines[k], plotter.XY{X: x, Y: y})
		}
	}
	if len(order) == 0 {
		return fmt.Errorf("plot %s: figure %s: %w", name, fig, ErrNoRecords)
	}
	p := plot.New()
	titles := map[string]string{"7": "point-to-point bandwidth, 2 ranks", "8": "barrier", "9": "8 KB broadcast",
		"10": "broadcast bandwidth", "11": "8 KB reduction"}
	p.Title.Text = fmt.Sprintf("FMPL Fig. %s: %s (ranks on %d cores; crosses: the paper)", fig, titles[fig], cores)
	p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	if bySize(fig) {
		p.X.Label.Text, p.Y.Label.Text = "message size (bytes)", "MB/s"
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	} else {
		p.X.Label.Text, p.Y.Label.Text = "ranks", "µs per operation"
	}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	for i, k := range order {
		xy := lines[k]
		slices.SortFunc(xy, func(a, b plotter.XY) int { return int(a.X - b.X) })
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(k.lib+" "+k.where, l, pts)
	}
	// The paper's stated values.
	for _, pp := range mpbench.PaperPoints {
		if pp.Figure != fig {
			continue
		}
		var xy plotter.XY
		switch {
		case bySize(fig) && pp.MBps > 0:
			xy = plotter.XY{X: float64(pp.Size), Y: pp.MBps}
		case bySize(fig) && pp.US > 0:
			xy = plotter.XY{X: float64(pp.Size), Y: float64(pp.Size) / pp.US}
		default:
			continue
		}
		sc, err := plotter.NewScatter(plotter.XYs{xy})
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = draw.CrossGlyph{}, vg.Points(5)
		label := "paper " + pp.Series
		if !pp.Counterpart {
			label += " (no counterpart)"
		}
		p.Add(sc)
		if pp.US > 0 {
			label += fmt.Sprintf(": %.1f µs one-way at %d B (%.2f MB/s)", pp.US, pp.Size, xy.Y)
		} else {
			label += fmt.Sprintf(": %.0f MB/s", xy.Y)
		}
		p.Legend.Add(label, sc)
	}
	// The shapes the paper states for the collectives.
	var ref plotter.XYs
	refLabel := ""
	switch fig {
	case "8", "9":
		base := key{"fmpl", "processes"}
		if len(lines[base]) == 0 {
			base = key{"fmpl", "inprocess"}
		}
		var t2 float64
		for _, pt := range lines[base] {
			if pt.X == 2 {
				t2 = pt.Y
			}
		}
		if t2 > 0 {
			for _, pt := range lines[base] {
				ref = append(ref, plotter.XY{X: pt.X, Y: t2 * math.Ceil(math.Log2(pt.X))})
			}
			refLabel = "paper: FMPL(SW) O(log p), ceil(log2 p) x ours at 2"
		}
	case "11":
		for _, pt := range lines[key{"ompi", "vader"}] {
			ref = append(ref, plotter.XY{X: pt.X, Y: pt.Y / 2})
		}
		refLabel = "paper: FMPL about half of MPI (Open MPI's / 2)"
	}
	if len(ref) > 0 {
		l, err := plotter.NewLine(ref)
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(refLabel, l)
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
