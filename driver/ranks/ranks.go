// Package ranks gives an FMPL rank its device: each rank is a process
// that embeds its own dimmnet device (as pingpong --link shm does), joined
// to the other ranks' devices by the shared-memory link on one host, or by
// UDP or raw Ethernet (AF_PACKET) across hosts. It is the one place between FMPL and the device
// model: package fmpl takes a *driver.Driver and never imports vdev, so
// the same library runs on a device attached over ivshmem or in a guest.
package ranks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/cpubind"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// ErrNoJob reports a shared-memory rank with no rendezvous directory:
// none given and no launcher's job id in the environment to derive one.
var ErrNoJob = errors.New("ranks: no rendezvous directory and no launcher job id")

// Options chooses a rank's device and link.
type Options struct {
	// Link is "shm" (ranks on one host), "udp" (a peers file) or
	// "afpacket" (raw Ethernet frames on IfName). Default: $DIMMNET_LINK,
	// else "shm", so ranks an outside launcher starts can be moved to
	// another medium without a flag of their program.
	Link string
	// IfName is the network interface an afpacket rank sends and receives
	// on (default: $DIMMNET_IFNAME, else the interface of the host's IPv4
	// default route). No peers file is needed: a node's MAC derives from
	// its id (wire.NodeMAC), so a device reaches a rank by its node id.
	IfName string
	// Dir is the shared-memory rendezvous directory every rank of the job
	// names (default: JobDir()).
	Dir string
	// Peers is the UDP peers file: `node <id> <host:port>` for every rank,
	// this one included (its line is its own address).
	Peers string
	// UDPLocal, instead of a peers file, is the host:port a udp device
	// binds: it starts knowing no peer, and Admit adds each one learned
	// at run time (a libfabric address vector insert); with Learn, a peer
	// that sends first is admitted by its first frame.
	UDPLocal string
	Learn    bool
	// Node is this rank's node id (FMPL's default: rank+1).
	Node uint16
	// RegionSize is the device's region in bytes (default 64 MiB: room for
	// two 16 MiB buffers besides FMPL's areas).
	RegionSize int
	// Payload is the packet payload (default vdev.DefaultHubPayload; every
	// rank must use the same).
	Payload int
	// LocalRanks is how many ranks share this host (0: unknown). When
	// they outnumber its cores, a waiting rank spins only briefly before
	// it sleeps, so the ranks that have work get the cores: on 2 cores
	// with 4 ranks a tree collective took 1.5 ms per operation spinning
	// for up to 1 ms a wait, 0.3-0.6 ms spinning 5 µs; it also keeps the
	// process to one thread of Go code (GOMAXPROCS=1) unless the
	// environment says otherwise.
	LocalRanks int
	// LocalRank is this rank's index among the LocalRanks of its host
	// (the launcher's local rank), read only with Bind.
	LocalRank int
	// Bind binds the rank's threads to the LocalRank-th of the CPUs this
	// process may use, for as long as the device is open, when the
	// LocalRanks fit them: two ranks can then never end up sharing one
	// core while another is free of them (DIMMNET_BIND=0: never bind; see
	// internal/cpubind). Opt-in, because it needs a LocalRank the
	// launcher gave: ranks that all passed the zero value would all bind
	// to one CPU.
	Bind bool
	// Key is a pre-shared key file: every frame between the ranks'
	// devices is authenticated (vdev/link/auth). Default: $DIMMNET_KEY, so
	// ranks an outside launcher starts (mpirun -x DIMMNET_KEY=...) get it.
	Key string
	// Check makes the device a checked one (vdev.Config.Check); also
	// $DIMMNET_CHECK=1. Close then fails if FMPL broke the datasheet.
	Check bool
}

// ErrViolations reports that a checked rank's driver broke the datasheet.
var ErrViolations = errors.New("ranks: the driver broke the datasheet")

