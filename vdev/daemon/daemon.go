// Package daemon is what dimmnet serve runs: devices joined by a link
// medium, each with its region and an ivshmem server socket clients and
// QEMU attach to, the trace socket, the run directory's lock. It sits
// above the device model and its media and below the CLI, which only
// parses flags into Options.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/rundir"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/daemon/ivshmem"
	"github.com/dimmnet/dimmnet/vdev/daemon/tracesock"
	"github.com/dimmnet/dimmnet/vdev/fabric"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/link/switched"
	"github.com/dimmnet/dimmnet/vdev/region"
	"github.com/dimmnet/dimmnet/vdev/wire"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Options is what the command line asks of Serve.
type Options struct {
	Dir        string // --dir
	Group      string // --group
	Nodes      int    // --nodes
	Vectors    int    // --vectors
	RegionMiB  int    // --region-mib
	Payload    int    // --mtu
	Keep       bool   // --keep
	ShmDir     string // --shm-dir
	LogJSON    bool   // --log-json
	LinkKind   string // --link
	NodeBase   int    // --node-base
	PeersFile  string // --peers
	Ifname     string // --ifname
	Bridge     string // --bridge
	FaultSpec  string // --fault
	NsName     string // --netns
	PcapFile   string // --pcap
	Statq      int    // --statq
	RingFull   string // --ringfull
	Check      bool   // --check
	KeyFile    string // --key
	PerUser    int    // --max-clients-per-user
	FabricSpec string // --fabric
	RawIRQ     bool   // --raw-irq
}

