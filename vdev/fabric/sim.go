package fabric

import (
	"container/heap"
	"errors"
	"fmt"
)

// ErrBadList is returned for a visiting list that is not a permutation of
// the topology's hosts.
var ErrBadList = errors.New("fabric: visiting list is not a permutation of the hosts")

// Picoseconds: the simulator's integer clock, so runs are exact and a
// periodic steady state can be recognised.
const (
	Nanosecond  int64 = 1000
	Microsecond int64 = 1000 * Nanosecond
)

// Params are the timing parameters of one simulated run. Network figures
// come from the paper's section 3; HostCost is the one parameter fitted per
// packet size.
type Params struct {
	// Flits per packet: 17 for a barrier packet sent by PIO (5 header and
	// tail, 1 data, 11 padding), 69 for 512 bytes by remote DMA.
	Flits int
	// FlitBytes is 8 on RHiNET-2.
	FlitBytes int
	// LinkGbps is 6: the links run at 600 MHz, not their nominal 800.
	LinkGbps float64
	// HopDelay is what one switch adds to a packet's head (routing, switch
	// and cable); 350 ns from Fig. 6.
	HopDelay int64
	// HostCost is the host time one message costs, send and receive
	// together (PIO or DMA set-up, PCI, polling): fitted.
	HostCost int64
	// SendShare is the part of HostCost the sender's CPU spends before the
	// packet leaves; the rest is the receiver's. The paper gives no split.
	SendShare float64
	// Switch is how switches and NIs queue and forward packets; the zero
	// value is the output-queued switch.
	Switch Switch
}

// PaperParams are the paper's network parameters for a packet of flits
// flits with host cost hostCost.
func PaperParams(flits int, hostCost int64) Params {
	return Params{Flits: flits, FlitBytes: 8, LinkGbps: 6, HopDelay: 350 * Nanosecond, HostCost: hostCost, SendShare: 0.5}
}

// Serialization is the time a packet occupies one link.
func (p Params) Serialization() int64 {
	bits := float64(p.Flits * p.FlitBytes * 8)
	return int64(bits / p.LinkGbps * 1000) // Gbps -> bits per ns; ps
}

// Result is what a simulated run measured.
type Result struct {
	// Mean is the mean time per operation (ps).
	Mean int64
	// Simulated is how many operations the event loop ran; the rest of the
	// requested count was extrapolated from an exactly periodic steady
	// state.
	Simulated int
	// Period is the steady state's period in operations (0: none found).
	Period int
	// MaxQueueBytes is the most any (channel, VC) buffer held: below the
	// 4 KB per VC of RHiNET-2/SW, Go & Stop never stops a packet, which is
	// why the model has no flow-control stalls.
	MaxQueueBytes int
	// Packets counts packets delivered by the event loop.
	Packets int
	// Contended counts packets whose head found the inter-switch channel
	// it needed already carrying or queueing another packet: the paper's
	// "contention", which SHIO under e-cube routing avoids (Fig. 5).
	Contended int
}

const (
	kindGather = iota
	kindRelease
)

type packet struct {
	src, dst int // hosts
	kind     int
	barrier  int
	path     []Hop
	hop      int // next index into path; len(path): the ejection channel
	vc       int // VC on the channel the packet is queued for or on
	in       int // input-queued switches: the channel its head last took
	// upEnd is when its tail left the last channel it started on: cut
	// through, a packet cannot leave a channel sooner than HopDelay after
	// its tail arrived, whatever the channel's speed.
	upEnd int64
	last  *xfer // flit-interleaved links: its latest transmission
}

type chanState struct {
	busy   bool
	ps     psState     // flit-interleaved links: the packets sharing the link
	queues [][]*packet // per VC
	rr     int
}

type task struct {
	send bool
	p    *packet
}

type hostState struct {
	pos      int
	cpuBusy  bool
	tasks    []task
	barrier  int
	phase    int // 0 gathering, 1 waiting for release, 2 releasing
	gathered [4]int
	sendsDue int // release sends still queued for the current barrier
}

const (
	evCPU = iota
	evFree
	evHead
	evDeliver
	evShare // flit-interleaved links: a transmission on a shared link sent its last flit
	evTail  // flit-interleaved links: a transmission's tail left, its upstream's having arrived
)

