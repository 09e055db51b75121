// Package switched is an in-memory medium of switches: devices hang off
// the switches of a fabric.Topology, and a frame crosses the switches its
// routing gives, each adding a per-hop delay, holding each link and
// virtual channel one frame at a time. It exists so that the visiting
// orders of the RHiNET-2 multicast paper run on real devices over a
// fabric whose shape matters, where link.Hub delivers every frame in one
// step from anywhere.
//
// Timing is reserved when a frame is sent: walking its path, each (link,
// VC) is taken at the later of the frame's head arriving and the channel
// freeing, for the frame's serialization time; the frame becomes visible
// to its receiver when its tail arrives. Reserving in send order rather
// than arbitrating at each switch is the approximation: frames are
// delayed by the ones sent before them over a shared channel, never by
// later ones.
package switched

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/vdev/fabric"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// ErrHost is returned when attaching to a host the topology lacks or that
// is taken.
var ErrHost = errors.New("switched: no such free host")

// Config is the medium's timing and capacity.
type Config struct {
	// MTU is the largest frame carried.
	MTU int
	// Depth is how many frames wait per port before senders see ErrFull.
	Depth int
	// HopDelay is what each switch adds to a frame's head (ns).
	HopDelay int64
	// Gbps is the link rate a frame's bytes are serialized at.
	Gbps float64
}

// PaperConfig is RHiNET-2's timing: 350 ns per switch (the paper's Fig.
// 6) and 6 Gbps links.
func PaperConfig(mtu int) Config {
	return Config{MTU: mtu, Depth: 256, HopDelay: 350, Gbps: 6}
}

// Fabric is the medium: one per topology, shared by all its ports.
type Fabric struct {
	cfg   Config
	topo  *fabric.Topology
	route *fabric.Routing
	mu    sync.Mutex
	// free[channel][vc]: when the channel next takes a frame (ns). Channels:
	// the topology's inter-switch ones, then each host's injection, then
	// each host's ejection link.
	free  [][]int64
	ports map[[6]byte]*port
	hosts []*port
	seq   uint64
	inter int // inter-switch channels
	stats Stats
	// bufs is one free list for all ports: a frame is taken from the
	// sender's port and released to the receiver's, so per-port lists
	// would drain on one side and overflow on the other.
	bufMu sync.Mutex
	bufs  [][]byte
}

// New builds the medium for topology t routed by r.
func New(t *fabric.Topology, r *fabric.Routing, cfg Config) *Fabric {
	n := t.Hosts()
	nc := len(t.Channels()) + 2*n
	f := &Fabric{cfg: cfg, topo: t, route: r, free: make([][]int64, nc), ports: map[[6]byte]*port{}, hosts: make([]*port, n), inter: len(t.Channels())}
	for i := range f.free {
		f.free[i] = make([]int64, max(r.VCs, 1))
	}
	return f
}

// Stats counts what the fabric carried since it was built or last reset:
// the figures the RHiNET-2 paper's Fig. 5 states its finding in.
type Stats struct {
	// Frames is the unicast frames routed.
	Frames uint64
	// Contended is the frames that found an inter-switch channel (on
	// their VC) still taken by an earlier frame when their head reached it.
	Contended uint64
	// MaxHops is the most inter-switch channels one frame crossed.
	MaxHops int
}

// Stats reports the counts since the last ResetStats.
func (f *Fabric) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// ResetStats zeroes the counts, so one visiting order's run is read alone.
func (f *Fabric) ResetStats() {
	f.mu.Lock()
	f.stats = Stats{}
	f.mu.Unlock()
}

// Topology is the fabric's topology.
func (f *Fabric) Topology() *fabric.Topology { return f.topo }

// Routing is the fabric's routing.
func (f *Fabric) Routing() *fabric.Routing { return f.route }

// Switches is how many switches a frame from host a to host b crosses:
// what a collective library reads to order its visits.
func (f *Fabric) Switches(a, b int) int { return f.route.Switches(a, b) }

// Attach adds a port for the device with the given MAC on host position
// host (which switch it hangs off follows from the topology).
func (f *Fabric) Attach(mac net.HardwareAddr, host int) (link.Port, error) {
	var k [6]byte
	copy(k[:], mac)
	f.mu.Lock()
	defer f.mu.Unlock()
	if host < 0 || host >= len(f.hosts) || f.hosts[host] != nil {
		return nil, fmt.Errorf("%w: host %d of %d", ErrHost, host, len(f.hosts))
	}
	if _, dup := f.ports[k]; dup {
		return nil, fmt.Errorf("switched: MAC %s already attached", mac)
	}
	p := &port{f: f, mac: append(net.HardwareAddr(nil), mac...), host: host}
	f.ports[k] = p
	f.hosts[host] = p
	return p, nil
}

type pending struct {
	frame []byte
	due   int64
	seq   uint64
}

type port struct {
	f      *Fabric
	mac    net.HardwareAddr
	host   int
	mu     sync.Mutex
	q      []pending // min-heap by (due, seq)
	notify func()
	closed bool
	queued atomic.Int32
}

func (p *port) MTU() int              { return p.f.cfg.MTU }
func (p *port) MAC() net.HardwareAddr { return p.mac }
func (p *port) SetNotify(fn func())   { p.mu.Lock(); p.notify = fn; p.mu.Unlock() }