// The wait policy of a rank when ranks outnumber cores (the driver's
// DIMMNET_OS_YIELD and DIMMNET_SPIN_NS): give the core to the OS at every
// look after the first few, as Open MPI's ranks do when oversubscribed,
// since the rank we wait for may be the one without a core; sleep after
// 20 µs of that. Sleeping instead costs every tree edge a wake-up through
// the scheduler (barrier at p = 4 on 2 cores 282-317 µs against 27-56
// with yields); docs/fmpl.md has the policies measured.
var oversubscribedWait = [][2]string{
	{"DIMMNET_OS_YIELD", "1"},
	{"DIMMNET_SPIN_NS", "20000"},
}

// Device is an open rank device: the driver FMPL runs on.
type Device struct {
	Driver *driver.Driver
	udp    link.Port // a udp device's port, for Admit
	local  *vdev.Local
	jobDir string // the rendezvous directory derived from the job id, ours to tidy
	bound  *cpubind.Binding
	node   uint16
	check  bool
}

// Close detaches the driver and lets the device's last commands leave.
// In a directory derived from the job id it removes this node's lock
// file, and the directory once the last rank has gone: a launcher's job
// ids are not reused, so nothing else will claim them.
func (d *Device) Close() error {
	var err error
	if v := d.Driver.Counter(uapi.CtrViolations); d.check && v > 0 {
		err = fmt.Errorf("node %d: %d violations %v: %w", d.node, v, d.Driver.Region().ReadViolations(), ErrViolations)
	}
	err = errors.Join(err, d.Driver.Close(), d.local.Close(), d.bound.Restore())
	if d.jobDir != "" {
		os.Remove(filepath.Join(d.jobDir, fmt.Sprintf("node%d.lock", d.node)))
		os.Remove(d.jobDir) // fails while other ranks' files remain
	}
	return err
}

// JobDir is the shared-memory rendezvous directory of the job that
// launched this process, from the launcher's job id (Open MPI's
// PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid, Slurm's job and step);
// ok is false when there is none.
func JobDir() (string, bool) {
	for _, k := range []string{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"} {
		if v := os.Getenv(k); v != "" {
			return filepath.Join(os.TempDir(), "dimmnet-fmpl-"+strconv.Itoa(os.Getuid())+"-"+sanitize(v)), true
		}
	}
	if j := os.Getenv("SLURM_JOB_ID"); j != "" {
		return filepath.Join(os.TempDir(), "dimmnet-fmpl-"+strconv.Itoa(os.Getuid())+"-"+sanitize(j+"."+os.Getenv("SLURM_STEP_ID"))), true
	}
	return "", false
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// Open embeds this rank's device on the chosen link and opens a driver on
// it (run to completion: the thread that waits runs the device).
func Open(o Options) (*Device, error) {
	if o.RegionSize == 0 {
		o.RegionSize = 64 << 20
	}
	if o.Payload == 0 {
		o.Payload = vdev.DefaultHubPayload
	}
	if o.Node == 0 {
		return nil, fmt.Errorf("ranks: node 0: node ids start at 1")
	}
	if o.LocalRanks > runtime.NumCPU() {
		for _, kv := range oversubscribedWait {
			if os.Getenv(kv[0]) == "" {
				os.Setenv(kv[0], kv[1]) // read by driver.Open below
			}
		}
		if os.Getenv("GOMAXPROCS") == "" {
			// One thread of Go code per rank, as an MPI rank has: the
			// device runs on the waiting thread anyway, and a second one
			// only competes with the other ranks (tree collectives at p=4
			// on 2 cores: 0.54 ms to 0.17-0.4 ms).
			runtime.GOMAXPROCS(1)
		}
	}
	dev, err := openDevice(o)
	if err != nil {
		return nil, err
	}
	// Bound after the driver judged the CPUs it may use: a bound rank's
	// peers have cores of their own, so its one CPU is not the one-core
	// host whose driver yields its core at every look. A binding the
	// kernel refuses leaves the rank unbound: it only guards against a
	// slow placement, and the rank works without it.
	if o.Bind {
		dev.bound, _ = cpubind.Bind(o.LocalRank, o.LocalRanks)
	}
	return dev, nil
}

// openDevice is Open without the rank's CPU binding.
func openDevice(o Options) (*Device, error) {
	if o.Key == "" {
		o.Key = os.Getenv("DIMMNET_KEY")
	}
	o.Check = o.Check || os.Getenv("DIMMNET_CHECK") == "1"
	var key *auth.Key
	if o.Key != "" {
		k, err := auth.LoadKey(o.Key)
		if err != nil {
			return nil, fmt.Errorf("ranks: %w", err)
		}
		key = &k
	}
	cfg := vdev.Config{RegionSize: o.RegionSize, Check: o.Check}
	var l *vdev.Local
	var udp link.Port
	var err error
	jobDir := ""
	if o.Link == "" {
		o.Link = os.Getenv("DIMMNET_LINK")
	}
	switch o.Link {
	case "", "shm":
		if o.Dir == "" {
			var ok bool
			if o.Dir, ok = JobDir(); !ok {
				return nil, ErrNoJob
			}
			jobDir = o.Dir
		}
		l, err = vdev.NewLocalPorts(cfg, []uint16{o.Node}, func(d *vdev.Device) (link.Port, error) {
			p, err := link.ListenShm(o.Dir, d.Node(), o.Payload+wire.FrameOverhead)
			if err != nil {
				return nil, err
			}
			return auth.Keyed(p, key)
		})
	case "udp":
		l, udp, err = openUDP(cfg, o, key)
	case "afpacket":
		l, err = openAFPacket(cfg, &o, key)
	default:
		return nil, fmt.Errorf("ranks: link %q: want shm, udp or afpacket", o.Link)
	}
	if err != nil {
		return nil, fmt.Errorf("ranks: node %d on %s: %w", o.Node, o.Link, err)
	}
	d, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("ranks: node %d: %w", o.Node, err)
	}
	return &Device{Driver: d, local: l, jobDir: jobDir, node: o.Node, check: o.Check, udp: udp}, nil
}

