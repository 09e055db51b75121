package fabricsim

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"

	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/vdev/fabric"
)

// Record is one regenerated table cell, as fabric-bench --json prints it.
type Record struct {
	Table    string  `json:"table"`    // the paper's table number
	Order    string  `json:"order"`    // the visiting order (row)
	Column   string  `json:"column"`   // the paper's column heading
	Topology string  `json:"topology"` // the column's topology (fabric.NewTopology name)
	Routing  string  `json:"routing"`  // the column's routing (fabric.NewRouting name)
	Flits    int     `json:"flits"`    // packet length
	US       float64 `json:"us"`       // the model's mean barrier time
	PaperUS  float64 `json:"paper_us"` // the paper's
	// NoFabricUS is the baseline without a network: steps x one constant.
	NoFabricUS float64 `json:"no_fabric_us"`
	// HostCostNs is the fitted host cost per message the cell ran with.
	HostCostNs float64 `json:"host_cost_ns"`
}

// Report is a regeneration of the paper's tables.
type Report struct {
	Model   Model
	Records []Record
	// MeanRelErr and NoFabricRelErr are over Tables 3 and 4, the cells
	// the target names; PerTable has both per table.
	MeanRelErr, NoFabricRelErr float64
	PerTable                   map[string][2]float64
}

// Regenerate fits the host costs on their single cells, then runs every
// cell of Tables 2-5. progress, if not nil, hears which cell runs.
func Regenerate(m Model, progress func(string)) (Report, error) {
	if progress == nil {
		progress = func(string) {}
	}
	m.HostCost = map[int]int64{}
	for _, f := range []int{17, 69} {
		progress(fmt.Sprintf("fitting the %d-flit host cost", f))
		h, err := m.FitHostCost(f)
		if err != nil {
			return Report{}, fmt.Errorf("fit %d flits: %w", f, err)
		}
		m.HostCost[f] = h
	}
	rep := Report{Model: m, PerTable: map[string][2]float64{}}
	// Cells are independent and the model deterministic: run them on
	// every core, then file them in table order.
	type job struct {
		tb    Table
		ci    int
		order string
		us    float64
		err   error
	}
	var jobs []*job
	for _, tb := range PaperTables {
		for ci := range tb.Columns {
			for _, o := range collective.Orders {
				jobs = append(jobs, &job{tb: tb, ci: ci, order: o})
			}
		}
	}
	next := make(chan *job)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				j.us, j.err = m.Cell(j.tb, j.order, j.ci)
			}
		}()
	}
	for _, j := range jobs {
		progress(fmt.Sprintf("table %s: %s, %s", j.tb.Name, j.tb.Columns[j.ci].Label, j.order))
		next <- j
	}
	close(next)
	wg.Wait()
	var sum, sumNF float64
	var n int
	sums := map[string][2]float64{}
	for _, j := range jobs {
		if j.err != nil {
			return Report{}, j.err
		}
		tb, ci := j.tb, j.ci
		r := Record{Table: tb.Name, Order: j.order, Column: tb.Columns[ci].Label, Topology: tb.Columns[ci].Topology, Routing: tb.Columns[ci].Routing,
			Flits: tb.Flits, US: round2(j.us), PaperUS: tb.Paper[j.order][ci], NoFabricUS: round2(NoFabric(tb, ci)),
			HostCostNs: float64(m.HostCost[tb.Flits]) / float64(fabric.Nanosecond)}
		rep.Records = append(rep.Records, r)
		e, en := RelErr(j.us, r.PaperUS), RelErr(r.NoFabricUS, r.PaperUS)
		ts := sums[tb.Name]
		sums[tb.Name] = [2]float64{ts[0] + e, ts[1] + en}
		if tb.Name == "3" || tb.Name == "4" {
			sum += e
			sumNF += en
			n++
		}
	}
	for _, tb := range PaperTables {
		cells := float64(len(tb.Columns) * len(collective.Orders))
		rep.PerTable[tb.Name] = [2]float64{sums[tb.Name][0] / cells, sums[tb.Name][1] / cells}
	}
	rep.MeanRelErr, rep.NoFabricRelErr = sum/float64(n), sumNF/float64(n)
	return rep, nil
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// Cell finds one record.
func (r Report) Cell(table, order string, col int) Record {
	tb, _ := TableByName(table)
	for _, rec := range r.Records {
		if rec.Table == table && rec.Order == order && rec.Column == tb.Columns[col].Label {
			return rec
		}
	}
	return Record{}
}

