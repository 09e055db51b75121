package main

import (
	"flag"
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

// barrierRecord is one order's line of dimmnet barrier --json.
type barrierRecord struct {
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

// barrierCmd runs the RHiNET-2 paper's barrier and multicast orders on real
// devices hanging off a switch fabric in this process, and prints each
// beside what the fabric model predicts for the paper's cluster: the
// devices are software (µs per message where RHiNET-2 took 3), so the
// columns compare in ranking and spread, not in value.
func barrierCmd(args []string) error {
	fs := flag.NewFlagSet("barrier", flag.ContinueOnError)
	nodes := fs.Int("nodes", 64, "devices (must be the topology's host count)")
	topoName := fs.String("topology", "mesh4x4", "topology: "+strings.Join(fabric.TopologyNames, ", "))
	routing := fs.String("routing", "updown", "routing: "+strings.Join(fabric.RoutingNames, ", "))
	orders := fs.String("order", "all", "orders, comma-separated ("+strings.Join(collective.Orders, ", ")+") or all")
	barriers := fs.Int("barriers", 2000, "barriers timed per visiting list")
	multicasts := fs.Int("multicasts", 300, "multicasts timed per visiting list")
	size := fs.Int("size", 8, "multicast payload bytes")
	lists := fs.Int("lists", 3, "visiting lists per random order (the paper: 10)")
	seed := fs.Uint64("seed", 1, "seed of the random visiting lists")
	check := fs.Bool("check", false, "checked devices: the collective library's driver is held to the datasheet; a violation fails the run")
	rtc := fs.Bool("run-to-completion", false, "let each rank's goroutine run its own device (default: the engine serves all)")
	asJSON := fs.Bool("json", false, "print JSON records")
	quiet := fs.Bool("q", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	topo, err := fabric.NewTopology(*topoName)
	if err != nil {
		return err
	}
	if topo.Hosts() != *nodes {
		return fmt.Errorf("--nodes %d: topology %s has %d hosts", *nodes, topo.Name, topo.Hosts())
	}
	rt, err := fabric.NewRouting(topo, *routing)
	if err != nil {
		return err
	}
	names := collective.Orders
	if *orders != "all" {
		names = nil
		for _, o := range strings.Split(*orders, ",") {
			o = strings.ToUpper(strings.TrimSpace(o))
			if o == "1SHO3RO" {
				o = "1SHO-3RO"
			}
			names = append(names, o)
		}
	}
	progress := progressLine(*quiet)
	defer progress("")

	// The model: the paper's cluster, its 17-flit host cost fitted as
	// fabric-bench does.
	progress("barrier: fitting the model's host cost")
	hc, err := fabric.Model{Barriers: 2000, Seed: 1, Lists: 10}.FitHostCost(17)
	if err != nil {
		return err
	}
	par := fabric.PaperParams(17, hc)

	f := switched.New(topo, rt, switched.PaperConfig(max(*size, 64)+wire.FrameOverhead))
	l, err := switched.NewLocal(vdev.Config{RegionSize: 1 << 20, Check: *check}, f, 1)
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
		if *rtc {
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
	var recs []barrierRecord
	for _, o := range names {
		ls, err := m.Lists(o, *seed, *lists)
		if err != nil {
			return err
		}
		rec := barrierRecord{Topology: topo.Name, Routing: rt.Name, Order: o, Nodes: *nodes}
		for i, list := range ls {
			progress(fmt.Sprintf("barrier: %s list %d of %d", o, i+1, len(ls)))
			b, err := g.TimeBarriers(list, *barriers)
			if err != nil {
				return fmt.Errorf("%s: %w", o, err)
			}
			f.ResetStats()
			mc, err := g.TimeMulticasts(list, uint32((*size+7)/8*8), *multicasts)
			if err != nil {
				return fmt.Errorf("%s: %w", o, err)
			}
			if st := f.Stats(); st.Frames > 0 {
				rec.DeviceContended += float64(st.Contended) / float64(st.Frames)
			}
			mb, err := fabric.Barriers(rt, list, par, 2000)
			if err != nil {
				return err
			}
			mr, err := fabric.MulticastRun(rt, list, par)
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
	if *check {
		var v uint64
		for _, d := range drvs {
			v += d.Counter(uapi.CtrViolations)
		}
		if v != 0 {
			return fmt.Errorf("checked devices: %d violations of the datasheet by the collective library's driver", v)
		}
		fmt.Fprintln(os.Stderr, "barrier: checked devices: no violation of the datasheet")
	}
	if *asJSON {
		enc := provenance.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(recs)
	}
	mode := "engine-served"
	if *rtc {
		mode = "run to completion"
	}
	fmt.Printf("%d devices on %s, %s routing (%s; %d barriers and %d multicasts of %d bytes per list)\n",
		*nodes, topo.Name, rt.Name, mode, *barriers, *multicasts, *size)
	fmt.Printf("model: the paper's cluster (host cost %.0f ns per message, fitted on Table 3), the same lists\n", float64(hc)/1000)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "order\tswitches/msg\tbarrier µs\tmodel µs\tmulticast µs\tmodel µs\tmodel contended\tmax hops\tdevice frames contended\t")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%d\t%.1f%%\t\n", r.Order, r.Switches, r.BarrierUs, r.ModelBarrier, r.MulticastUs, r.ModelMulticast,
			r.ModelContended, r.MaxHops, 100*r.DeviceContended)
	}
	return tw.Flush()
}
