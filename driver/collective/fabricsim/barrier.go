package fabricsim

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/internal/provenance"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/fabric"
	"github.com/dimmnet/dimmnet/vdev/link/switched"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// BarrierRecord is one order's line of dimmnet barrier --json.
type BarrierRecord struct {
	Topology       string  `json:"topology"`
	Routing        string  `json:"routing"`
	Order          string  `json:"order"`
	Nodes          int     `json:"nodes"`
	Switches       float64 `json:"switches_per_message"`
	BarrierUs      float64 `json:"barrier_us"`
	MulticastUs    float64 `json:"multicast_us"`
	ModelBarrier   float64 `json:"model_barrier_us"`
	ModelMulticast float64 `json:"model_multicast_us"`
	// ModelContended is the model's multicast packets that found an
	// inter-switch channel in use, and MaxHops the most inter-switch hops
	// one of them crossed (the paper's Fig. 5: 0 and 2 for SHIO under
	// e-cube); DeviceContended is the share of the devices' frames, during
	// the timed multicasts and the barriers between them, that waited for
	// a channel on the switched medium.
	ModelContended  float64 `json:"model_contended"`
	MaxHops         int     `json:"max_hops"`
	DeviceContended float64 `json:"device_contended"`
}

// BarrierOptions is what the command line asks of RunBarrier.
type BarrierOptions struct {
	Nodes      int    // --nodes
	TopoName   string // --topology
	Routing    string // --routing
	Orders     string // --order
	Barriers   int    // --barriers
	Multicasts int    // --multicasts
	Size       int    // --size
	Lists      int    // --lists
	Seed       uint64 // --seed
	Check      bool   // --check
	Rtc        bool   // --run-to-completion
	AsJSON     bool   // --json
	// Progress, if set, is shown what the run is doing.
	Progress func(string)
}