// Inversion is a pair of orders whose ranking in one column differs from
// the paper's while the paper's gap between them exceeds 1%.
type Inversion struct {
	Table, Column    string
	Faster, Slower   string // as the paper has them
	PaperGap, OurGap float64
}

// Inversions lists every such pair: the rankings the model gets wrong
// where the paper's difference is more than noise.
func (r Report) Inversions() []Inversion {
	var out []Inversion
	for _, tb := range PaperTables {
		for ci, col := range tb.Columns {
			for _, a := range collective.Orders {
				for _, b := range collective.Orders {
					pa, pb := tb.Paper[a][ci], tb.Paper[b][ci]
					if pa >= pb || (pb-pa)/pa <= 0.01 {
						continue
					}
					oa, ob := r.Cell(tb.Name, a, ci).US, r.Cell(tb.Name, b, ci).US
					if oa >= ob {
						out = append(out, Inversion{tb.Name, col.Label, a, b, (pb - pa) / pa, (ob - oa) / oa})
					}
				}
			}
		}
	}
	return out
}

// Finding is one of the paper's conclusions, checked on the model.
type Finding struct {
	Name   string // the finding, as the issue states it
	Held   bool   // whether the model reproduces it
	Detail string // the cells that break it, or the figure checked
}

// Findings checks the paper's findings the issue lists as targets.
func (r Report) Findings() []Finding {
	var fs []Finding
	add := func(name string, held bool, format string, args ...any) {
		fs = append(fs, Finding{name, held, fmt.Sprintf(format, args...)})
	}
	us := func(t, o string, c int) float64 { return r.Cell(t, o, c).US }
	// 1. RO and 1SHO-3RO are the two slowest orders in every column.
	var bad []string
	for _, tb := range PaperTables {
		for ci, col := range tb.Columns {
			os := append([]string(nil), collective.Orders...)
			sort.SliceStable(os, func(i, j int) bool { return us(tb.Name, os[i], ci) > us(tb.Name, os[j], ci) })
			two := map[string]bool{os[0]: true, os[1]: true}
			if !two["RO"] || !two["1SHO-3RO"] {
				bad = append(bad, fmt.Sprintf("table %s %s: slowest %s, %s", tb.Name, col.Label, os[0], os[1]))
			}
		}
	}
	add("RO and 1SHO-3RO slowest in every column", len(bad) == 0, "%v", bad)
	// 2. SHIO fastest or within 0.2% at 17 flits (paper's exception: Clos 32).
	bad = nil
	for _, tb := range PaperTables {
		if tb.Flits != 17 {
			continue
		}
		for ci, col := range tb.Columns {
			if col.Topology == "clos32" {
				continue
			}
			best := math.Inf(1)
			for _, o := range collective.Orders {
				best = math.Min(best, us(tb.Name, o, ci))
			}
			if s := us(tb.Name, "SHIO", ci); s > best*1.002 {
				bad = append(bad, fmt.Sprintf("table %s %s: SHIO %.2f, best %.2f", tb.Name, col.Label, s, best))
			}
		}
	}
	add("SHIO fastest (within 0.2%) in every 17-flit column but Clos 32", len(bad) == 0, "%v", bad)
	// 3. RO over SHO at 17 flits: 8-12% at 64 hosts, 5-7.5% at 16/32.
	bad = nil
	var gaps []string
	for _, tb := range PaperTables {
		if tb.Flits != 17 {
			continue
		}
		for ci, col := range tb.Columns {
			g := us(tb.Name, "RO", ci)/us(tb.Name, "SHO", ci) - 1
			lo, hi := 0.08, 0.12
			if tb.Name == "4" {
				lo, hi = 0.05, 0.075
			}
			gaps = append(gaps, fmt.Sprintf("%s %s %.1f%%", tb.Name, col.Label, 100*g))
			if g < lo-1e-9 || g > hi+1e-9 {
				bad = append(bad, fmt.Sprintf("table %s %s: %.1f%% (want %.0f-%.1f%%)", tb.Name, col.Label, 100*g, 100*lo, 100*hi))
			}
		}
	}
	add("RO 8-12% over SHO at 64 hosts, 5-7.5% at 16/32 (17 flits)", len(bad) == 0, "%v (all: %v)", bad, gaps)
	// 4. SCO at most 5% behind SHO at 17 flits; about 12% at 69 on the mesh.
	bad = nil
	for _, tb := range PaperTables {
		if tb.Flits != 17 {
			continue
		}
		for ci, col := range tb.Columns {
			if g := us(tb.Name, "SCO", ci)/us(tb.Name, "SHO", ci) - 1; g > 0.05 {
				bad = append(bad, fmt.Sprintf("table %s %s: %.1f%%", tb.Name, col.Label, 100*g))
			}
		}
	}
	add("SCO at most 5% behind SHO at 17 flits", len(bad) == 0, "%v", bad)
	g := us("5", "SCO", 0)/us("5", "SHO", 0) - 1
	add("SCO about 12% behind SHO at 69 flits on the mesh", g >= 0.09 && g <= 0.15, "%.1f%% (paper 12.2%%)", 100*g)
	rank := 1
	for _, o := range collective.Orders {
		if o != "HIO" && us("5", o, 0) < us("5", "HIO", 0) {
			rank++
		}
	}
	add("HIO falls to third at 69 flits on the mesh", rank == 3, "HIO ranks %d", rank)
	// 5. Prefix slowest routing for every order; DL and SBP within 0.2%.
	bad = nil
	var dl []string
	for _, t := range []string{"2", "3"} {
		for _, o := range collective.Orders {
			p := us(t, o, 0)
			for c := 1; c < 4; c++ {
				if us(t, o, c) >= p {
					bad = append(bad, fmt.Sprintf("table %s %s: prefix %.2f, col %d %.2f", t, o, p, c, us(t, o, c)))
				}
			}
			if d := RelErr(us(t, o, 2), us(t, o, 3)); d > 0.002 {
				dl = append(dl, fmt.Sprintf("table %s %s: DL %.2f SBP %.2f", t, o, us(t, o, 2), us(t, o, 3)))
			}
		}
	}
	add("Prefix the slowest routing for every order", len(bad) == 0, "%v", bad)
	add("DL and SBP within 0.2%", len(dl) == 0, "%v", dl)
	// 6. Table 5: the 14-switch fat tree slower than the 6-switch one.
	bad = nil
	for _, o := range collective.Orders {
		if us("5", o, 1) <= us("5", o, 2) {
			bad = append(bad, fmt.Sprintf("%s: %.2f vs %.2f", o, us("5", o, 1), us("5", o, 2)))
		}
	}
	add("Fat tree (14) slower than fat tree (6) for every order (69 flits)", len(bad) == 0, "%v", bad)
	add("mean relative error over Tables 3 and 4 at most 4% and below the no-fabric model's",
		r.MeanRelErr <= 0.04 && r.MeanRelErr < r.NoFabricRelErr, "%.2f%% vs %.2f%%", 100*r.MeanRelErr, 100*r.NoFabricRelErr)
	return fs
}

// Fig6 is the model's 2-host barrier time (µs) with the hosts 1..n
// switches apart on a line of switches: the per-hop slope must be Fig. 6's
// 0.7 µs.
func Fig6(hostCost int64, n int) ([]float64, error) {
	var out []float64
	for k := 1; k <= n; k++ {
		topo := &fabric.Topology{Name: "line", Switches: k, HostSwitch: []int{0, k - 1}}
		for s := 0; s+1 < k; s++ {
			topo.Links = append(topo.Links, [2]int{s, s + 1})
		}
		r, err := fabric.NewRouting(topo, "shortest")
		if err != nil {
			return nil, err
		}
		res, err := fabric.Barriers(r, collective.Binomial{}, []int{0, 1}, fabric.PaperParams(17, hostCost), 100)
		if err != nil {
			return nil, err
		}
		out = append(out, float64(res.Mean)/float64(fabric.Microsecond))
	}
	return out, nil
}
