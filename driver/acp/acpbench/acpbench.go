// Package acpbench measures the ACP layer (driver/acp) between rank
// processes beside Open MPI's OpenSHMEM and MPI one-sided (osc pt2pt) in
// the same run, for `dimmnet acp-bench`. Each figure is the median of
// per-operation times of rank 0 acting on rank 1 (rank 2 is the third
// party's destination); the table holds each ratio against the peers.
package acpbench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/acp"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/vdev"
)

// Record is one measured operation.
type Record struct {
	Operation string `json:"operation"`
	// Path is how it was done: "device" (our PUSH or PULL), "delegated"
	// (our delegation to another rank's delegate station), "oshmem" or
	// "mpi-osc-pt2pt".
	Path string `json:"path"`
	// Medium is "shm" (our shared-memory link, or the peers' shared
	// memory), "udp" or "afpacket" (ours) or "tcp" (the peers').
	Medium string  `json:"medium"`
	US     float64 `json:"us"` // median
	Bytes  int     `json:"bytes"`
	MBps   float64 `json:"mbps"`
}

// Options choose the run.
type Options struct {
	// Link between our ranks' devices: "shm" (default), "udp" or
	// "afpacket" (ranks launched here run in a namespace with a bridge
	// and a veth per rank; needs root).
	Link string
	// Iters per 8-byte operation (default 20,000); the 1 MiB copy runs
	// Iters/50 + 5 times.
	Iters int
	// NoPeers skips Open MPI.
	NoPeers bool
	// Peers is the UDP peers file of a job started by a launcher.
	Peers string
	// Procs per rank: GOMAXPROCS of each rank process (default 1: the
	// caller and the communication goroutine take turns on one thread,
	// as three ranks share this host's cores).
	Procs int
}

func (o *Options) defaults() {
	if o.Link == "" {
		o.Link = "shm"
	}
	if o.Iters == 0 {
		o.Iters = 20000
	}
	if o.Procs == 0 {
		o.Procs = 1
	}
}

// ErrRankFailed reports a launched rank that failed (ranks.RunLocal's).
var ErrRankFailed = ranks.ErrRankFailed

const (
	envChild = "ACPBENCH_CHILD" // set in the ranks Run launches itself
	roleRank = "acp-bench-rank"
	nRanks   = 3
	big      = 1 << 20
	starter  = 4 << 20 // room for the 1 MiB source and destination
)

func init() { subproc.Register(roleRank, childRank) }

// Run measures ACP on three rank processes of this binary, then Open MPI
// beside it, and returns the records.
//
// Under a launcher (mpirun, srun) this process is one rank of the job
// instead, on the shared-memory link in the launcher's job directory (or
// UDP with Options.Peers); only rank 0 returns records, Open MPI is not
// run from inside a job, and with two ranks the third-party copy is left
// out.
func Run(o Options, log io.Writer) ([]Record, error) {
	o.defaults()
	if l, ok, err := ranks.FromEnv(); err != nil {
		return nil, err
	} else if ok && os.Getenv(envChild) == "" {
		return rankRun(o, l, "", o.Peers)
	}
	fmt.Fprintf(log, "acp-bench: %d ACP ranks on the %s link\n", nRanks, o.Link)
	recs, err := launch(o)
	if err != nil {
		return recs, err
	}
	if o.NoPeers {
		return recs, nil
	}
	fmt.Fprintf(log, "acp-bench: OpenSHMEM and MPI one-sided (osc pt2pt), shared memory, TCP and dimmnet (mtl ofi)\n")
	peers, err := RunPeers(o.Iters)
	if err != nil {
		fmt.Fprintf(log, "acp-bench: Open MPI peers incomplete: %v\n", err)
	}
	return append(recs, peers...), nil
}

func launch(o Options) ([]Record, error) {
	out, err := ranks.RunLocal(ranks.LocalJob{Role: roleRank, NP: nRanks, Link: o.Link, NSPrefix: "dimmnet-acpbench-", ChildEnv: envChild, Stderr: os.Stderr,
		Args: func(shm, peers string) []string {
			return []string{shm, peers, o.Link, strconv.Itoa(o.Iters), strconv.Itoa(o.Procs)}
		}})
	if err != nil {
		return nil, err
	}
	return subproc.Records[Record](out)
}

func childRank(args []string) error {
	if len(args) != 5 {
		return fmt.Errorf("acp-bench rank: want 5 arguments, got %q", args)
	}
	l, ok, err := ranks.FromEnv()
	if err != nil || !ok {
		return fmt.Errorf("acp-bench rank: launch environment: ok %v: %v", ok, err)
	}
	o := Options{Link: args[2]}
	o.Iters, _ = strconv.Atoi(args[3])
	o.Procs, _ = strconv.Atoi(args[4])
	o.defaults()
	recs, err := rankRun(o, l, args[0], args[1])
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range recs {
		enc.Encode(r)
	}
	return nil
}