// ErrNotAdmitter reports Admit on a device whose link learns no peers at
// run time (shm meets every process of its directory; afpacket reaches
// every node on its segment; a peers file is fixed).
var ErrNotAdmitter = errors.New("ranks: this device's link takes no peers at run time")

// Admit accepts the device on node at addr (host:port) on a udp device
// opened with UDPLocal.
func (d *Device) Admit(node uint16, addr string) error {
	a, ok := d.udp.(link.Admitter)
	if !ok {
		return ErrNotAdmitter
	}
	return a.Admit(wire.NodeMAC(node), addr)
}

func openUDP(cfg vdev.Config, o Options, key *auth.Key) (*vdev.Local, link.Port, error) {
	var local string
	peers := map[string]string{}
	if o.Peers == "" && o.UDPLocal != "" {
		local = o.UDPLocal
	} else {
		f, err := os.Open(o.Peers)
		if err != nil {
			return nil, nil, fmt.Errorf("peers file: %w", err)
		}
		peers, err = link.ParsePeers(f)
		f.Close()
		if err != nil {
			return nil, nil, err
		}
		me := wire.NodeMAC(o.Node).String()
		var ok bool
		local, ok = peers[me]
		if !ok {
			return nil, nil, fmt.Errorf("peers file %s has no line for node %d", o.Peers, o.Node)
		}
		delete(peers, me)
	}
	mtu := min(o.Payload, 65507-wire.FrameOverhead) + wire.FrameOverhead
	var port link.Port
	l, err := vdev.NewLocalPorts(cfg, []uint16{o.Node}, func(d *vdev.Device) (link.Port, error) {
		p, err := link.ListenUDP(local, d.MAC(), peers, mtu)
		if err != nil {
			return nil, err
		}
		port = p
		if l, ok := p.(link.Learner); ok && o.Learn {
			l.Learn(true)
		}
		return auth.Keyed(p, key)
	})
	return l, port, err
}

// Nodes are the node ids of a job's n ranks, rank r on node r+1 (node 0
// is left to a daemon's devices): what a peers file for the job lists.
func Nodes(n int) []uint16 {
	ns := make([]uint16, n)
	for r := range ns {
		ns[r] = uint16(r + 1)
	}
	return ns
}
