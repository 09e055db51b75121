package mpbench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
)

// PaperPoint is a figure's value the FMPL paper states in its text (its
// plots are missing from our copy): what the sweep's records are printed
// and plotted beside. Lib names the paper's series in our terms (fmpl is
// FMPL(SW) on the collectives; "mpi" is Hitachi's MPI, Open MPI's
// counterpart here); Counterpart is false for a series we have nothing to
// set beside (FMPL(HW), the SR8000's hardware barrier and broadcast).
type PaperPoint struct {
	Figure      string
	Series      string // the paper's name for the series
	Lib         string // ours to compare with: fmpl, fmpl-copy, blacs-fmpl, ompi; "" for none
	Ranks, Size int
	US, MBps    float64
	Counterpart bool
	Note        string
}

// PaperPoints are the figures' stated values (16 SR8000 nodes, 1,000 MB/s
// links).
var PaperPoints = []PaperPoint{
	{Figure: "7", Series: "FMPL", Lib: "fmpl", Ranks: 2, Size: 16 << 20, MBps: 999, Counterpart: true, Note: "zero copy"},
	{Figure: "7", Series: "BLACS-FMPL", Lib: "blacs-fmpl", Ranks: 2, Size: 16 << 20, MBps: 999, Counterpart: true},
	{Figure: "7", Series: "MPI (rdma)", Lib: "", Ranks: 2, Size: 16 << 20, MBps: 997, Counterpart: false, Note: "zero-copy MPI: Open MPI's vader runs here with copies (single copy off)"},
	{Figure: "7", Series: "MPI (nordma)", Lib: "ompi", Ranks: 2, Size: 16 << 20, MBps: 791, Counterpart: true, Note: "copies at both ends"},
	{Figure: "7", Series: "MPIBLACS (rdma)", Ranks: 2, Size: 16 << 20, MBps: 591, Note: "netlib BLACS on MPI: not built here"},
	{Figure: "7", Series: "FMPL", Lib: "fmpl", Ranks: 2, Size: 8, US: 12.8, Counterpart: true, Note: "8-byte one-way"},
	{Figure: "7", Series: "BLACS-FMPL", Lib: "blacs-fmpl", Ranks: 2, Size: 8, US: 15.7, Counterpart: true, Note: "8-byte one-way"},
	{Figure: "7", Series: "MPI", Lib: "ompi", Ranks: 2, Size: 8, US: 20, Counterpart: true, Note: "8-byte one-way"},
	{Figure: "8", Series: "FMPL(HW)", Note: "the SR8000's hardware barrier (hmpp_barrier): no counterpart"},
	{Figure: "8", Series: "FMPL(SW)", Lib: "fmpl", Counterpart: true, Note: "binary tree: O(log p), one stage fewer off powers of two"},
	{Figure: "9", Series: "FMPL(HW)", Note: "the SR8000's hardware broadcast: no counterpart"},
	{Figure: "9", Series: "FMPL(SW)", Lib: "fmpl", Counterpart: true, Note: "binary tree over point-to-point: O(log p)"},
	{Figure: "10", Series: "FMPL(HW)", Ranks: 16, Size: 8 << 20, MBps: 877, Note: "hardware broadcast: no counterpart"},
	{Figure: "10", Series: "FMPL(SW)", Lib: "fmpl", Ranks: 16, Size: 8 << 20, MBps: 250, Counterpart: true, Note: "about 250 MB/s"},
	{Figure: "10", Series: "MPI", Lib: "ompi", Ranks: 16, Size: 8 << 20, MBps: 877 / 1.57, Counterpart: true, Note: "FMPL(HW) is +57% over it: 877/1.57"},
	{Figure: "11", Series: "FMPL", Lib: "fmpl", Counterpart: true, Note: "about half the others' time: FMPL/MPI about 0.5"},
}

// figFind is the record of fig, lib and where at ranks and size, or nil.
func figFind(recs []Fig, fig, lib, where string, ranks, size int) *Fig {
	for i := range recs {
		r := &recs[i]
		if r.Figure == fig && r.Lib == lib && r.Where == where && r.Ranks == ranks && r.Size == size {
			return r
		}
	}
	return nil
}

func figVals(recs []Fig, fig string, key func(Fig) int) []int {
	var ks []int
	for _, r := range recs {
		if r.Figure == fig && !slices.Contains(ks, key(r)) {
			ks = append(ks, key(r))
		}
	}
	slices.Sort(ks)
	return ks
}

// figCol is one column of a figure table: a library run one way.
type figCol struct{ lib, where, head string }

func figCols(recs []Fig, fig string) []figCol {
	var cs []figCol
	for _, where := range []string{"processes", "inprocess", "vader"} {
		for _, lib := range []string{"fmpl", "fmpl-copy", "blacs-fmpl", "ompi"} {
			for _, r := range recs {
				if r.Figure == fig && r.Lib == lib && r.Where == where {
					cs = append(cs, figCol{lib, where, lib + " " + where})
					break
				}
			}
		}
	}
	return cs
}