// Serve is the backend daemon: o.Nodes devices joined by a link, each
// with its region (a sealed memfd, or a file in o.ShmDir) and an ivshmem
// server socket DIR/node<K>.sock. It returns when SIGINT or SIGTERM has
// shut everything down.
func Serve(o Options) error {
	if o.Dir == "" {
		return errors.New("--dir is empty")
	}
	gid, sockMode := 0, os.FileMode(0o600)
	if o.Group != "" {
		g, err := user.LookupGroup(o.Group)
		if err != nil {
			return fmt.Errorf("--group: %w", err)
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return fmt.Errorf("--group %s: gid %q: %w", o.Group, g.Gid, err)
		}
		sockMode = 0o660
	}
	if o.Keep && o.ShmDir == "" {
		return errors.New("--keep keeps region files, and memfd regions have none: give --shm-dir too")
	}
	if o.PerUser < 1 {
		return fmt.Errorf("--max-clients-per-user %d: must be at least 1", o.PerUser)
	}
	if o.Nodes < 1 || o.Nodes > 1024 {
		return fmt.Errorf("--nodes %d: must be 1..1024", o.Nodes)
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if o.LogJSON {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	if err := rundir.Ensure(o.Dir, gid); err != nil {
		return err
	}
	// Catch SIGINT/SIGTERM from the start: one arriving during set-up is
	// then handled by the same orderly shutdown (regions, TAPs, sockets).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	lock, err := rundir.Lock(o.Dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	// A killed daemon's region files stay until someone removes them; the
	// default directory is looked in too, for daemons from before memfds.
	for _, sd := range uniq(o.ShmDir, "/dev/shm") {
		removed, err := region.RemoveStale(sd)
		for _, p := range removed {
			log.Info("removed a dead daemon's region", "path", p)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("stale regions", "err", err)
		}
	}

	ids := make([]uint16, o.Nodes)
	for i := range ids {
		ids[i] = uint16(o.NodeBase + i)
	}
	ns := netns.None()
	if o.NsName != "" {
		if ns, err = netns.GetFromName(o.NsName); err != nil {
			return fmt.Errorf("--netns %s: %w", o.NsName, err)
		}
		defer ns.Close()
	}
	open, undo, err := daemonPorts(ns, o.LinkKind, o.Payload, o.PeersFile, o.Ifname, o.Bridge, o.FaultSpec, o.KeyFile)
	if err != nil {
		return err
	}
	defer undo()
	if o.FabricSpec != "" {
		if o.LinkKind != "mem" || o.FaultSpec != "" || o.KeyFile != "" {
			return errors.New("--fabric: only on --link mem, without --fault or --key")
		}
		if open, err = fabricPorts(o.FabricSpec, o.Nodes, o.NodeBase, o.Payload); err != nil {
			return err
		}
	}
	if o.PcapFile != "" {
		capOpen, closeCapture, err := servePcap(o.PcapFile, o.LinkKind, o.Payload, open)
		if err != nil {
			return err
		}
		// Deferred before the ports close (defers run last first), so
		// the capture is flushed only once nothing records into it.
		defer func() {
			if err := closeCapture(); err != nil {
				log.Error("capture", "err", err)
			}
		}()
		open = capOpen
	}
	cfg := vdev.Config{
		RegionSize:    o.RegionMiB << 20,
		Vectors:       o.Vectors,
		KeepRegion:    o.Keep,
		Check:         o.Check,
		StatusEntries: o.Statq,
	}
	switch o.RingFull {
	case "hold":
		cfg.RingFullMode = uapi.RingFullHold
	case "nack":
		cfg.RingFullMode = uapi.RingFullNACK
	default:
		return fmt.Errorf("--ringfull %q: want hold or nack", o.RingFull)
	}
	if o.ShmDir != "" {
		cfg.ShmPath = region.DaemonPattern(o.ShmDir, os.Getpid())
	}
	local, err := vdev.NewLocalPorts(cfg, ids, open)
	if err != nil {
		return err
	}
	local.Engine.SetOSYield(true) // the drivers are other processes
	if err := rundir.WriteLink(o.Dir, serveLink(o.LinkKind, o.FabricSpec, o.PeersFile, ids)); err != nil {
		log.Warn("dimmnet devices will not know the link", "err", err)
	}
	defer os.Remove(filepath.Join(o.Dir, rundir.LinkFile))
	var servers []*ivshmem.Server
	var traces []*tracesock.Server
	var serversMu sync.Mutex
	byNode := map[uint16]*ivshmem.Server{}
	// A client that shrinks a file region fails that device only: its
	// clients are told the device left, the others serve on.
	local.Engine.SetRegionFaultHandler(func(d *vdev.Device, err error) {
		log.Error("device failed: a client resized its region; its clients are told it left, the other devices keep serving", "node", d.Node(), "err", err)
		serversMu.Lock()
		s := byNode[d.Node()]
		serversMu.Unlock()
		if s != nil {
			go s.Shutdown()
		}
	})
	shutdown := func() {
		for _, d := range local.Devices {
			d.MarkStopped() // drivers, guests included, see it in the register page
		}
		for _, s := range servers {
			s.Shutdown() // every client gets "peer 0 left"
		}
		for _, t := range traces {
			t.Close()
		}
		local.Close()
	}
	for _, d := range local.Devices {
		d := d
		sock := filepath.Join(o.Dir, fmt.Sprintf("node%d.sock", d.Node()))
		s, err := ivshmem.Listen(ivshmem.Config{
			Path: sock, Vectors: o.Vectors, ShmFD: d.ShmFD(), Self: d.DoorbellFDs(), SocketMode: sockMode, SocketGID: gid, MaxPerUser: o.PerUser,
			OnJoin:  func(id int64, fds []int) { d.AddInterrupt(fds[0]) },
			OnLeave: func(id int64, fds []int) { d.RemoveInterrupt(fds[0]) },
			Log:     log.With("node", d.Node()),
		})
		if err != nil {
			shutdown()
			return err
		}
		servers = append(servers, s)
		serversMu.Lock()
		byNode[d.Node()] = s
		serversMu.Unlock()
		go func() {
			if err := s.Serve(); err != nil {
				log.Error("server stopped", "node", d.Node(), "err", err)
			}
		}()
		ts, err := tracesock.Listen(tracesock.Path(sock), sockMode, gid, d, log.With("node", d.Node()))
		if err != nil {
			shutdown()
			return err
		}
		traces = append(traces, ts)
		g := d.Geometry()
		fmt.Printf("node %d ready: socket %s region %s (%d MiB, link memory %d bytes, vectors %d)\n",
			d.Node(), sock, regionName(cfg.ShmPath, d.Node()), g.RegionSize>>20, g.LinkMemSize, o.Vectors)
	}
	if o.RawIRQ {
		s, err := serveRawIRQ(ivshmem.Config{Path: filepath.Join(o.Dir, "raw.sock"), Vectors: o.Vectors, SocketMode: sockMode, SocketGID: gid, MaxPerUser: o.PerUser}, log)
		if err != nil {
			shutdown()
			return err
		}
		servers = append(servers, s)
	}
	log.Info("serving", "dir", o.Dir, "nodes", o.Nodes, "vectors", o.Vectors)
	<-ctx.Done()
	log.Info("shutting down: devices marked stopped, clients told, sockets closed", "keep_regions", o.Keep)
	shutdown()
	return nil

}

// serveRawIRQ serves an ivshmem server with no device: peer 0's eventfds
// exist (the protocol has them) but nothing reads them, and the peers,
// from id 1, ring each other's vectors directly through QEMU. The region
// is a sealed memfd: nothing is left in /dev/shm, and no peer can shrink
// it under the others.
func serveRawIRQ(cfg ivshmem.Config, log *slog.Logger) (*ivshmem.Server, error) {
	vectors := cfg.Vectors
	shmFD, err := region.Memfd("dimmnet-raw-irq", rawRegionSize)
	if err != nil {
		return nil, fmt.Errorf("raw irq region: %w", err)
	}
	self := make([]int, vectors)
	for i := range self {
		if self[i], err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
			return nil, fmt.Errorf("raw irq eventfd: %w", err)
		}
	}
	cfg.ShmFD, cfg.Self, cfg.Log = shmFD, self, log.With("raw", true)
	s, err := ivshmem.Listen(cfg)
	if err != nil {
		return nil, err
	}
	go func() {
		if err := s.Serve(); err != nil {
			log.Error("raw irq server stopped", "err", err)
		}
	}()
	fmt.Printf("raw ready: socket %s (no device: peers ring each other; %d MiB, vectors %d)\n", cfg.Path, rawRegionSize>>20, vectors)
	return s, nil
}

// servePcap wraps every port open makes so its frames are recorded into
// one pcap file. On the in-memory link every device is this daemon's, so
// only sent frames are recorded (each frame once, not again by its
// receiver); on a real medium the peers are other daemons' devices, so
// received frames are recorded too. The returned close flushes the file
// and says how many frames it holds.
func servePcap(path, kind string, payload int, open func(*vdev.Device) (link.Port, error)) (func(*vdev.Device) (link.Port, error), func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, fmt.Errorf("--pcap: %w", err)
	}
	cw, err := capture.NewWriter(f, payload+wire.FrameOverhead)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("--pcap %s: %w", path, err)
	}
	wrapped := func(d *vdev.Device) (link.Port, error) {
		p, err := open(d)
		if err != nil {
			return nil, err
		}
		if kind == "" || kind == "mem" {
			return cw.WrapSent(p), nil
		}
		return cw.Wrap(p), nil
	}
	closeCapture := func() error {
		if err := cw.Close(); err != nil {
			return fmt.Errorf("--pcap %s: %w", path, err)
		}
		fmt.Fprintf(os.Stderr, "serve: %d frames captured to %s\n", cw.Frames(), path)
		return nil
	}
	return wrapped, closeCapture, nil
}