// rankRun is one rank: its device, ACP, and on rank 0 the measurements.
func rankRun(o Options, l ranks.Launch, dir, peers string) ([]Record, error) {
	runtime.GOMAXPROCS(o.Procs)
	dev, err := ranks.Open(ranks.Options{Link: o.Link, Dir: dir, Peers: peers, Node: uint16(l.Rank + 1), RegionSize: 32 << 20, LocalRanks: l.LocalSize, LocalRank: l.LocalRank, Bind: true})
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	c, err := acp.Init(dev.Driver, acp.Options{Rank: l.Rank, Procs: l.Size, StarterSize: starter})
	if err != nil {
		return nil, err
	}
	var recs []Record
	if l.Rank == 0 {
		recs, err = measure(c, o)
	}
	if e := c.Sync(); err == nil {
		err = e
	}
	if e := c.Finalize(); err == nil {
		err = e
	}
	if err != nil {
		return nil, fmt.Errorf("acp-bench rank %d: %w", l.Rank, err)
	}
	return recs, nil
}

// measure is rank 0's part: each operation on rank 1 (and rank 2).
func measure(c *acp.ACP, o Options) ([]Record, error) {
	me := c.StarterGA(0)
	r1, r2 := c.StarterGA(1), c.StarterGA(2)
	var recs []Record
	type op struct {
		name, path string
		bytes      int
		iters      int
		run        func(i int) (acp.Handle, error)
	}
	ops := []op{
		{"copy-out-8", "device", 8, o.Iters, func(int) (acp.Handle, error) { return c.Copy(r1+64, me, 8, acp.HandleNull) }},
		{"copy-in-8", "device", 8, o.Iters, func(int) (acp.Handle, error) { return c.Copy(me+64, r1, 8, acp.HandleNull) }},
		{"third-party-copy-8", "delegated", 8, o.Iters, func(int) (acp.Handle, error) { return c.Copy(r2+64, r1, 8, acp.HandleNull) }},
		{"fetch-add-8", "delegated", 8, o.Iters, func(int) (acp.Handle, error) { return c.Add8(me+128, r1+128, 1, acp.HandleNull) }},
		{"cas-8", "delegated", 8, o.Iters, func(i int) (acp.Handle, error) {
			return c.CAS8(me+136, r1+136, uint64(i), uint64(i+1), acp.HandleNull)
		}},
		{"fetch-add-8", "device", 8, o.Iters, func(int) (acp.Handle, error) { return c.Add8(me+128, r1+128, 1, acp.HandleNull) }},
		{"cas-8", "device", 8, o.Iters, func(i int) (acp.Handle, error) {
			return c.CAS8(me+144, r1+144, uint64(i), uint64(i+1), acp.HandleNull)
		}},
		{"copy-out-1M", "device", big, o.Iters/50 + 5, func(int) (acp.Handle, error) { return c.Copy(r1+big, me+big, big, acp.HandleNull) }},
		{"copy-in-1M", "device", big, o.Iters/50 + 5, func(int) (acp.Handle, error) { return c.Copy(me+2*big, r1+big, big, acp.HandleNull) }},
	}
	if c.Procs() < 3 {
		ops = slices.DeleteFunc(ops, func(p op) bool { return p.name == "third-party-copy-8" })
	}
	times := make([]int64, o.Iters)
	for _, p := range ops {
		// Add8 and CAS8 into our own memory go by the device's FADD8 and
		// CAS8 on the "device" path, by delegation otherwise.
		c.SetDeviceAtomics(p.path == "device")
		for pass := range 2 { // the first pass warms up
			for i := range p.iters {
				t := monotime.Now()
				h, err := p.run(pass*p.iters + i)
				if err == nil {
					err = c.Complete(h)
				}
				if err != nil {
					return recs, fmt.Errorf("%s: %w", p.name, err)
				}
				times[i] = monotime.Now() - t
			}
		}
		ts := slices.Clone(times[:p.iters])
		slices.Sort(ts)
		us := float64(ts[len(ts)/2]) / 1e3
		recs = append(recs, Record{Operation: p.name, Path: p.path, Medium: o.Link, US: us, Bytes: p.bytes, MBps: float64(p.bytes) / us})
	}
	return recs, nil
}

// LocalDevices opens p drivers on p devices in this process joined by one
// in-memory link (node ids 1..p): the devices acp-tables runs its
// receive-area skeletons on (an acptables.Devices).
func LocalDevices(p int) ([]*driver.Driver, func(), error) {
	nodes := make([]uint16, p)
	for i := range nodes {
		nodes[i] = uint16(i + 1)
	}
	l, err := vdev.NewLocal(vdev.Config{RegionSize: 1 << 20}, 4096, nodes...)
	if err != nil {
		return nil, nil, fmt.Errorf("acp-tables devices: %w", err)
	}
	ds := make([]*driver.Driver, 0, p)
	closeAll := func() {
		for _, d := range ds {
			d.Close()
		}
		l.Close()
	}
	for _, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("acp-tables devices: %w", err)
		}
		ds = append(ds, d)
	}
	return ds, closeAll, nil
}
