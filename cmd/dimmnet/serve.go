package main

import (
	"context"
	"errors"
	"flag"
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

	"github.com/dimmnet/dimmnet/driver/devinfo"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/fabric"
	"github.com/dimmnet/dimmnet/vdev/ivshmem"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/link/switched"
	"github.com/dimmnet/dimmnet/vdev/rundir"
	"github.com/dimmnet/dimmnet/vdev/shm"
	"github.com/dimmnet/dimmnet/vdev/tracesock"
	"github.com/dimmnet/dimmnet/vdev/wire"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// serveCmd is the backend daemon: N devices joined by a link, each with its
// region (a sealed memfd, or a file in --shm-dir) and an ivshmem server
// socket DIR/node<K>.sock.
func serveCmd(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dir := fs.String("dir", rundir.Default(), "directory for the lock and sockets: made 0700, or refused if another user owns it or others can write it")
	group := fs.String("group", "", "let this group's users attach: sockets 0660 and the directory 0750, both given the group (default: the daemon's user only, sockets 0600)")
	nodes := fs.Int("nodes", 2, "devices to serve, node ids 0..N-1, all on one link")
	vectors := fs.Int("vectors", 1, "eventfds per peer; must equal QEMU's ivshmem-doorbell vectors=N")
	regionMiB := fs.Int("region-mib", 16, "size of each device's region in MiB (a power of two, at least 1)")
	payload := fs.Int("mtu", vdev.DefaultHubPayload, "packet payload of the link in bytes")
	keep := fs.Bool("keep", false, "with --shm-dir: leave the region files behind on exit (until the next serve removes them as stale)")
	shmDir := fs.String("shm-dir", "", "make the regions files in this directory (e.g. /dev/shm) instead of sealed memfds; a client can then resize one, which fails that device")
	logJSON := fs.Bool("log-json", false, "log as JSON instead of text")
	linkKind := fs.String("link", "mem", "what joins the devices: mem (in this daemon), udp (--peers), afpacket (--ifname), tap (--bridge)")
	nodeBase := fs.Int("node-base", 0, "node id of the first device (daemons on several hosts each serve a range)")
	peersFile := fs.String("peers", "", "udp: a file of lines `node <id> <host:port>` for every node, this daemon's included")
	ifname := fs.String("ifname", "", "afpacket: the interface (a veth end, a NIC) the devices send on")
	bridge := fs.String("bridge", "", "tap: the bridge the devices' TAPs (dimmnet<node>) join; made if missing")
	faultSpec := fs.String("fault", "", "inject faults on every device's receive side (loss=...,dup=...,seed=...)")
	nsName := fs.String("netns", "", "afpacket, tap: find, make and open the interfaces in this named network namespace (under /run/netns) instead of the daemon's own")
	pcapFile := fs.String("pcap", "", "capture every frame this daemon's devices send and receive to this pcap file")
	statq := fs.Int("statq", 0, "status ring entries per device (a power of two; 0: the default, 1024): small rings make drivers meet a full status ring")
	ringFull := fs.String("ringfull", "hold", "the devices' RINGFULL_MODE at start: hold or nack (drivers may change it)")
	check := fs.Bool("check", false, "checked devices: each validates its driver's side of the datasheet and counts and logs every violation (`dimmnet stat` lists them; docs/sandbox.md)")
	keyFile := fs.String("key", "", "authenticate every frame between devices with this pre-shared key file (at least 16 bytes, mode 0600; the same file on every daemon): per-session keys, replay protection (docs/wire.md, Authenticated links)")
	perUser := fs.Int("max-clients-per-user", ivshmem.DefaultMaxPerUser, "clients one user (other than root) may attach to one device at once; each device takes 64 clients in all")
	fabricSpec := fs.String("fabric", "", "mem: hang the devices off a switch fabric, TOPOLOGY:ROUTING (e.g. mesh4x4:updown; docs/rhinet.md), device K on host K-node-base, with per-hop delay and one frame at a time per link and VC")
	rawIRQ := fs.Bool("raw-irq", false, "also serve DIR/raw.sock: an ivshmem server with no device behind it, whose peers ring each other (the lab's raw interrupt baseline)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is empty")
	}
	gid, sockMode := 0, os.FileMode(0o600)
	if *group != "" {
		g, err := user.LookupGroup(*group)
		if err != nil {
			return fmt.Errorf("--group: %w", err)
		}
		if gid, err = strconv.Atoi(g.Gid); err != nil {
			return fmt.Errorf("--group %s: gid %q: %w", *group, g.Gid, err)
		}
		sockMode = 0o660
	}
	if *keep && *shmDir == "" {
		return errors.New("--keep keeps region files, and memfd regions have none: give --shm-dir too")
	}
	if *perUser < 1 {
		return fmt.Errorf("--max-clients-per-user %d: must be at least 1", *perUser)
	}
	if *nodes < 1 || *nodes > 1024 {
		return fmt.Errorf("--nodes %d: must be 1..1024", *nodes)
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if *logJSON {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	if err := rundir.Ensure(*dir, gid); err != nil {
		return err
	}
	// Catch SIGINT/SIGTERM from the start: one arriving during set-up is
	// then handled by the same orderly shutdown (regions, TAPs, sockets).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	lock, err := rundir.Lock(*dir)
	if err != nil {
		return err
	}
	defer lock.Close()
	// A killed daemon's region files stay until someone removes them; the
	// default directory is looked in too, for daemons from before memfds.
	for _, sd := range uniq(*shmDir, "/dev/shm") {
		removed, err := shm.RemoveStale(sd)
		for _, p := range removed {
			log.Info("removed a dead daemon's region", "path", p)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("stale regions", "err", err)
		}
	}

	ids := make([]uint16, *nodes)
	for i := range ids {
		ids[i] = uint16(*nodeBase + i)
	}
	ns := netns.None()
	if *nsName != "" {
		if ns, err = netns.GetFromName(*nsName); err != nil {
			return fmt.Errorf("--netns %s: %w", *nsName, err)
		}
		defer ns.Close()
	}
	open, undo, err := daemonPorts(ns, *linkKind, *payload, *peersFile, *ifname, *bridge, *faultSpec, *keyFile)
	if err != nil {
		return err
	}
	defer undo()
	if *fabricSpec != "" {
		if *linkKind != "mem" || *faultSpec != "" || *keyFile != "" {
			return errors.New("--fabric: only on --link mem, without --fault or --key")
		}
		if open, err = fabricPorts(*fabricSpec, *nodes, *nodeBase, *payload); err != nil {
			return err
		}
	}
	if *pcapFile != "" {
		capOpen, closeCapture, err := servePcap(*pcapFile, *linkKind, *payload, open)
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
		RegionSize:    *regionMiB << 20,
		Vectors:       *vectors,
		KeepRegion:    *keep,
		Check:         *check,
		StatusEntries: *statq,
	}
	switch *ringFull {
	case "hold":
		cfg.RingFullMode = uapi.RingFullHold
	case "nack":
		cfg.RingFullMode = uapi.RingFullNACK
	default:
		return fmt.Errorf("--ringfull %q: want hold or nack", *ringFull)
	}
	if *shmDir != "" {
		cfg.ShmPath = shm.DaemonPattern(*shmDir, os.Getpid())
	}
	local, err := vdev.NewLocalPorts(cfg, ids, open)
	if err != nil {
		return err
	}
	local.Engine.SetOSYield(true) // the drivers are other processes
	if err := devinfo.WriteLink(*dir, serveLink(*linkKind, *fabricSpec, *peersFile, ids)); err != nil {
		log.Warn("dimmnet devices will not know the link", "err", err)
	}
	defer os.Remove(filepath.Join(*dir, devinfo.LinkFile))
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
		sock := filepath.Join(*dir, fmt.Sprintf("node%d.sock", d.Node()))
		s, err := ivshmem.Listen(ivshmem.Config{
			Path: sock, Vectors: *vectors, ShmFD: d.ShmFD(), Self: d.DoorbellFDs(), SocketMode: sockMode, SocketGID: gid, MaxPerUser: *perUser,
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
			d.Node(), sock, regionName(cfg.ShmPath, d.Node()), g.RegionSize>>20, g.LinkMemSize, *vectors)
	}
	if *rawIRQ {
		s, err := serveRawIRQ(ivshmem.Config{Path: filepath.Join(*dir, "raw.sock"), Vectors: *vectors, SocketMode: sockMode, SocketGID: gid, MaxPerUser: *perUser}, log)
		if err != nil {
			shutdown()
			return err
		}
		servers = append(servers, s)
	}
	log.Info("serving", "dir", *dir, "nodes", *nodes, "vectors", *vectors)
	<-ctx.Done()
	log.Info("shutting down: devices marked stopped, clients told, sockets closed", "keep_regions", *keep)
	shutdown()
	return nil
}

// rawRegionSize is the device-less server's shared memory: 2 MiB, unlike
// the lab's 1 MiB ivshmem-plain region and the devices' regions, though
// guests tell the functions apart by their MSI-X BAR and magic, not size.
const rawRegionSize = 2 << 20

// serveRawIRQ serves an ivshmem server with no device: peer 0's eventfds
// exist (the protocol has them) but nothing reads them, and the peers,
// from id 1, ring each other's vectors directly through QEMU. The region
// is a sealed memfd: nothing is left in /dev/shm, and no peer can shrink
// it under the others.
func serveRawIRQ(cfg ivshmem.Config, log *slog.Logger) (*ivshmem.Server, error) {
	vectors := cfg.Vectors
	shmFD, err := shm.Memfd("dimmnet-raw-irq", rawRegionSize)
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

// serveLink describes the daemon's link for `dimmnet devices`: its kind
// and the nodes it reaches (every node of a peers file; this daemon's
// own on the in-memory hub or a fabric; unknown where frames name them).
func serveLink(kind, fabric, peersFile string, ids []uint16) devinfo.Link {
	l := devinfo.Link{Kind: kind, Nodes: ids}
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
