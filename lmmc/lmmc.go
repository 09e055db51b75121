package lmmc

import (
	"errors"
	"fmt"
	"github.com/dimmnet/dimmnet/driver/regfs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
)

// Errors callers test with errors.Is.
var (
	ErrNotMapped     = errors.New("lmmc: virtual link page not mapped")
	ErrDirection     = errors.New("lmmc: wrong direction for this page (write a send page, read a receive page)")
	ErrBadPort       = errors.New("lmmc: bad port")
	ErrUnknownPolicy = errors.New("lmmc: unknown replacement policy")
	ErrConfig        = errors.New("lmmc: bad configuration")
	ErrClosed        = errors.New("lmmc: node closed")
	ErrTimeout       = errors.New("lmmc: timed out waiting for the device")
	ErrDevice        = errors.New("lmmc: device reported an error")
	// ErrPairMismatch is the pair check failing: a sender and its receiver
	// disagree on which port a receive frame holds.
	ErrPairMismatch = errors.New("lmmc: send and receive frame tables disagree")
)

const waitTimeout = 10 * time.Second

// Config sets up a Node.
type Config struct {
	// Nodes lists every node of the cluster, in the same order on every
	// node: it fixes where each node's receive area lies.
	Nodes []uint16
	// FramesPerPeer is the number of receive link page frames each node
	// keeps for each connected node (and send frames mirroring them).
	FramesPerPeer int
	// Policy names the replacement policy ("fifo", "lru", "comm"; default "lru").
	Policy string
}

// Stats counts paging work on one node.
type Stats struct {
	Writes       uint64 // page-sized pieces written (remote writes posted)
	Faults       uint64 // writes that trapped (sender)
	PageRequests uint64 // remote paging requests sent (sender)
	Syncs        uint64 // signaled rewrites waited for before a paging request (sender)
	PagingsDone  uint64 // paging requests handled (receiver)
	PagesOut     uint64 // frames copied out to ordinary memory (receiver)
	PagesIn      uint64 // saved ports copied back into a frame (receiver)
	BadTag       uint64 // ERROR statuses with EBadTag (must stay 0)
	Errors       uint64 // other ERROR statuses
	// NotRung counts commands posted while the device's doorbell could
	// not be rung (driver.ErrNotRung): they ran at the device's next look
	// instead of at once, and the writes and pagings they belong to
	// succeeded. A count that grows says the attachment's doorbell is
	// broken, which slows every operation but fails none.
	NotRung uint64
}

// PagesCopied is the number of page copies the receiver made.
func (s Stats) PagesCopied() uint64 { return s.PagesOut + s.PagesIn }

// Node is the LMMC instance of one network interface.
type Node struct {
	d    *driver.Driver
	dmu  sync.Mutex // the driver is owned by one goroutine at a time
	lm   []byte
	ps   uint64
	self uint16

	// mu guards the tables. Readers (Read, translations) share it; the
	// paging steps that change entries take it alone, and a waiting
	// writer goes before readers that come after it, so the management
	// goroutine's page-in is not kept behind polling readers.
	mu        sync.RWMutex
	conns     map[uint16]*conn
	sendPorts map[uint16]*sendPort
	procs     []*Process
	ctr       counters

	wmu     sync.Mutex
	waiters map[uint64]chan uapi.Status
	cookie  atomic.Uint64

	stop    chan struct{}
	stopped chan struct{}
	closed  atomic.Bool
}

// counters are Stats, counted without the table lock.
type counters struct {
	writes, faults, pageRequests, syncs, pagingsDone, pagesOut, pagesIn, badTag, errors, notRung atomic.Uint64
}

// conn is this node's side of the connection with one other node.
type conn struct {
	peer      uint16
	stageBase uint32     // local frames staging our remote writes, one per send frame
	send      FrameTable // the peer's receive frames our data goes to (peer's numbering)
	recv      FrameTable // our receive frames for the peer's data
	recvPorts map[uint16]*recvPort
	polmu     sync.Mutex // the policy and its clock (taken last, after n.mu)
	policy    Policy
	clock     uint64
	pmu       sync.Mutex // one paging at a time per connection (sender)
}

// sendPort is a send port table entry plus the sender's copy of what the
// port holds (the sender is its only writer), used to fill the 8-byte words
// a write only partly covers.
type sendPort struct {
	PortEntry
	mu     sync.Mutex // held by every translation through the port and by paging
	shadow []byte
}

