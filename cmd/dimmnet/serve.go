package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/fabric"
	"github.com/dimmnet/dimmnet/vdev/ivshmem"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/link/switched"
	"github.com/dimmnet/dimmnet/vdev/wire"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// serveCmd is the backend daemon: N devices joined by a link, each with its
// region in /dev/shm and an ivshmem server socket DIR/node<K>.sock.
func serveCmd(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	dir := fs.String("dir", "", "directory for the sockets (required)")
	nodes := fs.Int("nodes", 2, "devices to serve, node ids 0..N-1, all on one link")
	vectors := fs.Int("vectors", 1, "eventfds per peer; must equal QEMU's ivshmem-doorbell vectors=N")
	regionMiB := fs.Int("region-mib", 16, "size of each device's region in MiB (a power of two, at least 1)")
	payload := fs.Int("mtu", vdev.DefaultHubPayload, "packet payload of the link in bytes")
	keep := fs.Bool("keep", false, "leave the /dev/shm regions behind on exit")
	shmDir := fs.String("shm-dir", "/dev/shm", "where the regions' files go")
	logJSON := fs.Bool("log-json", false, "log as JSON instead of text")
	linkKind := fs.String("link", "mem", "what joins the devices: mem (in this daemon), udp (--peers), afpacket (--ifname), tap (--bridge)")
	nodeBase := fs.Int("node-base", 0, "node id of the first device (daemons on several hosts each serve a range)")
	peersFile := fs.String("peers", "", "udp: a file of lines `node <id> <host:port>` for every node, this daemon's included")
	ifname := fs.String("ifname", "", "afpacket: the interface (a veth end, a NIC) the devices send on")
	bridge := fs.String("bridge", "", "tap: the bridge the devices' TAPs (dimmnet<node>) join; made if missing")
	faultSpec := fs.String("fault", "", "inject faults on every device's receive side (loss=...,dup=...,seed=...)")
	nsName := fs.String("netns", "", "afpacket, tap: find, make and open the interfaces in this named network namespace (under /run/netns) instead of the daemon's own")
	pcapFile := fs.String("pcap", "", "capture every frame this daemon's devices send and receive to this pcap file")
	keyFile := fs.String("key", "", "authenticate every frame between devices with this pre-shared key file (at least 16 bytes, mode 0600; the same file on every daemon): per-session keys, replay protection (docs/wire.md, Authenticated links)")
	fabricSpec := fs.String("fabric", "", "mem: hang the devices off a switch fabric, TOPOLOGY:ROUTING (e.g. mesh4x4:updown; docs/rhinet.md), device K on host K-node-base, with per-hop delay and one frame at a time per link and VC")
	rawIRQ := fs.Bool("raw-irq", false, "also serve DIR/raw.sock: an ivshmem server with no device behind it, whose peers ring each other (the lab's raw interrupt baseline)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--dir is required")
	}
	if *nodes < 1 || *nodes > 1024 {
		return fmt.Errorf("--nodes %d: must be 1..1024", *nodes)
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if *logJSON {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", *dir, err)
	}
	// Catch SIGINT/SIGTERM from the start: one arriving during set-up is
	// then handled by the same orderly shutdown (regions, TAPs, sockets).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	lock, err := lockDir(*dir)
	if err != nil {
		return err
	}
	defer unix.Close(lock)

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
		RegionSize: *regionMiB << 20,
		ShmPath:    filepath.Join(*shmDir, fmt.Sprintf("dimmnet-%d-node%%d", os.Getpid())),
		Vectors:    *vectors,
		KeepRegion: *keep,
	}
	local, err := vdev.NewLocalPorts(cfg, ids, open)
	if err != nil {
		return err
	}
	local.Engine.SetOSYield(true) // the drivers are other processes
	var servers []*ivshmem.Server
	shutdown := func() {
		for _, d := range local.Devices {
			d.MarkStopped() // drivers, guests included, see it in the register page
		}
		for _, s := range servers {
			s.Shutdown() // every client gets "peer 0 left"
		}
		local.Close()
	}
	for _, d := range local.Devices {
		d := d
		sock := filepath.Join(*dir, fmt.Sprintf("node%d.sock", d.Node()))
		s, err := ivshmem.Listen(ivshmem.Config{
			Path: sock, Vectors: *vectors, ShmFD: d.ShmFD(), Self: d.DoorbellFDs(),
			OnJoin:  func(id int64, fds []int) { d.AddInterrupt(fds[0]) },
			OnLeave: func(id int64, fds []int) { d.RemoveInterrupt(fds[0]) },
			Log:     log.With("node", d.Node()),
		})
		if err != nil {
			shutdown()
			return err
		}
		servers = append(servers, s)
		go func() {
			if err := s.Serve(); err != nil {
				log.Error("server stopped", "node", d.Node(), "err", err)
			}
		}()
		g := uapi.Region(d.Region()).ReadGeometry()
		fmt.Printf("node %d ready: socket %s region %s (%d MiB, link memory %d bytes, vectors %d)\n",
			d.Node(), sock, regionPath(cfg.ShmPath, d.Node()), g.RegionSize>>20, g.LinkMemSize, *vectors)
	}
	if *rawIRQ {
		s, err := serveRawIRQ(filepath.Join(*dir, "raw.sock"), *vectors, log)
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
// is a memfd, so nothing is left in /dev/shm.
func serveRawIRQ(sock string, vectors int, log *slog.Logger) (*ivshmem.Server, error) {
	shm, err := unix.MemfdCreate("dimmnet-raw-irq", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("raw irq region: %w", err)
	}
	if err := unix.Ftruncate(shm, rawRegionSize); err != nil {
		unix.Close(shm)
		return nil, fmt.Errorf("raw irq region: %w", err)
	}
	self := make([]int, vectors)
	for i := range self {
		if self[i], err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
			return nil, fmt.Errorf("raw irq eventfd: %w", err)
		}
	}
	s, err := ivshmem.Listen(ivshmem.Config{Path: sock, Vectors: vectors, ShmFD: shm, Self: self, Log: log.With("raw", true)})
	if err != nil {
		return nil, err
	}
	go func() {
		if err := s.Serve(); err != nil {
			log.Error("raw irq server stopped", "err", err)
		}
	}()
	fmt.Printf("raw ready: socket %s (no device: peers ring each other; %d MiB, vectors %d)\n", sock, rawRegionSize>>20, vectors)
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

func regionPath(pattern string, node uint16) string { return fmt.Sprintf(pattern, node) }

// lockDir takes an exclusive lock on DIR/dimmnet.lock, so a second daemon
// on the same directory fails with a clear error instead of stealing sockets.
func lockDir(dir string) (int, error) {
	p := filepath.Join(dir, "dimmnet.lock")
	fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return -1, fmt.Errorf("lock %s: %w", p, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return -1, fmt.Errorf("another dimmnet serve is running on %s (%s is locked)", dir, p)
		}
		return -1, fmt.Errorf("lock %s: %w", p, err)
	}
	return fd, nil
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