// RunBarrier runs the RHiNET-2 paper's barrier and multicast orders on
// real devices hanging off a switch fabric in this process, and prints each
// beside what the fabric model predicts for the paper's cluster: the
// devices are software (µs per message where RHiNET-2 took 3), so the
// columns compare in ranking and spread, not in value.
func RunBarrier(opt BarrierOptions) error {
	topo, err := fabric.NewTopology(opt.TopoName)
	if err != nil {
		return err
	}
	if topo.Hosts() != opt.Nodes {
		return fmt.Errorf("--nodes %d: topology %s has %d hosts", opt.Nodes, topo.Name, topo.Hosts())
	}
	rt, err := fabric.NewRouting(topo, opt.Routing)
	if err != nil {
		return err
	}
	names := collective.Orders
	if opt.Orders != "all" {
		names = nil
		for _, o := range strings.Split(opt.Orders, ",") {
			o = strings.ToUpper(strings.TrimSpace(o))
			if o == "1SHO3RO" {
				o = "1SHO-3RO"
			}
			names = append(names, o)
		}
	}
	progress := opt.Progress
	if progress == nil {
		progress = func(string) {}
	}
	defer progress("")

	// The model: the paper's cluster, its 17-flit host cost fitted as
	// fabric-bench does.
	progress("barrier: fitting the model's host cost")
	hc, err := Model{Barriers: 2000, Seed: 1, Lists: 10}.FitHostCost(17)
	if err != nil {
		return err
	}
	par := fabric.PaperParams(17, hc)

	f := switched.New(topo, rt, switched.PaperConfig(max(opt.Size, 64)+wire.FrameOverhead))
	l, err := NewLocal(vdev.Config{RegionSize: 1 << 20, Check: opt.Check}, f, 1)
	if err != nil {
		return err
	}
	defer l.Close()
	var drvs []*driver.Driver
	defer func() {
		for _, d := range drvs {
			d.Close()
		}
	}()
	for _, d := range l.Devices {
		tr := collective.EngineServed(d)
		if opt.Rtc {
			tr = driver.InProcessDevice(d)
		}
		drv, err := driver.Open(tr)
		if err != nil {
			return err
		}
		drvs = append(drvs, drv)
	}
	m := collective.Map{HostSwitch: topo.HostSwitch, Switches: f.Switches}
	g, err := collective.NewGroup(drvs, m, collective.Options{})
	if err != nil {
		return err
	}
	var recs []BarrierRecord
	for _, o := range names {
		ls, err := m.Lists(o, opt.Seed, opt.Lists)
		if err != nil {
			return err
		}
		rec := BarrierRecord{Topology: topo.Name, Routing: rt.Name, Order: o, Nodes: opt.Nodes}
		for i, list := range ls {
			progress(fmt.Sprintf("barrier: %s list %d of %d", o, i+1, len(ls)))
			b, err := g.TimeBarriers(list, opt.Barriers)
			if err != nil {
				return fmt.Errorf("%s: %w", o, err)
			}
			f.ResetStats()
			mc, err := g.TimeMulticasts(list, uint32((opt.Size+7)/8*8), opt.Multicasts)
			if err != nil {
				return fmt.Errorf("%s: %w", o, err)
			}
			if st := f.Stats(); st.Frames > 0 {
				rec.DeviceContended += float64(st.Contended) / float64(st.Frames)
			}
			mb, err := fabric.Barriers(rt, collective.Binomial{}, list, par, 2000)
			if err != nil {
				return err
			}
			mr, err := fabric.MulticastRun(rt, collective.Binomial{}, list, par)
			if err != nil {
				return err
			}
			mm := mr.Time
			rec.ModelContended += float64(mr.Contended)
			rec.MaxHops = max(rec.MaxHops, mr.MaxHops)
			rec.BarrierUs += b.Seconds() * 1e6
			rec.MulticastUs += mc.Seconds() * 1e6
			rec.ModelBarrier += float64(mb.Mean) / 1e6
			rec.ModelMulticast += float64(mm) / 1e6
			sw := 0
			for p := 1; p < len(list); p++ {
				sw += m.Switches(list[p], list[collective.Parent(p)])
			}
			rec.Switches += float64(sw) / float64(len(list)-1)
		}
		k := float64(len(ls))
		rec.BarrierUs, rec.MulticastUs, rec.ModelBarrier, rec.ModelMulticast, rec.Switches =
			rec.BarrierUs/k, rec.MulticastUs/k, rec.ModelBarrier/k, rec.ModelMulticast/k, rec.Switches/k
		rec.ModelContended, rec.DeviceContended = rec.ModelContended/k, rec.DeviceContended/k
		recs = append(recs, rec)
	}
	progress("")
	if opt.Check {
		var v uint64
		for _, d := range drvs {
			v += d.Counter(uapi.CtrViolations)
		}
		if v != 0 {
			return fmt.Errorf("checked devices: %d violations of the datasheet by the collective library's driver", v)
		}
		fmt.Fprintln(os.Stderr, "barrier: checked devices: no violation of the datasheet")
	}
	if opt.AsJSON {
		enc := provenance.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(recs)
	}
	mode := "engine-served"
	if opt.Rtc {
		mode = "run to completion"
	}
	fmt.Printf("%d devices on %s, %s routing (%s; %d barriers and %d multicasts of %d bytes per list)\n",
		opt.Nodes, topo.Name, rt.Name, mode, opt.Barriers, opt.Multicasts, opt.Size)
	fmt.Printf("model: the paper's cluster (host cost %.0f ns per message, fitted on Table 3), the same lists\n", float64(hc)/1000)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "order\tswitches/msg\tbarrier µs\tmodel µs\tmulticast µs\tmodel µs\tmodel contended\tmax hops\tdevice frames contended\t")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%.1f%%\t\n", r.Order, r.Switches, r.BarrierUs, r.ModelBarrier, r.MulticastUs, r.ModelMulticast,
			r.ModelContended, r.MaxHops, 100*r.DeviceContended)
	}
	return tw.Flush()

}
