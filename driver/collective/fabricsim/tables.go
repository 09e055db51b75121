// Package fabricsim times the collective orders on the RHiNET-2 fabric
// model: it regenerates the multicast paper's Tables 2-5 (every visiting
// order of package collective, on every column's topology and routing,
// with host costs fitted on one cell) and checks the paper's findings on
// them. It sits beside the orders it simulates, so the fabric model in
// vdev/fabric (topologies, routings, switch timing) imports no library.
package fabricsim

import (
	"fmt"
	"math"

	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/vdev/fabric"
)

// Column is one column of a paper table: a topology under a routing.
type Column struct {
	Label    string // the paper's heading
	Topology string
	Routing  string
}

// Table is one of the paper's result tables: barrier time in µs per order
// (rows, in Orders' order) and column.
type Table struct {
	Name    string // "2".."5"
	Caption string // what the table measures
	Flits   int    // packet length: 17 (PIO) or 69 (DMA)
	Columns []Column
	// Paper[order][column] in µs, as printed.
	Paper map[string][]float64
}

// PaperTables are Tables 2-5 of the paper. Table 4's 4x2 mesh and Table
// 5's mesh do not name their routing; we take Up*/Down*, the routing of
// the mesh cell the 17-flit host cost is fitted on.
var PaperTables = []Table{
	{Name: "2", Caption: "Topology A, 64 hosts, 17 flits", Flits: 17,
		Columns: []Column{{"Prefix", "topoA", "prefix"}, {"Up*/Down*", "topoA", "updown"}, {"DL", "topoA", "dl"}, {"SBP", "topoA", "sbp"}},
		Paper: map[string][]float64{
			"RO": {52.39, 50.53, 47.86, 47.83}, "SHO": {47.31, 45.09, 43.97, 43.98}, "SCO": {49.59, 45.79, 44.33, 44.37},
			"1SHO-3RO": {53.02, 49.98, 48.05, 48.04}, "SHIO": {44.35, 38.99, 39.04, 39.04}, "HIO": {44.95, 39.62, 39.38, 39.32}}},
	{Name: "3", Caption: "4x4 mesh, 64 hosts, 17 flits", Flits: 17,
		Columns: []Column{{"Prefix", "mesh4x4", "prefix"}, {"Up*/Down*", "mesh4x4", "updown"}, {"DL", "mesh4x4", "dl"}, {"SBP", "mesh4x4", "sbp"}},
		Paper: map[string][]float64{
			"RO": {51.49, 45.77, 45.62, 45.61}, "SHO": {46.20, 42.19, 42.10, 42.10}, "SCO": {48.52, 42.09, 42.05, 42.07},
			"1SHO-3RO": {51.53, 45.92, 45.97, 45.96}, "SHIO": {44.32, 38.83, 38.84, 38.85}, "HIO": {46.14, 38.92, 38.89, 38.92}}},
	{Name: "4", Caption: "16 and 32 hosts, 17 flits", Flits: 17,
		Columns: []Column{{"Fat tree (6)", "fattree6", "shortest"}, {"Clos (8, 16 hosts)", "clos16", "shortest"}, {"Clos (8, 32 hosts)", "clos32", "shortest"}, {"Mesh (4x2)", "mesh4x2", "updown"}},
		Paper: map[string][]float64{
			"RO": {27.68, 27.62, 33.60, 35.00}, "SHO": {26.07, 25.89, 31.90, 32.59}, "SCO": {25.90, 25.89, 31.91, 32.55},
			"1SHO-3RO": {28.32, 28.10, 33.32, 35.06}, "SHIO": {25.86, 25.86, 32.42, 31.64}, "HIO": {25.85, 25.89, 32.38, 31.65}}},
	{Name: "5", Caption: "512-byte data (69 flits)", Flits: 69,
		Columns: []Column{{"Mesh (16)", "mesh4x4", "updown"}, {"Fat tree (14)", "fattree14", "shortest"}, {"Fat tree (6)", "fattree6", "shortest"}},
		Paper: map[string][]float64{
			"RO": {65.60, 46.81, 37.86}, "SHO": {56.21, 39.06, 35.03}, "SCO": {63.08, 40.07, 35.73},
			"1SHO-3RO": {65.31, 41.05, 37.65}, "SHIO": {52.95, 37.29, 34.79}, "HIO": {61.65, 38.46, 35.65}}},
}

// FitCells are the single cells each host cost is fitted on.
var FitCells = map[int]struct {
	Table, Order string
	Column       int
}{
	17: {"3", "SHIO", 1}, // mesh, Up*/Down*
	69: {"5", "SHIO", 0}, // mesh
}

// Model is everything a table regeneration needs besides the paper.
type Model struct {
	// HostCost per packet size in flits.
	HostCost map[int]int64
	// Barriers per list: the paper's 100,000; the steady state makes long
	// runs cheap.
	Barriers int
	// Seed draws the random lists, Lists how many per random order (10).
	Seed  uint64
	Lists int
	// Switch is the switch and NI model every cell runs on (the zero
	// value: output-queued); the host costs are fitted on it.
	Switch fabric.Switch
}

// Cell runs one table cell: the mean barrier time in µs over the order's
// lists.
func (m Model) Cell(tb Table, order string, col int) (float64, error) {
	c := tb.Columns[col]
	topo, err := fabric.NewTopology(c.Topology)
	if err != nil {
		return 0, err
	}
	r, err := fabric.NewRouting(topo, c.Routing)
	if err != nil {
		return 0, err
	}
	lists, err := collective.Map{HostSwitch: topo.HostSwitch}.Lists(order, m.Seed, m.Lists)
	if err != nil {
		return 0, err
	}
	par := fabric.PaperParams(tb.Flits, m.HostCost[tb.Flits])
	par.Switch = m.Switch
	var sum float64
	for _, l := range lists {
		res, err := fabric.Barriers(r, collective.Binomial{}, l, par, m.Barriers)
		if err != nil {
			return 0, fmt.Errorf("table %s %s %s: %w", tb.Name, order, c.Label, err)
		}
		sum += float64(res.Mean) / float64(fabric.Microsecond)
	}
	return sum / float64(len(lists)), nil
}

// TableByName finds one of PaperTables.
func TableByName(name string) (Table, bool) {
	for _, t := range PaperTables {
		if t.Name == name {
			return t, true
		}
	}
	return Table{}, false
}

// FitHostCost finds, by bisection to the picosecond, the host cost that
// makes the model reproduce the fit cell for packets of flits flits.
func (m Model) FitHostCost(flits int) (int64, error) {
	fc := FitCells[flits]
	tb, _ := TableByName(fc.Table)
	want := tb.Paper[fc.Order][fc.Column]
	lo, hi := int64(0), 20*fabric.Microsecond
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		mm := m
		mm.HostCost = map[int]int64{flits: mid}
		got, err := mm.Cell(tb, fc.Order, fc.Column)
		if err != nil {
			return 0, err
		}
		if got < want {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi, nil
}

// NoFabric is the baseline a fabric model must beat: every message costs
// the same constant, fitted on the same cell, so a barrier over n hosts
// takes 2 x collective.Steps(n) of them.
func NoFabric(tb Table, col int) float64 {
	fc := FitCells[tb.Flits]
	ft, _ := TableByName(fc.Table)
	c := ft.Paper[fc.Order][fc.Column] / 12 // 64 hosts: 6 + 6 steps
	topo, _ := fabric.NewTopology(tb.Columns[col].Topology)
	return float64(2*collective.Steps(topo.Hosts())) * c
}

// RelErr is |got-want|/want.
func RelErr(got, want float64) float64 { return math.Abs(got-want) / want }