// recvPort is a receive port table entry plus its paged-out contents.
type recvPort struct {
	PortEntry
	saved []byte // contents while not resident (nil: never written)
}

// Process is an LMMC client with its own page table. Its methods may be
// called from one goroutine at a time; different processes run in parallel.
type Process struct {
	n    *Node
	name string
	pt   PageTable // guarded by n.mu
}

// Init is the paper's initialisation routine: it splits d's link memory
// into link page frames, allocates the receive area (FramesPerPeer frames
// per connected node), builds the tables and starts the link-memory
// management goroutine that takes paging requests off the status ring.
func Init(d *driver.Driver, cfg Config) (*Node, error) {
	if cfg.Policy == "" {
		cfg.Policy = "lru"
	}
	self := d.Node()
	idx := slices.Index(cfg.Nodes, self)
	if idx < 0 || cfg.FramesPerPeer <= 0 {
		return nil, fmt.Errorf("lmmc init node %d: node not in %v or %d frames: %w", self, cfg.Nodes, cfg.FramesPerPeer, ErrConfig)
	}
	F := uint32(cfg.FramesPerPeer)
	nn := uint32(len(cfg.Nodes))
	if need := 2 * nn * F; need > d.Frames() {
		return nil, fmt.Errorf("lmmc init node %d: %d frames needed, device has %d: %w", self, need, d.Frames(), ErrConfig)
	}
	n := &Node{d: d, lm: d.LinkMem(), ps: d.PageSize(), self: self, conns: map[uint16]*conn{},
		sendPorts: map[uint16]*sendPort{}, waiters: map[uint64]chan uapi.Status{},
		stop: make(chan struct{}), stopped: make(chan struct{})}
	for i, peer := range cfg.Nodes {
		if peer == self {
			continue
		}
		pol, err := NewPolicy(cfg.Policy)
		if err != nil {
			return nil, fmt.Errorf("lmmc init node %d: %w", self, err)
		}
		c := &conn{peer: peer, stageBase: nn*F + uint32(i)*F,
			send:      FrameTable{Base: uint32(idx) * F, Ports: make([]uint16, F)},
			recv:      FrameTable{Base: uint32(i) * F, Ports: make([]uint16, F)},
			recvPorts: map[uint16]*recvPort{}, policy: pol}
		for j := range F {
			if err := d.SetFrameTag(c.recv.Base+j, 0); err != nil {
				return nil, fmt.Errorf("lmmc init node %d: %w", self, err)
			}
		}
		n.conns[peer] = c
	}
	d.DiscardStatuses()
	go n.manage()
	return n, nil
}

// Close stops the management goroutine. The driver stays open.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	close(n.stop)
	// Wake the management goroutine out of its wait: a signaled NOP
	// completes at once with a DONE no waiter claims. If it cannot be
	// posted, the goroutine sees the stop when its wait times out.
	n.dmu.Lock()
	n.d.Post(&uapi.Desc{Opcode: uapi.OpNOP, Flags: uapi.FlagSignal})
	n.dmu.Unlock()
	<-n.stopped
	return nil
}

// Driver is the driver the node runs on.
func (n *Node) Driver() *driver.Driver { return n.d }

// PageSize is the size of a virtual link page and a link page frame.
func (n *Node) PageSize() uint64 { return n.ps }

// Stats returns the node's paging counts.
func (n *Node) Stats() Stats {
	c := &n.ctr
	return Stats{Writes: c.writes.Load(), Faults: c.faults.Load(), PageRequests: c.pageRequests.Load(),
		Syncs: c.syncs.Load(), PagingsDone: c.pagingsDone.Load(), PagesOut: c.pagesOut.Load(),
		PagesIn: c.pagesIn.Load(), BadTag: c.badTag.Load(), Errors: c.errors.Load(), NotRung: c.notRung.Load()}
}

// NewProcess creates an LMMC client with an empty page table.
func (n *Node) NewProcess(name string) *Process {
	p := &Process{n: n, name: name, pt: PageTable{}}
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	return p
}

// Name is the process's name.
func (p *Process) Name() string { return p.name }