// Lossless: the medium refuses (ErrFull) rather than drops.
func (p *port) Lossless() bool { return true }

// KnowsPeer reports whether a port with mac hangs off the fabric: a frame
// can only come from one, so no station is a stranger.
func (p *port) KnowsPeer(mac [6]byte) bool {
	p.f.mu.Lock()
	defer p.f.mu.Unlock()
	return p.f.ports[mac] != nil
}

// Vouches is true: see KnowsPeer.
func (p *port) Vouches() bool { return true }

// Pending is true while any frame travels toward this port, due or not,
// so the device keeps polling instead of sleeping through a hop delay.
func (p *port) Pending() bool { return p.queued.Load() > 0 }

// Buffer reuses a released frame when there is one: steady traffic
// allocates nothing.
func (p *port) Buffer() []byte {
	f := p.f
	f.bufMu.Lock()
	defer f.bufMu.Unlock()
	if n := len(f.bufs); n > 0 {
		b := f.bufs[n-1]
		f.bufs = f.bufs[:n-1]
		return b[:0]
	}
	return make([]byte, 0, f.cfg.MTU)
}

func (p *port) Release(b []byte) {
	f := p.f
	if cap(b) != f.cfg.MTU {
		return
	}
	f.bufMu.Lock()
	if len(f.bufs) < 4*f.cfg.Depth {
		f.bufs = append(f.bufs, b)
	}
	f.bufMu.Unlock()
}

// reserve walks a frame of n bytes from host a to host b, sent at now,
// through the fabric and returns when its tail reaches b.
func (f *Fabric) reserve(a, b, n int, now int64) int64 {
	ser := int64(float64(n*8) / f.cfg.Gbps)
	inter := f.inter
	hosts := len(f.hosts)
	path := f.route.Path(f.topo.HostSwitch[a], b)
	t := now
	take := func(ch, vc int) int64 {
		start := max(t, f.free[ch][vc])
		f.free[ch][vc] = start + ser
		return start
	}
	vc0 := 0
	if len(path) > 0 {
		vc0 = path[0].VC
	}
	t = take(inter+a, vc0) + f.cfg.HopDelay
	f.stats.Frames++
	f.stats.MaxHops = max(f.stats.MaxHops, len(path))
	waited := false
	for _, h := range path {
		waited = waited || f.free[h.Channel][h.VC] > t
		t = take(h.Channel, h.VC) + f.cfg.HopDelay
	}
	if waited {
		f.stats.Contended++
	}
	return take(inter+hosts+b, 0) + ser
}

func (p *port) Send(fr []byte) error {
	if len(fr) < 14 {
		return errors.New("switched: runt frame")
	}
	var k [6]byte
	copy(k[:], fr[:6])
	f := p.f
	f.mu.Lock()
	if k == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff} {
		var dsts []*port
		for _, q := range f.ports {
			if q != p {
				dsts = append(dsts, q)
			}
		}
		f.mu.Unlock()
		var err error
		for _, q := range dsts {
			if e := q.enqueue(append(q.Buffer(), fr...), 0, 0); e != nil {
				err = e
			}
		}
		p.Release(fr)
		return err
	}
	q := f.ports[k]
	if q == nil {
		f.mu.Unlock()
		return link.ErrNoRoute
	}
	q.mu.Lock()
	full := len(q.q) >= f.cfg.Depth
	q.mu.Unlock()
	if full {
		f.mu.Unlock()
		return link.ErrFull
	}
	due := f.reserve(p.host, q.host, len(fr), monotime.Now())
	f.seq++
	seq := f.seq
	f.mu.Unlock()
	return q.enqueue(fr, due, seq)
}

func (p *port) enqueue(fr []byte, due int64, seq uint64) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return link.ErrClosed
	}
	p.q = append(p.q, pending{fr, due, seq})
	for i := len(p.q) - 1; i > 0; {
		j := (i - 1) / 2
		if !less(p.q[i], p.q[j]) {
			break
		}
		p.q[i], p.q[j] = p.q[j], p.q[i]
		i = j
	}
	p.queued.Add(1)
	fn := p.notify
	p.mu.Unlock()
	if fn != nil {
		fn()
	}
	return nil
}

func less(a, b pending) bool { return a.due < b.due || (a.due == b.due && a.seq < b.seq) }

// Recv returns the next frame whose tail has arrived.
func (p *port) Recv() []byte {
	if p.queued.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.q) == 0 || p.q[0].due > monotime.Now() {
		return nil
	}
	fr := p.q[0].frame
	last := len(p.q) - 1
	p.q[0] = p.q[last]
	p.q[last] = pending{}
	p.q = p.q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(p.q) && less(p.q[l], p.q[m]) {
			m = l
		}
		if r < len(p.q) && less(p.q[r], p.q[m]) {
			m = r
		}
		if m == i {
			break
		}
		p.q[i], p.q[m] = p.q[m], p.q[i]
		i = m
	}
	p.queued.Add(-1)
	return fr
}

func (p *port) Close() error {
	var k [6]byte
	copy(k[:], p.mac)
	p.f.mu.Lock()
	delete(p.f.ports, k)
	p.f.hosts[p.host] = nil
	p.f.mu.Unlock()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	return nil
}