// regionName says where a node's region is, for its ready line: the file,
// or that it is a sealed memfd (nothing to find in the file system).
func regionName(pattern string, node uint16) string {
	if pattern == "" {
		return "memfd (sealed)"
	}
	return fmt.Sprintf(pattern, node)
}

// uniq is its arguments without empty strings and repeats, in order.
func uniq(ss ...string) []string {
	var r []string
	for _, s := range ss {
		if s != "" && !slices.Contains(r, s) {
			r = append(r, s)
		}
	}
	return r
}

// fabricPorts attaches each device to its host of a switched medium built
// from spec, TOPOLOGY:ROUTING, whose host count must be nodes.
func fabricPorts(spec string, nodes, nodeBase, payload int) (func(d *vdev.Device) (link.Port, error), error) {
	tn, rn, ok := strings.Cut(spec, ":")
	if !ok {
		rn = "updown"
	}
	topo, err := fabric.NewTopology(tn)
	if err != nil {
		return nil, fmt.Errorf("--fabric: %w", err)
	}
	if topo.Hosts() != nodes {
		return nil, fmt.Errorf("--fabric %s has %d hosts, --nodes is %d", tn, topo.Hosts(), nodes)
	}
	rt, err := fabric.NewRouting(topo, rn)
	if err != nil {
		return nil, fmt.Errorf("--fabric: %w", err)
	}
	f := switched.New(topo, rt, switched.PaperConfig(payload+wire.FrameOverhead))
	return func(d *vdev.Device) (link.Port, error) { return f.Attach(d.MAC(), int(d.Node())-nodeBase) }, nil
}

// rawRegionSize is the device-less server's shared memory: 2 MiB, unlike
// the lab's 1 MiB ivshmem-plain region and the devices' regions, though
// guests tell the functions apart by their MSI-X BAR and magic, not size.
const rawRegionSize = 2 << 20

