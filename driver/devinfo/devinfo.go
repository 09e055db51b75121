// Package devinfo lists dimmnet devices with their identity and limits,
// as ibv_devinfo -v does for RDMA devices: what a driver developer checks
// before writing code against a device (its features, MTU, MAX_INFLIGHT,
// ring and memory sizes) and what joins it to others (its link and the
// nodes on it). Everything but the link comes from the device's own
// register page, read as any driver reads it; the link is what the daemon
// serving it wrote beside its sockets (rundir.LinkFile). It also attaches
// to devices by the names the commands take (Attach, AttachAll), so
// `dimmnet devices`, `stat` and `fs` find a daemon's devices one way.
package devinfo

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/internal/rundir"
	"github.com/dimmnet/dimmnet/uapi"
)

// Device is one device's listing (a --json record).
type Device struct {
	Name         string   `json:"name"`             // node<K>, or the PCI address in a guest
	Socket       string   `json:"socket,omitempty"` // the ivshmem socket it was reached by
	Node         uint64   `json:"node"`
	State        string   `json:"state"`
	ABIVersion   uint64   `json:"abi_version"`
	Features     []string `json:"features"`
	MTU          uint64   `json:"mtu"`
	MaxInflight  uint64   `json:"max_inflight"`
	CmdqEntries  uint64   `json:"cmdq_entries"`
	StatqEntries uint64   `json:"statq_entries"`
	AMTEntries   uint64   `json:"amt_entries"`
	AMTATEntries uint64   `json:"amtat_entries"`
	RegionSize   uint64   `json:"region_size"`
	LinkMemSize  uint64   `json:"linkmem_size"`
	LLCMSize     uint64   `json:"llcm_size"`
	ScratchSize  uint64   `json:"scratch_size"`
	PageSize     uint64   `json:"page_size"`
	ProcsPerNode uint64   `json:"procs_per_node"`
	Vectors      uint64   `json:"vectors"`
	Violations   uint64   `json:"violations"` // checked devices (feature CHECK)
	Link         string   `json:"link,omitempty"`
	Peers        []uint16 `json:"peers"` // the other nodes on its link (nil: unknown)
}

// ErrNotDevice reports a region that is not a whole dimmnet device of
// this ABI: nothing else of it is read.
var ErrNotDevice = errors.New("not a dimmnet device of this ABI")

// Read describes the device whose region is mapped at region.
func Read(name string, region []byte) (Device, error) {
	if err := uapi.CheckRegion(region); err != nil {
		return Device{}, fmt.Errorf("%s: %w: %v", name, ErrNotDevice, err)
	}
	r := uapi.Region(region)
	if m, v := r.Load64(uapi.RegMagic), r.Load64(uapi.RegABIVersion); m != uapi.Magic || v != uapi.ABIVersion {
		return Device{}, fmt.Errorf("%s: %w: magic %#x, ABI version %d", name, ErrNotDevice, m, v)
	}
	g := r.ReadGeometry()
	if err := g.Validate(uint64(len(region))); err != nil {
		return Device{}, fmt.Errorf("%s: %w: %v", name, ErrNotDevice, err)
	}
	features := uapi.Features(r.Load64(uapi.RegFeatures))
	if features == nil {
		features = []string{}
	}
	return Device{
		Name: name, Node: r.Load64(uapi.RegNodeID), State: strings.ToUpper(uapi.StateName(r.Load64(uapi.RegState))),
		ABIVersion: uapi.ABIVersion, Features: features,
		MTU: g.MTU, MaxInflight: r.Load64(uapi.RegMaxInflight),
		CmdqEntries: g.CmdqEntries, StatqEntries: g.StatqEntries, AMTEntries: g.AMTEntries, AMTATEntries: g.AMTATEntries,
		RegionSize: g.RegionSize, LinkMemSize: g.LinkMemSize, LLCMSize: g.LLCMSize, ScratchSize: g.ScratchSize,
		PageSize: g.PageSize, ProcsPerNode: r.Load64(uapi.RegProcsPerNode), Vectors: r.Load64(uapi.RegVectors),
		Violations: r.Counter(uapi.CtrViolations),
	}, nil
}

