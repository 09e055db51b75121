// Package plot draws ping-pong results (the paper's Figure 8): RTT/2 and
// bandwidth against message size. It lives apart from package pingpong so
// that the dimmnet binary, which also boots as a lab guest's /init, does not
// carry the plotting library and its fonts (8 MB, enough to make the guest's
// initramfs fail to unpack in 128 MiB).
package plot

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/dimmnet/dimmnet/driver/pingpong"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// ErrFormat is returned for an output name that is neither .svg nor .png.
var ErrFormat = fmt.Errorf("plot: output must end in .svg or .png")

// Series is one line of a plot: the results of one run (a link, a path)
// for one mode and condition, labelled as the legend shows it.
type Series struct {
	Label   string
	Results []pingpong.Result
}

// SeriesOf splits results into one series per (link, mode, condition),
// prefixing each label with prefix (a file name when several runs are
// compared; empty for one run). Raw baselines are left out.
func SeriesOf(prefix string, res []pingpong.Result) []Series {
	var out []Series
	idx := map[string]int{}
	for _, r := range res {
		if r.Mode == pingpong.ModeRaw {
			continue // a raw baseline is one 8-byte point, not a curve over sizes
		}
		parts := []string{}
		if prefix != "" {
			parts = append(parts, prefix)
		}
		if r.Link != "" && r.Link != prefix {
			parts = append(parts, r.Link)
		}
		if r.Path != "" && r.Path != "inprocess" {
			parts = append(parts, r.Path)
		}
		parts = append(parts, r.Mode, r.Condition)
		label := strings.Join(parts, " ")
		i, ok := idx[label]
		if !ok {
			i = len(out)
			idx[label] = i
			out = append(out, Series{Label: label})
		}
		out[i].Results = append(out[i].Results, r)
	}
	return out
}

// Draw draws the paper's Figure 8 for the series side by side: RTT/2
// against message size (log-log) and bandwidth against message size (log
// size), as SVG or PNG by the name's extension.
func Draw(w io.Writer, name string, series []Series) error {
	ext := strings.ToLower(filepath.Ext(name))
	if ext != ".svg" && ext != ".png" {
		return fmt.Errorf("%s: %w", name, ErrFormat)
	}
	if len(series) == 0 {
		return fmt.Errorf("plot %s: no results", name)
	}
	rtt, bw := plot.New(), plot.New()
	rtt.Title.Text = "round trip / 2"
	rtt.Y.Label.Text = "RTT/2 (µs, mean)"
	rtt.Y.Scale = plot.LogScale{}
	rtt.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	bw.Title.Text = "bandwidth"
	bw.Y.Label.Text = "MB/s"
	bw.Y.Min = 0
	bw.Y.Tick.Marker = plot.TickerFunc(func(min, max float64) []plot.Tick {
		ts := plot.DefaultTicks{}.Ticks(min, max)
		for i := range ts {
			if ts[i].Label != "" {
				ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
			}
		}
		return ts
	})
	for _, p := range []*plot.Plot{rtt, bw} {
		p.X.Label.Text = "message size (bytes)"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Legend.Top, p.Legend.Left = true, true // small sizes: low latency, low bandwidth
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		p.Legend.XOffs, p.Legend.YOffs = vg.Millimeter*2, -vg.Millimeter*2
		p.Add(plotter.NewGrid())
	}
	var rttLines, bwLines []any
	for _, s := range series {
		rs := slices.Clone(s.Results)
		slices.SortFunc(rs, func(a, b pingpong.Result) int { return a.Size - b.Size })
		var lat, thr plotter.XYs
		for _, r := range rs {
			if r.Size <= 0 || r.RTTHalfUs <= 0 || r.MBps <= 0 {
				continue // a log axis has no room for zero
			}
			lat = append(lat, plotter.XY{X: float64(r.Size), Y: r.RTTHalfUs})
			thr = append(thr, plotter.XY{X: float64(r.Size), Y: r.MBps})
		}
		if len(lat) == 0 {
			continue
		}
		rttLines = append(rttLines, s.Label, lat)
		bwLines = append(bwLines, s.Label, thr)
	}
	if len(rttLines) == 0 {
		return fmt.Errorf("plot %s: no result with a positive size, RTT and bandwidth", name)
	}
	if err := plotutil.AddLinePoints(rtt, rttLines...); err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	if err := plotutil.AddLinePoints(bw, bwLines...); err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	if err := markPaper(rtt, bw, series); err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	width, height := 28*vg.Centimeter, 13*vg.Centimeter
	var c vg.CanvasWriterTo
	var dc draw.Canvas
	if ext == ".svg" {
		sc := vgsvg.New(width, height)
		c, dc = sc, draw.New(sc)
	} else {
		ic := vgimg.New(width, height)
		c, dc = vgimg.PngCanvas{Canvas: ic}, draw.New(ic)
	}
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	plots := [][]*plot.Plot{{rtt, bw}}
	cs := plot.Align(plots, tiles, dc)
	rtt.Draw(cs[0][0])
	bw.Draw(cs[0][1])
	if _, err := c.WriteTo(w); err != nil {
		return fmt.Errorf("plot %s: %w", name, err)
	}
	return nil
}

// markPaper marks, for every mode and condition a series of ping-pong
// results has, the IPUSH paper's Fig. 8 values: its minimum RTT/2 as a
// cross at 8 bytes, its maximum bandwidth as a dashed line across the
// series' sizes (the paper gives no size for it).
func markPaper(rtt, bw *plot.Plot, series []Series) error {
	done := map[pingpong.PaperPoint]bool{}
	for _, s := range series {
		lo, hi := 0, 0
		var pp *pingpong.PaperPoint
		for _, r := range s.Results {
			for i, p := range pingpong.PaperFig8 {
				if r.Mode == p.Mode && r.Condition == p.Condition {
					pp = &pingpong.PaperFig8[i]
				}
			}
			if r.Size > 0 && (lo == 0 || r.Size < lo) {
				lo = r.Size
			}
			hi = max(hi, r.Size)
		}
		if pp == nil || done[*pp] || lo == 0 {
			continue
		}
		done[*pp] = true
		label := fmt.Sprintf("paper %s %s", pp.Mode, pp.Condition)
		sc, err := plotter.NewScatter(plotter.XYs{{X: pingpong.PaperMinSize, Y: pp.MinRTTHalfUs}})
		if err != nil {
			return err
		}
		sc.GlyphStyle.Shape = draw.CrossGlyph{}
		sc.GlyphStyle.Radius = vg.Points(5)
		rtt.Add(sc)
		rtt.Legend.Add(label+fmt.Sprintf(" (min %.2f µs)", pp.MinRTTHalfUs), sc)
		l, err := plotter.NewLine(plotter.XYs{{X: float64(lo), Y: pp.MaxMBps}, {X: float64(max(hi, lo+1)), Y: pp.MaxMBps}})
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		bw.Add(l)
		bw.Legend.Add(label+fmt.Sprintf(" (max %.0f MB/s)", pp.MaxMBps), l)
	}
	return nil
}
