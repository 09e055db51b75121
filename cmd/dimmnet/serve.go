package main

import (
	"flag"

	"github.com/dimmnet/dimmnet/internal/rundir"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/daemon"
	"github.com/dimmnet/dimmnet/vdev/daemon/ivshmem"
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
	return daemon.Serve(daemon.Options{
		Dir:        *dir,
		Group:      *group,
		Nodes:      *nodes,
		Vectors:    *vectors,
		RegionMiB:  *regionMiB,
		Payload:    *payload,
		Keep:       *keep,
		ShmDir:     *shmDir,
		LogJSON:    *logJSON,
		LinkKind:   *linkKind,
		NodeBase:   *nodeBase,
		PeersFile:  *peersFile,
		Ifname:     *ifname,
		Bridge:     *bridge,
		FaultSpec:  *faultSpec,
		NsName:     *nsName,
		PcapFile:   *pcapFile,
		Statq:      *statq,
		RingFull:   *ringFull,
		Check:      *check,
		KeyFile:    *keyFile,
		PerUser:    *perUser,
		FabricSpec: *fabricSpec,
		RawIRQ:     *rawIRQ,
	})
}