// MapSend maps the virtual link page at va (page aligned) to send port
// port towards node peer. A send port belongs to one peer.
func (p *Process) MapSend(va uint64, peer, port uint16) error {
	n := p.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.checkMap(p, va, peer, port); err != nil {
		return err
	}
	sp := n.sendPorts[port]
	if sp == nil {
		sp = &sendPort{PortEntry: PortEntry{Port: port, Peer: peer}, shadow: make([]byte, n.ps)}
		n.sendPorts[port] = sp
	} else if sp.Peer != peer {
		return fmt.Errorf("map send port %d to node %d: it goes to node %d: %w", port, peer, sp.Peer, ErrBadPort)
	}
	vp := va / n.ps
	sp.Maps = append(sp.Maps, Mapping{p, vp})
	p.pt[vp] = PTE{Valid: sp.Resident, Send: true, Peer: peer, Port: port, Frame: sp.Frame}
	return nil
}

// MapRecv maps the virtual link page at va (page aligned) to receive port
// port, whose data comes from node peer.
func (p *Process) MapRecv(va uint64, peer, port uint16) error {
	n := p.n
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.checkMap(p, va, peer, port); err != nil {
		return err
	}
	rp := n.conns[peer].recvPort(port)
	vp := va / n.ps
	rp.Maps = append(rp.Maps, Mapping{p, vp})
	p.pt[vp] = PTE{Valid: rp.Resident, Peer: peer, Port: port, Frame: rp.Frame}
	return nil
}

func (n *Node) checkMap(p *Process, va uint64, peer, port uint16) error {
	if port == 0 {
		return fmt.Errorf("map port 0: %w", ErrBadPort)
	}
	if va%n.ps != 0 {
		return fmt.Errorf("map %#x: not page aligned: %w", va, ErrConfig)
	}
	if n.conns[peer] == nil {
		return fmt.Errorf("map port %d: node %d is not connected: %w", port, peer, ErrConfig)
	}
	if _, ok := p.pt[va/n.ps]; ok {
		return fmt.Errorf("map %#x: page already mapped: %w", va, ErrConfig)
	}
	return nil
}

func (c *conn) recvPort(port uint16) *recvPort {
	rp := c.recvPorts[port]
	if rp == nil {
		rp = &recvPort{PortEntry: PortEntry{Port: port, Peer: c.peer}}
		c.recvPorts[port] = rp
	}
	return rp
}

// Write is the paper's link-memory write routine: it translates va through
// p's page table and posts tagged remote writes of data into the connected
// node's receive frames, one per virtual link page touched. A write to a
// page whose port is not resident traps into remote paging first. Write
// returns once the writes are posted; the device delivers them in order.
func (p *Process) Write(va uint64, data []byte) error {
	for len(data) > 0 {
		off := va % p.n.ps
		k := min(uint64(len(data)), p.n.ps-off)
		if err := p.writePage(va/p.n.ps, off, data[:k]); err != nil {
			return fmt.Errorf("lmmc write %s at %#x: %w", p.name, va, err)
		}
		va += k
		data = data[k:]
	}
	return nil
}

// writePage writes within one virtual link page.
func (p *Process) writePage(vp, off uint64, data []byte) error {
	n := p.n
	for {
		n.mu.RLock()
		e, ok := p.pt[vp]
		if !ok || !e.Send {
			n.mu.RUnlock()
			if !ok {
				return fmt.Errorf("vpage %d: %w", vp, ErrNotMapped)
			}
			return fmt.Errorf("vpage %d: %w", vp, ErrDirection)
		}
		sp, c := n.sendPorts[e.Port], n.conns[e.Peer]
		n.mu.RUnlock()

		sp.mu.Lock() // excludes paging of this port from here to the post
		n.mu.RLock()
		e = p.pt[vp] // entries of sp change only under sp.mu: this one holds until the post
		n.mu.RUnlock()
		if e.Valid {
			slot := e.Frame - c.send.Base
			c.polmu.Lock()
			c.clock++
			c.policy.Access(e.Frame, e.Port, c.clock)
			c.polmu.Unlock()
			n.ctr.writes.Add(1)
			err := n.push(c, sp, slot, off, data)
			sp.mu.Unlock()
			return err
		}
		sp.mu.Unlock()
		if err := n.pageFault(c, sp); err != nil { // (1) trap
			return err
		}
	}
}