// List describes every device a daemon serves in dir (its node*.sock),
// in node order, with the link the daemon recorded.
func List(dir string) ([]Device, error) {
	as, err := AttachAll(dir)
	if err != nil {
		return nil, err
	}
	l, lerr := rundir.ReadLink(dir)
	devs, err := describe(as)
	for i := range devs {
		if lerr == nil {
			devs[i].Link = l.Kind
			devs[i].Peers = others(l.Peers, devs[i].Node)
		}
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Node < devs[j].Node })
	return devs, err
}

// describe reads each attached device's listing and closes them all.
func describe(as []Attached) ([]Device, error) {
	defer closeAll(as)
	var devs []Device
	for _, a := range as {
		d, err := Read(a.Name, a.Region())
		if err != nil {
			return nil, err
		}
		d.Socket = a.Socket
		devs = append(devs, d)
	}
	return devs, nil
}

// others is peers without node self (nil stays nil: unknown).
func others(peers []uint16, self uint64) []uint16 {
	if peers == nil {
		return nil
	}
	out := []uint16{}
	for _, p := range peers {
		if uint64(p) != self {
			out = append(out, p)
		}
	}
	return out
}

// ListPCI describes every dimmnet device on this machine's PCI bus: the
// devices of a lab guest.
func ListPCI() ([]Device, error) {
	as, err := attachPCI()
	if err != nil {
		return nil, err
	}
	devs, err := describe(as)
	for i := range devs {
		devs[i].Link = "ivshmem (guest)"
	}
	return devs, err
}

// Write prints devices as ibv_devinfo -v does: one block per device, one
// field a line.
func Write(w io.Writer, devs []Device) error {
	tw := tabwriter.NewWriter(w, 0, 8, 1, '\t', 0)
	for i, d := range devs {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "device:\t%s\n", d.Name)
		f := func(k, format string, a ...any) { fmt.Fprintf(tw, "\t%s:\t"+format+"\n", append([]any{k}, a...)...) }
		if d.Socket != "" {
			f("socket", "%s", d.Socket)
		}
		f("node", "%d", d.Node)
		f("state", "%s", d.State)
		f("abi_version", "%d", d.ABIVersion)
		f("features", "%s", strings.Join(d.Features, " "))
		f("mtu", "%d", d.MTU)
		f("max_inflight", "%d", d.MaxInflight)
		f("cmdq_entries", "%d", d.CmdqEntries)
		f("statq_entries", "%d", d.StatqEntries)
		f("amt_entries", "%d", d.AMTEntries)
		f("amtat_entries", "%d", d.AMTATEntries)
		f("procs_per_node", "%d", d.ProcsPerNode)
		f("region_size", "%s", size(d.RegionSize))
		f("linkmem_size", "%s", size(d.LinkMemSize))
		f("llcm_size", "%s", size(d.LLCMSize))
		f("scratch_size", "%s", size(d.ScratchSize))
		f("page_size", "%s", size(d.PageSize))
		f("vectors", "%d", d.Vectors)
		if d.Link != "" {
			f("link", "%s", d.Link)
		} else {
			f("link", "unknown (the daemon recorded none)")
		}
		switch {
		case d.Peers == nil:
			f("peers", "learned from the wire")
		case len(d.Peers) == 0:
			f("peers", "none")
		default:
			ps := make([]string, len(d.Peers))
			for i, p := range d.Peers {
				ps[i] = fmt.Sprint(p)
			}
			f("peers", "%s", strings.Join(ps, " "))
		}
		for _, n := range d.Features {
			if n == "CHECK" {
				f("violations", "%d", d.Violations)
			}
		}
	}
	return tw.Flush()
}

// size is n bytes, with its binary unit when it has one exactly.
func size(n uint64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d (%d %s)", n, n>>u.shift, u.name)
		}
	}
	return fmt.Sprint(n)
}