type event struct {
	t    int64
	seq  uint64
	kind int
	id   int
	from int // evFree on input-queued switches: the input FIFO (port x VCs + VC) it drained, else -1
	p    *packet
	x    *xfer  // evShare, evTail: the transmission
	ver  uint64 // evShare: the link's sharing state it was computed for
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	return q[i].t < q[j].t || (q[i].t == q[j].t && q[i].seq < q[j].seq)
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type sim struct {
	r        *Routing
	tree     Tree
	topo     *Topology
	par      Params
	ser      int64
	sendCost int64
	recvCost int64
	list     []int // position -> host
	pos      []int // host -> position
	now      int64
	seq      uint64
	q        eventQueue
	chans    []chanState
	inter    int // inter-switch channel count
	hosts    []hostState
	res      Result
	maxQ     int

	// Input-queued switches (Switch.InputFIFO): FIFOs per input port
	// (channel id of the inter-switch channel or injection link) and VC,
	// whether each FIFO's head is being sent, whether each port's
	// crossbar input is in use, and per switch its inputs and outputs.
	vcs      int
	inQ      [][]*packet
	inBusy   []bool
	readBusy []bool
	swIn     [][]int
	swOut    [][]int
	outRR    []int

	target int // barriers to run
	done   [][]int64
	count  []int
	period int
	end    int64
	stop   bool
}

func newSim(r *Routing, list []int, par Params) (*sim, error) {
	t := r.Topology()
	n := t.Hosts()
	if len(list) != n {
		return nil, fmt.Errorf("%w: %d positions for %d hosts", ErrBadList, len(list), n)
	}
	s := &sim{r: r, topo: t, par: par, ser: par.Serialization(), list: list, pos: make([]int, n)}
	seen := make([]bool, n)
	for i, h := range list {
		if h < 0 || h >= n || seen[h] {
			return nil, fmt.Errorf("%w: host %d at position %d", ErrBadList, h, i)
		}
		seen[h] = true
		s.pos[h] = i
	}
	s.sendCost = int64(float64(par.HostCost) * par.SendShare)
	s.recvCost = par.HostCost - s.sendCost
	s.inter = 2 * len(t.Links)
	vcs := max(r.VCs, 1)
	s.chans = make([]chanState, s.inter+2*n)
	for i := range s.chans {
		s.chans[i].queues = make([][]*packet, vcs)
	}
	s.hosts = make([]hostState, n)
	for h := range s.hosts {
		s.hosts[h].pos = s.pos[h]
	}
	if par.Switch.OneReadPort && !par.Switch.InputFIFO {
		return nil, fmt.Errorf("fabric: switch %+v: one read port per input needs input FIFOs", par.Switch)
	}
	s.vcs = vcs
	if par.Switch.InputFIFO {
		s.setupInputs()
	}
	return s, nil
}

func (s *sim) at(t int64, kind, id int, p *packet) {
	s.seq++
	heap.Push(&s.q, event{t: t, seq: s.seq, kind: kind, id: id, from: -1, p: p})
}

// network handles the events of the fabric: a channel freeing and a
// packet's head reaching a switch.
func (s *sim) network(e event) {
	switch e.kind {
	case evFree:
		s.chans[e.id].busy = false
		if e.from >= 0 {
			s.leave(e.from)
		}
		s.freed(e.id)
	case evHead:
		if s.par.Switch.InputFIFO {
			s.arrive(e.p)
		} else {
			s.forward(e.p)
		}
	case evShare:
		s.shareDone(e.id, e.ver)
	case evTail:
		s.tailDone(e.x)
	}
}

// free tells whether channel ch can start a packet on VC vc now.
func (s *sim) free(ch, vc int) bool {
	if s.shared(ch) {
		h := s.chans[ch].ps.held
		return h == nil || !h[vc]
	}
	if !s.par.Switch.WholePackets {
		return s.chans[ch].ps.nheld == 0
	}
	return !s.chans[ch].busy
}

// freed arbitrates what waits for channel ch now that it freed.
func (s *sim) freed(ch int) {
	switch {
	case !s.par.Switch.InputFIFO || (ch >= s.inter && ch < s.inter+len(s.hosts)):
		s.arbitrate(ch) // an output queue, or a host's NI
	case ch >= s.inter:
		s.arbitrateSwitch(s.topo.HostSwitch[ch-s.inter-len(s.hosts)])
	default:
		s.arbitrateSwitch(s.topo.Channels()[ch].From)
	}
}

// run drains the event queue until it empties or the run stops.
func (s *sim) run() {
	for s.q.Len() > 0 && !s.stop {
		e := heap.Pop(&s.q).(event)
		s.now = e.t
		switch e.kind {
		case evCPU:
			s.cpuDone(e.id)
		case evFree, evHead, evShare, evTail:
			s.network(e)
		case evDeliver:
			s.res.Packets++
			s.enqueueTask(e.p.dst, task{p: e.p})
		}
	}
}

func (s *sim) inject(ch int) int { return s.inter + ch }
func (s *sim) eject(h int) int   { return s.inter + len(s.hosts) + h }

// forward queues a packet whose head reached a switch on its next channel.
func (s *sim) forward(p *packet) {
	var ch int
	ch, p.vc = s.nextHop(p)
	s.queue(ch, p)
}

func (s *sim) queue(ch int, p *packet) {
	c := &s.chans[ch]
	if ch < s.inter && s.inUse(ch) {
		s.res.Contended++
	}
	c.queues[p.vc] = append(c.queues[p.vc], p)
	if b := len(c.queues[p.vc]) * s.par.Flits * s.par.FlitBytes; b > s.maxQ {
		s.maxQ = b
	}
	s.arbitrate(ch)
}

// inUse tells whether inter-switch channel ch carries a packet or has
// packets waiting for it (in its output queues or, on input-queued
// switches, at the head of its switch's input FIFOs).
func (s *sim) inUse(ch int) bool {
	c := &s.chans[ch]
	if c.busy || c.ps.nheld > 0 {
		return true
	}
	for _, q := range c.queues {
		if len(q) > 0 {
			return true
		}
	}
	if s.par.Switch.InputFIFO {
		for _, id := range s.swIn[s.topo.Channels()[ch].From] {
			if len(s.inQ[id]) > 0 {
				if next, _ := s.nextHop(s.inQ[id][0]); next == ch {
					return true
				}
			}
		}
	}
	return false
}

// arbitrate starts the next packet on a free channel, taking the VCs in
// round robin: virtual cut-through at packet granularity.
func (s *sim) arbitrate(ch int) {
	c := &s.chans[ch]
	nv := len(c.queues)
	for i := 0; i < nv; i++ {
		v := (c.rr + i) % nv
		if len(c.queues[v]) == 0 || !s.free(ch, v) {
			continue
		}
		p := c.queues[v][0]
		c.queues[v] = c.queues[v][1:]
		c.rr = (v + 1) % nv
		s.transmit(ch, p, -1)
		if !s.shared(ch) {
			return
		}
	}
}

// transmit sends packet p on the free channel ch from now; from is the input
// FIFO it drains on an input-queued switch (-1: none). The channel is held
// for the packet's serialization, or longer if its tail comes in slower;
// its head reaches the next switch HopDelay later.
func (s *sim) transmit(ch int, p *packet, from int) {
	if !s.par.Switch.WholePackets {
		s.transmitShared(ch, p, from)
		return
	}
	end := max(s.now+s.ser, p.upEnd+s.par.HopDelay)
	if ch >= s.inter && ch < s.inter+len(s.hosts) {
		end = s.now + s.injectHold() // the NI: nothing upstream
	}
	p.upEnd = end
	s.chans[ch].busy = true
	s.seq++
	heap.Push(&s.q, event{t: end, seq: s.seq, kind: evFree, id: ch, from: from})
	switch {
	case ch >= s.inter+len(s.hosts):
		s.at(end, evDeliver, 0, p) // the tail reaches the host
	case ch >= s.inter:
		p.in = ch
		s.at(s.now+s.par.HopDelay, evHead, 0, p)
	default:
		p.in = ch
		p.hop++
		s.at(s.now+s.par.HopDelay, evHead, 0, p)
	}
}

func (s *sim) enqueueTask(h int, t task) {
	hs := &s.hosts[h]
	hs.tasks = append(hs.tasks, t)
	if !hs.cpuBusy {
		s.startTask(h)
	}
}

func (s *sim) startTask(h int) {
	hs := &s.hosts[h]
	if len(hs.tasks) == 0 {
		return
	}
	hs.cpuBusy = true
	d := s.recvCost
	if hs.tasks[0].send {
		d = s.sendCost
	}
	s.at(s.now+d, evCPU, h, nil)
}

func (s *sim) cpuDone(h int) {
	hs := &s.hosts[h]
	t := hs.tasks[0]
	hs.tasks = hs.tasks[1:]
	// Still busy while the task's effects queue more work, so that work
	// starts once, below.
	if t.send {
		p := t.p
		src := s.topo.HostSwitch[p.src]
		p.path = s.r.Path(src, p.dst)
		p.vc = 0
		if len(p.path) > 0 {
			p.vc = p.path[0].VC
		}
		s.queue(s.inject(p.src), p)
		if p.kind == kindRelease {
			hs.sendsDue--
			if hs.sendsDue == 0 && hs.phase == 2 {
				s.finish(h)
			}
		}
	} else {
		s.receive(h, t.p)
	}
	hs.cpuBusy = false
	if !s.stop {
		s.startTask(h)
	}
}

func (s *sim) send(h, kind, barrier, toPos int) {
	s.enqueueTask(h, task{send: true, p: &packet{src: h, dst: s.list[toPos], kind: kind, barrier: barrier}})
}

// start begins barrier b on host h.
func (s *sim) start(h, b int) {
	hs := &s.hosts[h]
	hs.barrier, hs.phase = b, 0
	s.checkGathered(h)
}

func (s *sim) checkGathered(h int) {
	hs := &s.hosts[h]
	n := len(s.list)
	if hs.phase != 0 || hs.gathered[hs.barrier%4] < len(s.tree.Children(hs.pos, n)) {
		return
	}
	hs.gathered[hs.barrier%4] = 0
	if hs.pos == 0 {
		s.release(h)
		return
	}
	hs.phase = 1
	s.send(h, kindGather, hs.barrier, s.tree.Parent(hs.pos))
}

func (s *sim) release(h int) {
	hs := &s.hosts[h]
	hs.phase = 2
	ch := s.tree.Children(hs.pos, len(s.list))
	hs.sendsDue = len(ch)
	if len(ch) == 0 {
		s.finish(h)
		return
	}
	for _, c := range ch {
		s.send(h, kindRelease, hs.barrier, c)
	}
}

func (s *sim) receive(h int, p *packet) {
	hs := &s.hosts[h]
	if p.kind == kindGather {
		hs.gathered[p.barrier%4]++
		if p.barrier == hs.barrier {
			s.checkGathered(h)
		}
		return
	}
	if p.barrier != hs.barrier || hs.phase != 1 {
		panic(fmt.Sprintf("fabric: host %d got release %d in barrier %d phase %d", h, p.barrier, hs.barrier, hs.phase))
	}
	s.release(h)
}

// extrapolate lets tests turn the steady-state shortcut off to check it.
var extrapolate = true

const window = 64 // barriers of completion times kept to find a period

// finish ends host h's barrier and starts its next one.
func (s *sim) finish(h int) {
	hs := &s.hosts[h]
	b := hs.barrier
	slot := b % window
	s.done[slot][h] = s.now
	s.count[slot]++
	if s.count[slot] == len(s.hosts) {
		s.count[slot] = 0
		s.allDone(b)
	}
	if b+1 < s.target && !s.stop {
		s.start(h, b+1)
	}
}

// allDone runs when every host finished barrier b: the run ends at the
// target, or early once every host's completion times repeat exactly with
// a period p for four periods, when the rest is extrapolated (the model is
// deterministic, so such a state repeats forever).
func (s *sim) allDone(b int) {
	s.res.Simulated = b + 1
	last := func(b int) int64 {
		var m int64
		for _, t := range s.done[b%window] {
			m = max(m, t)
		}
		return m
	}
	if b+1 == s.target {
		s.end = last(b)
		s.stop = true
		return
	}
	for p := 1; extrapolate && p <= 8 && 5*p <= b && 5*p < window; p++ {
		periodic := true
		for h := 0; h < len(s.hosts) && periodic; h++ {
			d := s.done[b%window][h] - s.done[(b-p)%window][h]
			for k := 1; k < 4; k++ {
				if s.done[(b-k*p)%window][h]-s.done[(b-(k+1)*p)%window][h] != d {
					periodic = false
					break
				}
			}
		}
		if !periodic {
			continue
		}
		idx := s.target - 1
		k := (idx - b + p - 1) / p
		base := idx - k*p
		var end int64
		for h := range s.hosts {
			d := s.done[b%window][h] - s.done[(b-p)%window][h]
			end = max(end, s.done[base%window][h]+int64(k)*d)
		}
		s.end, s.period, s.stop = end, p, true
		return
	}
}

// Barriers runs count barriers back to back over the visiting list, its
// gathers and releases following tree (each host starts its next barrier as soon as its part of the last one is
// done, as a measurement loop does) and returns the mean time per barrier.
func Barriers(r *Routing, tree Tree, list []int, par Params, count int) (Result, error) {
	if tree == nil {
		return Result{}, ErrNoTree
	}
	s, err := newSim(r, list, par)
	if err != nil {
		return Result{}, err
	}
	s.tree = tree
	if count < 1 {
		return Result{}, fmt.Errorf("fabric: %d barriers", count)
	}
	s.target = count
	s.done = make([][]int64, window)
	for i := range s.done {
		s.done[i] = make([]int64, len(s.hosts))
	}
	s.count = make([]int, window)
	for h := range s.hosts {
		s.start(h, 0)
	}
	s.run()
	if !s.stop {
		return Result{}, fmt.Errorf("fabric: barrier run on %s/%s stalled at %d of %d", s.topo.Name, r.Name, s.res.Simulated, count)
	}
	s.res.Mean = s.end / int64(count)
	s.res.Period = s.period
	s.res.MaxQueueBytes = s.maxQ
	return s.res, nil
}

// Multicast simulates one unicast-based multicast down tree from list[0]
// to the rest of the list (the release half of a barrier, ceil(log2(d+1)) steps) and
// returns when the last destination has taken its packet in. list may
// cover only some of the hosts.
func Multicast(r *Routing, tree Tree, list []int, par Params) (int64, error) {
	m, err := MulticastRun(r, tree, list, par)
	return m.Time, err
}

// MulticastResult is what one simulated multicast measured.
type MulticastResult struct {
	// Time is when the last destination took its packet in (ps).
	Time int64
	// Contended counts packets that found an inter-switch channel in use
	// (Result.Contended).
	Contended int
	// MaxHops is the most inter-switch channels any packet of the tree
	// crosses: at most 2 for SHIO on the 64-host mesh under e-cube.
	MaxHops int
}

// MulticastRun is Multicast with the contention and hop counts Fig. 5's
// finding is stated in.
func MulticastRun(r *Routing, tree Tree, list []int, par Params) (MulticastResult, error) {
	var res MulticastResult
	t0, err := multicast(r, tree, list, par, &res)
	res.Time = t0
	return res, err
}

func multicast(r *Routing, tree Tree, list []int, par Params, res *MulticastResult) (int64, error) {
	if tree == nil {
		return 0, ErrNoTree
	}
	t := r.Topology()
	full := append([]int(nil), list...)
	in := make([]bool, t.Hosts())
	for _, h := range list {
		if h < 0 || h >= t.Hosts() || in[h] {
			return 0, fmt.Errorf("%w: host %d", ErrBadList, h)
		}
		in[h] = true
	}
	for h := range in {
		if !in[h] {
			full = append(full, h)
		}
	}
	s, err := newSim(r, full, par)
	if err != nil {
		return 0, err
	}
	s.tree = tree
	n := len(list)
	var last int64
	got := 0
	s.target = 1
	// Drive the release tree by hand over the first n positions.
	sendAll := func(h int) {
		for _, c := range s.tree.Children(s.pos[h], n) {
			s.send(h, kindRelease, 0, c)
		}
	}
	for h := range s.hosts {
		s.hosts[h].phase = 1
	}
	s.hosts[list[0]].phase = 2
	sendAll(list[0])
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(event)
		s.now = e.t
		switch e.kind {
		case evCPU:
			hs := &s.hosts[e.id]
			tk := hs.tasks[0]
			if tk.send {
				hs.tasks = hs.tasks[1:]
				p := tk.p
				p.path = s.r.Path(s.topo.HostSwitch[p.src], p.dst)
				if len(p.path) > 0 {
					p.vc = p.path[0].VC
				}
				s.queue(s.inject(p.src), p)
			} else {
				hs.tasks = hs.tasks[1:]
				got++
				last = s.now
				sendAll(e.id)
			}
			hs.cpuBusy = false
			s.startTask(e.id)
		case evFree, evHead, evShare, evTail:
			s.network(e)
		case evDeliver:
			s.enqueueTask(e.p.dst, task{p: e.p})
		}
	}
	if got != n-1 {
		return 0, fmt.Errorf("fabric: multicast reached %d of %d destinations", got, n-1)
	}
	res.Contended = s.res.Contended
	for p := 1; p < n; p++ {
		from := list[tree.Parent(p)]
		res.MaxHops = max(res.MaxHops, len(r.Path(t.HostSwitch[from], list[p])))
	}
	return last, nil
}