// push copies data into the port's shadow and the staging frame and posts
// the tagged remote write of the 8-byte words it covers. sp.mu is held.
func (n *Node) push(c *conn, sp *sendPort, slot uint32, off uint64, data []byte) error {
	copy(sp.shadow[off:], data)
	lo, hi := off&^7, min((off+uint64(len(data))+7)&^7, n.ps)
	stage := uint64(c.stageBase+slot) * n.ps
	copy(n.lm[stage+lo:stage+hi], sp.shadow[lo:hi])
	remote := uint64(c.send.Base+slot) * n.ps
	return n.post(func() (uint64, error) {
		i, err := n.d.PushTagged(c.peer, stage+lo, remote+lo, uint32(hi-lo), sp.Port, 0, uint64(sp.Port)<<32|uint64(c.send.Base+slot))
		return i, err
	})
}

// post runs one driver call under the driver lock, retrying while the
// command queue is full. A command whose doorbell could not be rung
// (driver.ErrNotRung) is posted: the device runs it at its next look, so
// it succeeds here, and is counted (Stats.NotRung). Taken for a failure,
// a write was reported failed that still landed, a paging request the
// receiver acted on left the sender's tables as before, and a waiter
// gave up on the DONE that was still to come.
func (n *Node) post(f func() (uint64, error)) error {
	deadline := time.Now().Add(waitTimeout)
	for {
		n.dmu.Lock()
		_, err := f()
		n.dmu.Unlock()
		if !errors.Is(err, driver.ErrQueueFull) {
			if !driver.Posted(err) {
				return fmt.Errorf("post: %w", err)
			}
			if err != nil {
				n.ctr.notRung.Add(1)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("post: %w", err)
		}
		runtime.Gosched()
	}
}

// pageFault is the sender's remote paging, the paper's steps (2)-(6): page
// sp's port into one of the connected node's receive frames. Paging is
// one at a time per connection (c.pmu); it holds the locks of both the
// port paged in and the port paged out, so no process translates through
// either while their entries change.
func (n *Node) pageFault(c *conn, sp *sendPort) error {
	c.pmu.Lock()
	defer c.pmu.Unlock()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n.mu.Lock()
	if sp.Resident { // another sharer paged it in meanwhile
		n.mu.Unlock()
		return nil
	}
	n.ctr.faults.Add(1)
	// (2) the port comes from the page table (the caller read sp from the
	// invalid entry). (3) pick the frame to page out with the frame table.
	slot := slices.Index(c.send.Ports, 0)
	if slot < 0 {
		occupied := make([]uint32, len(c.send.Ports))
		for i := range occupied {
			occupied[i] = c.send.Base + uint32(i)
		}
		c.polmu.Lock()
		slot = int(c.policy.Victim(occupied, c.clock) - c.send.Base)
		c.polmu.Unlock()
	}
	frame := c.send.Base + uint32(slot)
	var victim *sendPort
	if old := c.send.Ports[slot]; old != 0 {
		victim = n.sendPorts[old]
	}
	n.mu.Unlock()
	if victim != nil {
		victim.mu.Lock() // no process writes through the victim from here on
		defer victim.mu.Unlock()
		// A signaled tagged rewrite of the victim's first word: when its
		// DONE comes, every earlier write through this send frame has
		// been acknowledged (the device re-reads a write's bytes from the
		// staging frame until then, so the new port must not reuse it
		// earlier), and so has every earlier paging request to this node
		// (data behind a request is acknowledged only after PAGE_DONE).
		if err := n.syncPush(c, victim, uint32(slot)); err != nil {
			return fmt.Errorf("page port %d into frame %d: %w", sp.Port, frame, err)
		}
	}
	// (4) the remote paging request: page-in port and frame.
	if err := n.post(func() (uint64, error) { return n.d.PageRequest(c.peer, sp.Port, frame, 0) }); err != nil {
		return fmt.Errorf("page port %d into node %d frame %d: %w", sp.Port, c.peer, frame, err)
	}
	if victim == nil {
		// A free frame (the first uses of a connection): confirm this
		// request at once, since no later victim push will.
		if err := n.syncPush(c, sp, uint32(slot)); err != nil {
			return fmt.Errorf("page port %d into frame %d: %w", sp.Port, frame, err)
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ctr.pageRequests.Add(1)
	if victim != nil { // (5) every sharer of the paged-out port
		victim.Resident = false
		for _, m := range victim.Maps {
			m.Proc.pt[m.VPage] = PTE{Send: true, Peer: c.peer, Port: victim.Port}
		}
	}
	// (6) every sharer of the paged-in port
	sp.Resident, sp.Frame = true, frame
	for _, m := range sp.Maps {
		m.Proc.pt[m.VPage] = PTE{Valid: true, Send: true, Peer: c.peer, Port: sp.Port, Frame: frame}
	}
	c.send.Ports[slot] = sp.Port
	c.polmu.Lock()
	c.clock++
	c.policy.Load(frame, sp.Port, c.clock)
	c.polmu.Unlock()
	return nil // (7) return from the trap
}

// syncPush posts a signaled tagged rewrite of sp's first word into send
// frame slot and waits for its DONE. sp.mu is held.
func (n *Node) syncPush(c *conn, sp *sendPort, slot uint32) error {
	stage := uint64(c.stageBase+slot) * n.ps
	copy(n.lm[stage:stage+8], sp.shadow[:8])
	remote := uint64(c.send.Base+slot) * n.ps
	_, err := n.waitFor(func(ck uint64) (uint64, error) {
		return n.d.PushTagged(c.peer, stage, remote, 8, sp.Port, uapi.FlagSignal, ck)
	})
	n.ctr.syncs.Add(1)
	return err
}

// fence posts a signaled FENCE and waits until every earlier command has
// completed (remote writes acknowledged; paging requests acknowledged,
// which the receiver's device does only after its PAGE_DONE).
func (n *Node) fence() error {
	_, err := n.waitFor(func(ck uint64) (uint64, error) {
		return n.d.Post(&uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal, Cookie: ck})
	})
	return err
}

// waitFor posts one signaled command with a fresh cookie and waits for its
// DONE (or ERROR) status, which the management goroutine hands over.
func (n *Node) waitFor(postFn func(cookie uint64) (uint64, error)) (uapi.Status, error) {
	ck := n.cookie.Add(1) | 1<<63 // never a write's cookie

	ch := make(chan uapi.Status, 1)
	n.wmu.Lock()
	n.waiters[ck] = ch
	n.wmu.Unlock()
	defer func() {
		n.wmu.Lock()
		delete(n.waiters, ck)
		n.wmu.Unlock()
	}()
	if err := n.post(func() (uint64, error) { return postFn(ck) }); err != nil {
		return uapi.Status{}, err
	}
	select {
	case s := <-ch:
		if s.Type == uapi.StError {
			return s, fmt.Errorf("command %d: %v: %w", s.CmdIndex(), s.Err, ErrDevice)
		}
		return s, nil
	case <-n.stop:
		return uapi.Status{}, ErrClosed
	case <-time.After(waitTimeout):
		return uapi.Status{}, ErrTimeout
	}
}

// Flush waits until every write and paging request this node posted so
// far has been acknowledged, hence placed and paged at the receivers.
func (n *Node) Flush() error {
	for _, peer := range sortedKeys(n.conns) {
		// A write behind the last paging request is acknowledged only
		// after the receiver's PAGE_DONE: rewrite a resident port's first
		// word to learn that the receiver's tables are final.
		c := n.conns[peer]
		c.pmu.Lock()
		n.mu.RLock()
		var sp *sendPort
		slot := slices.IndexFunc(c.send.Ports, func(p uint16) bool { return p != 0 })
		if slot >= 0 {
			sp = n.sendPorts[c.send.Ports[slot]]
		}
		n.mu.RUnlock()
		var err error
		if sp != nil {
			sp.mu.Lock()
			err = n.syncPush(c, sp, uint32(slot))
			sp.mu.Unlock()
		}
		c.pmu.Unlock()
		if err != nil {
			return fmt.Errorf("lmmc flush: %w", err)
		}
	}
	if err := n.fence(); err != nil {
		return fmt.Errorf("lmmc flush: %w", err)
	}
	return nil
}

// Consumed is an application's hint to the Comm policy that the receiver
// has read what send port port holds (e.g. its reply came back).
func (n *Node) Consumed(port uint16) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if sp := n.sendPorts[port]; sp != nil && sp.Resident {
		c := n.conns[sp.Peer]
		c.polmu.Lock()
		c.policy.Consumed(sp.Frame)
		c.polmu.Unlock()
	}
}

// Read is the paper's link-memory read routine: it translates va through
// p's page table and copies what the receive ports hold into buf: link
// memory for a resident port, the paged-out copy otherwise.
func (p *Process) Read(va uint64, buf []byte) (int, error) {
	n := p.n
	done := 0
	n.mu.RLock()
	defer n.mu.RUnlock()
	for done < len(buf) {
		vp, off := va/n.ps, va%n.ps
		k := min(uint64(len(buf)-done), n.ps-off)
		e, ok := p.pt[vp]
		if !ok {
			return done, fmt.Errorf("lmmc read %s at %#x: %w", p.name, va, ErrNotMapped)
		}
		if e.Send {
			return done, fmt.Errorf("lmmc read %s at %#x: %w", p.name, va, ErrDirection)
		}
		dst := buf[done : done+int(k)]
		if e.Valid {
			a := uint64(e.Frame)*n.ps + off
			copy(dst, n.lm[a:a+k])
		} else if rp := n.conns[e.Peer].recvPorts[e.Port]; rp.saved != nil {
			copy(dst, rp.saved[off:off+k])
		} else {
			clear(dst)
		}
		done += int(k)
		va += k
	}
	return done, nil
}

// manage is the link-memory management goroutine: it takes statuses off
// the driver's status ring. Paging requests are paged; DONE and ERROR
// statuses wake waiters and are counted. Normal traffic brings none.
//
// It waits the way a driver should: in Driver.Wait, which spins briefly
// (running the device's passes itself when the device is in this
// process) and then sleeps on the device's interrupt, so a paging request
// is handled as soon as it is posted, without polling. The timeout only
// bounds how late a stop is seen when Close cannot wake it (Close posts a
// signaled NOP, whose DONE does).
//
// Ownership of the driver: this goroutine is the only consumer of its
// status ring (Poll, Wait; waiters get their statuses from it through
// channels) and calls those without n.dmu, so that writers can post
// while it waits; every post, from any goroutine, holds n.dmu. Posting
// touches only the command side of the driver and waiting only the status
// side (the race tests of this package run both at once).
func (n *Node) manage() {
	defer close(n.stopped)
	for {
		select {
		case <-n.stop:
			return
		default:
		}
		s, err := n.d.Wait(manageWaitNs)
		switch {
		case err == nil:
			n.handle(s)
		case errors.Is(err, driver.ErrTimeout):
		default: // the device stopped or went stale: wait for it or for Close
			select {
			case <-n.stop:
				return
			case <-time.After(manageRetry):
			}
		}
	}
}

// manageWaitNs bounds one wait of the management goroutine; manageRetry is
// its pause after a device error.
const (
	manageWaitNs = int64(50 * time.Millisecond)
	manageRetry  = 10 * time.Millisecond
)

func (n *Node) handle(s uapi.Status) {
	switch s.Type {
	case uapi.StPageReq:
		if err := n.pageIn(s.SrcNode, uint16(s.Imm), uint32(s.Addr)); err != nil {
			n.ctr.errors.Add(1)
		}
		return
	case uapi.StError:
		if s.Err == uapi.EBadTag {
			n.ctr.badTag.Add(1)
		} else {
			n.ctr.errors.Add(1)
		}
	}
	if s.Type == uapi.StDone || s.Type == uapi.StError {
		n.wmu.Lock()
		ch := n.waiters[s.Cookie]
		n.wmu.Unlock()
		if ch != nil {
			ch <- s
		}
	}
}

// pageIn is the receiver's remote paging, the paper's receiver steps
// (2)-(6), run by the management goroutine while the device holds every
// later packet from peer: page the frame's port out, page port in, retag
// the frame, fix the page tables; then PAGE_DONE lets the data flow again.
func (n *Node) pageIn(peer, port uint16, frame uint32) error {
	c := n.conns[peer]
	if c == nil || port == 0 {
		n.post(func() (uint64, error) { return n.d.PageDone(peer) })
		return fmt.Errorf("paging request from node %d for port %d: %w", peer, port, ErrBadPort)
	}
	n.mu.Lock()
	old, ok := c.recv.Port(frame) // (2)
	if !ok {
		n.mu.Unlock()
		n.post(func() (uint64, error) { return n.d.PageDone(peer) })
		return fmt.Errorf("paging request from node %d: frame %d is not its: %w", peer, frame, ErrConfig)
	}
	fm := n.lm[uint64(frame)*n.ps : uint64(frame+1)*n.ps]
	if old != 0 && old != port {
		op := c.recvPorts[old]
		if op.saved == nil {
			op.saved = make([]byte, n.ps)
		}
		copy(op.saved, fm) // (3) page out, keeping the contents
		n.ctr.pagesOut.Add(1)
		op.Resident = false
		for _, m := range op.Maps { // (4)
			m.Proc.pt[m.VPage] = PTE{Peer: peer, Port: old}
		}
	}
	np := c.recvPort(port)
	if np.Resident && np.Frame != frame { // cannot happen while the tables mirror; keep them sane
		c.recv.Ports[np.Frame-c.recv.Base] = 0
	}
	if np.saved != nil { // (5) page in what the port held
		copy(fm, np.saved)
		n.ctr.pagesIn.Add(1)
	} else {
		clear(fm)
	}
	np.Resident, np.Frame = true, frame
	for _, m := range np.Maps { // (6)
		m.Proc.pt[m.VPage] = PTE{Valid: true, Peer: peer, Port: port, Frame: frame}
	}
	c.recv.Ports[frame-c.recv.Base] = port
	err := n.d.SetFrameTag(frame, port) // a register store: no driver lock needed
	n.ctr.pagingsDone.Add(1)
	n.mu.Unlock()
	if err != nil {
		return fmt.Errorf("retag frame %d: %w", frame, err)
	}
	return n.post(func() (uint64, error) { return n.d.PageDone(peer) }) // (7)
}

// Check verifies the node's table invariants: a frame holds at most one
// port; a port's frame table entry and port table entry agree; every valid
// page table entry points at the frame its port occupies and every invalid
// one belongs to a non-resident port; port tables and page tables list the
// same mappings; receive frames carry their port's tag in the device.
func (n *Node) Check() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	bad := func(f string, a ...any) {
		errs = append(errs, fmt.Errorf("node %d: "+f, append([]any{n.self}, a...)...))
	}
	for _, peer := range sortedKeys(n.conns) {
		c := n.conns[peer]
		checkFrames := func(dir string, t *FrameTable, entry func(uint16) *PortEntry) {
			seen := map[uint16]bool{}
			for i, port := range t.Ports {
				if port == 0 {
					continue
				}
				f := t.Base + uint32(i)
				if seen[port] {
					bad("%s peer %d: port %d in two frames", dir, peer, port)
				}
				seen[port] = true
				if e := entry(port); e == nil || !e.Resident || e.Frame != f {
					bad("%s peer %d: frame %d holds port %d, port table says %v", dir, peer, f, port, e)
				}
			}
		}
		checkFrames("send", &c.send, func(p uint16) *PortEntry {
			if sp := n.sendPorts[p]; sp != nil && sp.Peer == peer {
				return &sp.PortEntry
			}
			return nil
		})
		checkFrames("recv", &c.recv, func(p uint16) *PortEntry {
			if rp := c.recvPorts[p]; rp != nil {
				return &rp.PortEntry
			}
			return nil
		})
		for i, port := range c.recv.Ports {
			if tag := n.d.FrameTag(c.recv.Base + uint32(i)); tag != port {
				bad("recv frame %d: table says port %d, device tag %d", c.recv.Base+uint32(i), port, tag)
			}
		}
		for _, rp := range c.recvPorts {
			n.checkPort(&rp.PortEntry, false, &c.recv, bad)
		}
	}
	for _, sp := range n.sendPorts {
		n.checkPort(&sp.PortEntry, true, &n.conns[sp.Peer].send, bad)
	}
	for _, p := range n.procs {
		for vp, e := range p.pt {
			var pe *PortEntry
			if e.Send {
				if sp := n.sendPorts[e.Port]; sp != nil {
					pe = &sp.PortEntry
				}
			} else if rp := n.conns[e.Peer].recvPorts[e.Port]; rp != nil {
				pe = &rp.PortEntry
			}
			if pe == nil || !slices.Contains(pe.Maps, Mapping{p, vp}) {
				bad("%s vpage %d (%v) not in the port table", p.name, vp, e)
			}
		}
	}
	return errors.Join(errs...)
}