// daemonPorts opens the daemon's devices' ports on the chosen medium: the
// in-memory hub (every device in this daemon), UDP to the nodes a peers
// file lists (daemons on several hosts), AF_PACKET on an interface, or one
// TAP per device on a bridge (VMs on one host). Interfaces are looked up,
// made and opened in ns (netns.None(): the daemon's own namespace), so a
// daemon can serve a network namespace someone else made, as the lab's
// --link tap|afpacket does, without running in it. The cleanup removes
// TAPs (and a bridge) the daemon made.
func daemonPorts(ns netns.NsHandle, kind string, payload int, peersFile, ifname, bridge, faultSpec, keyFile string) (func(d *vdev.Device) (link.Port, error), func() error, error) {
	var fc impair.Config
	if faultSpec != "" {
		var err error
		if fc, err = impair.Parse(faultSpec); err != nil {
			return nil, nil, err
		}
	}
	key, err := auth.LoadOptionalKey(keyFile)
	if err != nil {
		return nil, nil, err
	}
	var open func(d *vdev.Device) (link.Port, error)
	var made []string
	cleanup := func() error {
		var errs []error
		for i := len(made) - 1; i >= 0; i-- { // TAPs before the bridge they joined
			errs = append(errs, netsetup.Delete(ns, made[i]))
		}
		return errors.Join(errs...)
	}
	// inNS opens a port on a thread in ns: the socket or TAP descriptor
	// stays bound to that namespace's interface afterwards.
	inNS := func(f func() (link.Port, error)) (link.Port, error) {
		var p link.Port
		err := netsetup.Run(ns, func() error {
			var err error
			p, err = f()
			return err
		})
		return p, err
	}
	switch kind {
	case "", "mem":
		hub := link.NewHub(payload+wire.FrameOverhead, 256)
		open = func(d *vdev.Device) (link.Port, error) { return hub.Attach(d.MAC()) }
	case "udp":
		if peersFile == "" {
			return nil, nil, errors.New("--link udp needs --peers FILE (lines: node <id> <host:port>)")
		}
		f, err := os.Open(peersFile)
		if err != nil {
			return nil, nil, err
		}
		peers, err := link.ParsePeers(f)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("peers file %s: %w", peersFile, err)
		}
		mtu := min(payload, 65507-wire.FrameOverhead) + wire.FrameOverhead
		open = func(d *vdev.Device) (link.Port, error) {
			own, ok := peers[d.MAC().String()]
			if !ok {
				return nil, fmt.Errorf("peers file %s has no line for node %d", peersFile, d.Node())
			}
			return inNS(func() (link.Port, error) { return link.ListenUDP(own, d.MAC(), peers, mtu) })
		}
	case "afpacket":
		if ifname == "" {
			return nil, nil, errors.New("--link afpacket needs --ifname IF")
		}
		open = func(d *vdev.Device) (link.Port, error) {
			p, err := inNS(func() (link.Port, error) { return link.OpenAFPacket(ifname, d.MAC()) })
			if err != nil {
				return nil, fmt.Errorf("node %d on %s: %w", d.Node(), ifname, err)
			}
			return p, nil
		}
	case "tap":
		if bridge == "" {
			return nil, nil, errors.New("--link tap needs --bridge NAME")
		}
		err := netsetup.Run(ns, func() error {
			if _, err := netlink.LinkByName(bridge); err != nil { // ours to remove on exit
				made = append(made, bridge)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
		if err := netsetup.Bridge(ns, bridge); err != nil {
			return nil, nil, err
		}
		open = func(d *vdev.Device) (link.Port, error) {
			name := fmt.Sprintf("dimmnet%d", d.Node())
			if err := netsetup.TAP(ns, name, bridge, net.HardwareAddr{0x02, 0x54, 0x41, 0x50, byte(d.Node() >> 8), byte(d.Node())}); err != nil {
				return nil, err
			}
			made = append(made, name)
			p, err := inNS(func() (link.Port, error) { return link.OpenTAP(name, d.MAC()) })
			if err != nil {
				return nil, fmt.Errorf("node %d on %s: %w", d.Node(), name, err)
			}
			return p, nil
		}
	default:
		return nil, nil, fmt.Errorf("--link %q: want mem, udp, afpacket or tap", kind)
	}
	wrapped := func(d *vdev.Device) (link.Port, error) {
		p, err := open(d)
		if err != nil {
			return nil, err
		}
		if fc.Active() {
			c := fc
			c.Seed += int64(d.Node())
			p = impair.Wrap(p, c)
		}
		return auth.Keyed(p, key) // last, so faults act on the frames as the medium carries them
	}
	return wrapped, cleanup, nil
}

// serveLink describes the daemon's link for `dimmnet devices`: its kind
// and the nodes it reaches (every node of a peers file; this daemon's
// own on the in-memory hub or a fabric; unknown where frames name them).
func serveLink(kind, fabric, peersFile string, ids []uint16) rundir.Link {
	l := rundir.Link{Kind: kind, Nodes: ids}
	switch {
	case fabric != "":
		l.Kind, l.Peers = "mem (fabric "+fabric+")", ids
	case kind == "mem":
		l.Peers = ids
	case kind == "udp" && peersFile != "":
		f, err := os.Open(peersFile)
		if err != nil {
			return l
		}
		defer f.Close()
		peers, err := link.ParsePeers(f)
		if err != nil {
			return l
		}
		l.Peers = slices.Clone(ids) // the file may leave out this daemon's own
		for m := range peers {
			if hw, err := net.ParseMAC(m); err == nil {
				if n, ok := wire.MACNode(hw); ok {
					l.Peers = append(l.Peers, n)
				}
			}
		}
		slices.Sort(l.Peers)
		l.Peers = slices.Compact(l.Peers)
	}
	return l
}