func fmtv(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v < 0.01:
		return fmt.Sprintf("%.4f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func ceilLog2(p int) int { return int(math.Ceil(math.Log2(float64(p)))) }

// PrintFigures writes one table per figure: ours by rank count or size,
// every library and way of running beside each other, the ratios the
// paper's findings are stated in, and the paper's stated values below
// each (FMPL(HW) marked as having no counterpart). load is the load
// average line the run is reported with.
func PrintFigures(out io.Writer, recs []Fig, load string) {
	cores := 0
	for _, r := range recs {
		cores = max(cores, r.Cores)
	}
	fmt.Fprintf(out, "FMPL paper, Figs. 7-11, regenerated: N ranks on %d cores (%s). Ranks outnumber cores from 3 on: compare growth with p, stage counts and ratios against Open MPI run the same way, not absolute times.\n", cores, load)
	titles := map[string]string{
		"7":  "Fig. 7: point-to-point bandwidth (ping-pong, 2 ranks): MB/s by size",
		"8":  "Fig. 8: barrier: µs per operation by ranks",
		"9":  "Fig. 9: 8 KB broadcast: µs per operation by ranks (roots rotating)",
		"10": "Fig. 10: broadcast bandwidth at the largest rank count: MB/s by size (roots rotating)",
		"11": "Fig. 11: 8 KB reduction (float64 sums): µs per operation by ranks (roots rotating)",
	}
	for _, fig := range []string{"7", "8", "9", "10", "11"} {
		cols := figCols(recs, fig)
		if len(cols) == 0 {
			continue
		}
		fmt.Fprintf(out, "\n%s\n", titles[fig])
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		bySize := fig == "7" || fig == "10"
		head := "ranks on cores\t"
		if bySize {
			head = "size\tranks on cores\t"
		}
		for _, c := range cols {
			head += c.head + "\t"
		}
		switch fig {
		case "7":
			head += "fmpl/ompi\tfmpl-copy/fmpl\tfmpl 1-way µs\t"
		case "10":
			head += "fmpl/ompi\t"
		default:
			head += "fmpl/ompi\tfmpl t(p)/t(2)\tstages log2 p\t"
		}
		fmt.Fprintln(tw, head)
		keys := figVals(recs, fig, func(r Fig) int { return r.Ranks })
		if bySize {
			keys = figVals(recs, fig, func(r Fig) int { return r.Size })
		}
		var base float64
		for _, k := range keys {
			ranks, size := k, 8192
			if fig == "8" {
				size = 0
			}
			if bySize {
				size = k
				ranks = figVals(recs, fig, func(r Fig) int { return r.Ranks })[0]
			}
			line := ""
			if bySize {
				line = sizeLabel(size) + "\t"
			}
			line += fmt.Sprintf("%d on %d\t", ranks, cores)
			q := func(r *Fig) float64 {
				if r == nil {
					return 0
				}
				if bySize {
					return r.MBps
				}
				return r.US
			}
			for _, c := range cols {
				line += fmtv(q(figFind(recs, fig, c.lib, c.where, ranks, size))) + "\t"
			}
			f := figFind(recs, fig, "fmpl", "processes", ranks, size)
			if f == nil {
				f = figFind(recs, fig, "fmpl", "inprocess", ranks, size)
			}
			o := figFind(recs, fig, "ompi", "vader", ranks, size)
			ratio := "-"
			if f != nil && o != nil && q(o) > 0 {
				ratio = fmt.Sprintf("%.2f", q(f)/q(o))
			}
			line += ratio + "\t"
			switch fig {
			case "7":
				c := figFind(recs, fig, "fmpl-copy", f.whereOr(), ranks, size)
				cr := "-"
				if f != nil && c != nil && f.MBps > 0 {
					cr = fmt.Sprintf("%.2f", c.MBps/f.MBps)
				}
				line += cr + "\t" + fmtv(f.usOr()) + "\t"
			case "10":
			default:
				g := "-"
				if f != nil {
					if base == 0 {
						base = f.US
					}
					g = fmt.Sprintf("%.2f", f.US/base)
				}
				line += g + "\t" + fmt.Sprint(ceilLog2(ranks)) + "\t"
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
		fmt.Fprintln(out, "  the paper (16 SR8000 nodes, 1,000 MB/s links):")
		for _, pp := range PaperPoints {
			if pp.Figure != fig {
				continue
			}
			v := ""
			switch {
			case pp.MBps > 0:
				v = fmt.Sprintf("%.0f MB/s at %s", pp.MBps, sizeLabel(pp.Size))
			case pp.US > 0:
				v = fmt.Sprintf("%.1f µs at %s", pp.US, sizeLabel(pp.Size))
			}
			cp := "ours: " + pp.Lib
			if !pp.Counterpart {
				cp = "no counterpart"
			}
			fmt.Fprintf(out, "    %-16s %-20s %-14s %s\n", pp.Series, v, "("+cp+")", pp.Note)
		}
		switch fig {
		case "7":
			fmt.Fprintln(out, "    paper ratios: FMPL/MPI(nordma) at 16 MB 999/791 = 1.26; MPI nordma/rdma (copies/zero copy) 791/997 = 0.79")
		case "10":
			fmt.Fprintln(out, "    paper ratio: FMPL(SW)/MPI at 8 MB about 250/559 = 0.45")
		case "11":
			fmt.Fprintln(out, "    paper ratio: FMPL/MPI about 0.5")
		}
	}
}

func (f *Fig) whereOr() string {
	if f == nil {
		return ""
	}
	return f.Where
}

func (f *Fig) usOr() float64 {
	if f == nil {
		return 0
	}
	return f.US
}

func sizeLabel(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