func (n *Node) checkPort(e *PortEntry, send bool, t *FrameTable, bad func(string, ...any)) {
	if e.Resident {
		if got, ok := t.Port(e.Frame); !ok || got != e.Port {
			bad("port %d resident in frame %d, frame table says %d", e.Port, e.Frame, got)
		}
	}
	for _, m := range e.Maps {
		pte, ok := m.Proc.pt[m.VPage]
		switch {
		case !ok || pte.Port != e.Port || pte.Send != send || pte.Peer != e.Peer:
			bad("port %d maps %s/%d, page table has %v", e.Port, m.Proc.name, m.VPage, pte)
		case pte.Valid != e.Resident || pte.Valid && pte.Frame != e.Frame:
			bad("port %d (resident %v frame %d): %s/%d is %v", e.Port, e.Resident, e.Frame, m.Proc.name, m.VPage, pte)
		}
	}
}

// CheckPair verifies, at quiescence (after sender.Flush), that the
// sender's send frame table for receiver equals the receiver's receive
// frame table for sender.
func CheckPair(sender, receiver *Node) error {
	s, _, _ := sender.FrameTables(receiver.self)
	_, r, _ := receiver.FrameTables(sender.self)
	return CheckFrameTables(sender.self, receiver.self, s, r)
}

// FrameTables copies the send and receive link page frame tables of the
// connection to peer (ok false: no such connection), so nodes in other
// processes can be held to CheckFrameTables too.
func (n *Node) FrameTables(peer uint16) (send, recv FrameTable, ok bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	c := n.conns[peer]
	if c == nil {
		return FrameTable{}, FrameTable{}, false
	}
	return FrameTable{c.send.Base, slices.Clone(c.send.Ports)}, FrameTable{c.recv.Base, slices.Clone(c.recv.Ports)}, true
}

// CheckFrameTables is the pair check on copies of the tables: sender's
// send frame table for receiver must equal receiver's receive frame table
// for sender, frame for frame, once the sender has flushed.
func CheckFrameTables(sender, receiver uint16, send, recv FrameTable) error {
	if send.Base != recv.Base || !slices.Equal(send.Ports, recv.Ports) {
		return fmt.Errorf("lmmc: node %d send frames %d:%v != node %d receive frames %d:%v: %w", sender, send.Base, send.Ports, receiver, recv.Base, recv.Ports, ErrPairMismatch)
	}
	return nil
}

// String dumps every table of the node, for logs.
// Tables renders each of the paper's tables as its own text, named for a
// file: send/recv link page frame tables and recv port tables per peer,
// the send port table, each process's page table, and the statistics.
// Mount shows them as files.
func (n *Node) Tables() map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	t := map[string]string{}
	for _, peer := range sortedKeys(n.conns) {
		c := n.conns[peer]
		t[fmt.Sprintf("send_frames.%d", peer)] = fmt.Sprintf("%v\n", &c.send)
		t[fmt.Sprintf("recv_frames.%d", peer)] = fmt.Sprintf("%v\n", &c.recv)
		var b strings.Builder
		for _, port := range sortedKeys(c.recvPorts) {
			fmt.Fprintf(&b, "%v\n", &c.recvPorts[port].PortEntry)
		}
		t[fmt.Sprintf("recv_ports.%d", peer)] = b.String()
	}
	var b strings.Builder
	for _, port := range sortedKeys(n.sendPorts) {
		fmt.Fprintf(&b, "%v\n", &n.sendPorts[port].PortEntry)
	}
	t["send_ports"] = b.String()
	for _, p := range n.procs {
		t["page_table."+p.name] = fmt.Sprintf("%v", p.pt)
	}
	t["stats"] = fmt.Sprintf("%+v\n", n.Stats())
	return t
}

// Mount shows the tables as read-only files under dir (FUSE; as root, or
// with fusermount3), fresh on every read; unmount with the server's
// Unmount. Processes made after the mount do not get a file.
func (n *Node) Mount(dir string) (*fuse.Server, error) {
	return regfs.MountText(dir, n.Tables)
}

func (n *Node) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "lmmc node %d (page %d B)\n", n.self, n.ps)
	for _, peer := range sortedKeys(n.conns) {
		c := n.conns[peer]
		fmt.Fprintf(&b, "peer %d: policy %s\n  send link page frame table: %v\n  recv link page frame table: %v\n", peer, c.policy.Name(), &c.send, &c.recv)
		b.WriteString("  recv port table:\n")
		for _, port := range sortedKeys(c.recvPorts) {
			fmt.Fprintf(&b, "    %v\n", &c.recvPorts[port].PortEntry)
		}
	}
	b.WriteString("send port table:\n")
	for _, port := range sortedKeys(n.sendPorts) {
		fmt.Fprintf(&b, "  %v\n", &n.sendPorts[port].PortEntry)
	}
	for _, p := range n.procs {
		fmt.Fprintf(&b, "page table of %s:\n%v", p.name, p.pt)
	}
	fmt.Fprintf(&b, "stats: %+v\n", n.Stats())
	return b.String()
}
