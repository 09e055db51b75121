// Package collective runs the RHiNET-2 paper's unicast-based barrier and
// multicast over dimmnet devices: every rank drives its own device, and a
// visiting list (built from the fabric's map by one of the paper's
// orders) says who sends to whom, as a binomial tree rooted at the list's
// first rank. It is a library over the driver, not the device model, so
// the same code runs on in-process devices, a daemon's or a guest's.
//
// Messages are PUSHes whose immediate carries the operation number and
// kind: the receiver learns the sender (SRC_NODE) and what the message is
// from its status alone, so a barrier message moves 8 bytes and touches
// no receive buffer.
package collective

import (
	"errors"
	"fmt"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
)

// Errors callers test with errors.Is.
var (
	// ErrNotInList is returned when the calling rank is not in the list.
	ErrNotInList = errors.New("collective: rank not in the visiting list")
	// ErrBadList is returned for a list that repeats or lacks ranks.
	ErrBadList = errors.New("collective: bad visiting list")
	// ErrFailed is returned when the device reports a failed command.
	ErrFailed = errors.New("collective: a message failed")
)

// Kind is what a message is for.
type Kind uint8

// Message kinds.
const (
	Gather  Kind = 1 // a barrier's gather: this subtree has arrived
	Release Kind = 2 // a barrier's release
	Data    Kind = 3 // a multicast's payload
	Each    Kind = 4 // an all-to-all's message
)

// String names the kind as logs and test failures print it.
func (k Kind) String() string {
	switch k {
	case Gather:
		return "gather"
	case Release:
		return "release"
	case Data:
		return "data"
	case Each:
		return "all-to-all"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Observer hears every message a rank takes in, before the rank acts on
// it: what tests check ordering and delivery with.
type Observer interface {
	Received(rank, from int, kind Kind, op uint64)
}

// Options tune a Comm.
type Options struct {
	// DataAddr is the link-memory address multicast payloads land at and
	// are relayed from (8-byte aligned); default 4096.
	DataAddr uint64
	// SignalAddr is the 8 bytes barrier messages move (their content is
	// unused: the immediate says everything); default 0. It must not
	// overlap the payload, which a late barrier message would overwrite.
	SignalAddr uint64
	// WaitNs bounds each wait for a message; default 10 s.
	WaitNs int64
	// Observer, if set, hears every message taken in.
	Observer Observer
}

type msgKey struct {
	kind Kind
	op   uint64
}

// Comm is one rank's end of a group. Like its Driver, it is used by one
// goroutine.
type Comm struct {
	drv    *driver.Driver
	rank   int
	nodes  []uint16
	rankOf map[uint16]int
	opts   Options
	op     uint64
	early  map[msgKey]int
	got    time.Time // when the last multicast's payload arrived here
	// notRung counts messages posted while the doorbell could not be rung
	notRung uint64
}

// New makes rank's end of the group whose ranks run on devices nodes
// (rank i on node nodes[i]); drv drives nodes[rank].
func New(drv *driver.Driver, rank int, nodes []uint16, opts Options) (*Comm, error) {
	if rank < 0 || rank >= len(nodes) {
		return nil, fmt.Errorf("collective: rank %d of %d", rank, len(nodes))
	}
	if drv.Node() != nodes[rank] {
		return nil, fmt.Errorf("collective: rank %d is node %d, the driver's device is node %d", rank, nodes[rank], drv.Node())
	}
	if opts.DataAddr == 0 {
		opts.DataAddr = 4096
	}
	if opts.WaitNs == 0 {
		opts.WaitNs = 10_000_000_000
	}
	c := &Comm{drv: drv, rank: rank, nodes: nodes, rankOf: map[uint16]int{}, opts: opts, early: map[msgKey]int{}}
	for i, n := range nodes {
		c.rankOf[n] = i
	}
	return c, nil
}

// Rank is this end's rank.
func (c *Comm) Rank() int { return c.rank }

// Op is the number of operations this end has run: every rank of a group
// runs the same sequence, so it names an operation across the group.
func (c *Comm) Op() uint64 { return c.op }

func (c *Comm) position(list []int) (int, error) {
	if len(list) > len(c.nodes) {
		return 0, fmt.Errorf("%w: %d ranks in a group of %d", ErrBadList, len(list), len(c.nodes))
	}
	pos := -1
	seen := make([]bool, len(c.nodes))
	for i, r := range list {
		if r < 0 || r >= len(c.nodes) || seen[r] {
			return 0, fmt.Errorf("%w: rank %d at position %d", ErrBadList, r, i)
		}
		seen[r] = true
		if r == c.rank {
			pos = i
		}
	}
	if pos < 0 {
		return 0, ErrNotInList
	}
	return pos, nil
}

// Barrier runs one barrier over list, a permutation of the group's ranks
// rooted at list[0] (4.1.2): gather up the binomial tree, release down
// it. Each rank goes on as soon as its own messages are sent.
func (c *Comm) Barrier(list []int) error {
	c.op++
	pos, err := c.position(list)
	if err != nil {
		return err
	}
	if len(list) != len(c.nodes) {
		return fmt.Errorf("%w: a barrier covers all %d ranks, the list %d", ErrBadList, len(c.nodes), len(list))
	}
	children := Children(pos, len(list))
	if err := c.await(Gather, len(children)); err != nil {
		return fmt.Errorf("barrier %d, rank %d: gather: %w", c.op, c.rank, err)
	}
	if pos != 0 {
		if err := c.send(list[Parent(pos)], Gather, 0); err != nil {
			return fmt.Errorf("barrier %d, rank %d: %w", c.op, c.rank, err)
		}
		if err := c.await(Release, 1); err != nil {
			return fmt.Errorf("barrier %d, rank %d: release: %w", c.op, c.rank, err)
		}
	}
	for _, ch := range children {
		if err := c.send(list[ch], Release, 0); err != nil {
			return fmt.Errorf("barrier %d, rank %d: %w", c.op, c.rank, err)
		}
	}
	return nil
}

// Multicast sends n bytes at DataAddr of list[0]'s link memory to the same
// address on every other rank of list, in ceil(log2(len(list))) steps:
// each rank relays the payload from where it landed. Every rank of list
// calls it; ranks not in list must not (they would wait for nothing), and
// every rank of the group counts the operation all the same, so call
// Skip on the others.
func (c *Comm) Multicast(list []int, n uint32) error {
	c.op++
	pos, err := c.position(list)
	if err != nil {
		return err
	}
	if pos != 0 {
		if err := c.await(Data, 1); err != nil {
			return fmt.Errorf("multicast %d, rank %d: %w", c.op, c.rank, err)
		}
		c.got = time.Now()
	}
	for _, ch := range Children(pos, len(list)) {
		if err := c.send(list[ch], Data, n); err != nil {
			return fmt.Errorf("multicast %d, rank %d: %w", c.op, c.rank, err)
		}
	}
	return nil
}

// AllToAll sends one 8-byte message to every other rank and takes one
// from each: the densest pattern a group has, what shows whether idle
// devices cost anything and busy ones share cores fairly.
func (c *Comm) AllToAll() error {
	c.op++
	n := len(c.nodes)
	for k := 1; k < n; k++ {
		if err := c.send((c.rank+k)%n, Each, 0); err != nil {
			return fmt.Errorf("all-to-all %d, rank %d: %w", c.op, c.rank, err)
		}
	}
	if err := c.await(Each, n-1); err != nil {
		return fmt.Errorf("all-to-all %d, rank %d: %w", c.op, c.rank, err)
	}
	return nil
}

// NotRung is how many of this rank's messages were posted while its
// device's doorbell could not be rung (driver.ErrNotRung): they were sent
// at the device's next look instead of at once, and the operations they
// belong to succeeded. A count that grows says the attachment's doorbell
// is broken, which slows every operation but fails none.
func (c *Comm) NotRung() uint64 { return c.notRung }

// Skip counts an operation this rank takes no part in, so operation
// numbers stay the same across the group.
func (c *Comm) Skip() { c.op++ }

func imm(op uint64, k Kind) uint64 { return op<<8 | uint64(k) }

// send PUSHes to rank to: 8 bytes at SignalAddr (n = 0) or n payload
// bytes from DataAddr to the same address there, the operation in the
// immediate.
func (c *Comm) send(to int, k Kind, n uint32) error {
	addr := c.opts.DataAddr
	if n == 0 {
		n, addr = 8, c.opts.SignalAddr
	}
	d := uapi.Desc{Opcode: uapi.OpPUSH, DstNode: c.nodes[to], SrcProc: c.drv.GPID(), Length: n,
		LocalAddr: addr, RemoteAddr: addr, Imm: imm(c.op, k)}
	for {
		_, err := c.drv.Post(&d)
		if !errors.Is(err, driver.ErrQueueFull) {
			if !driver.Posted(err) {
				return fmt.Errorf("send %s to rank %d: %w", k, to, err)
			}
			if err != nil {
				// The doorbell failed, but the message is posted: the
				// device sends it at its next look. A failure here left
				// the group's ranks at different operations.
				c.notRung++
			}
			return nil
		}
		// The queue drains as the device runs; take statuses meanwhile.
		if err := c.take(0); err != nil {
			return err
		}
	}
}

// await takes in messages until count of kind k for the current
// operation have arrived, keeping others (a later operation's, from a
// rank that already went on) for later.
func (c *Comm) await(k Kind, count int) error {
	key := msgKey{k, c.op}
	for {
		if got := c.early[key]; got >= count {
			if got == count {
				delete(c.early, key)
			} else {
				c.early[key] = got - count
			}
			return nil
		}
		if err := c.take(c.opts.WaitNs); err != nil {
			return err
		}
	}
}

// take waits up to timeoutNs (0: only looks) for one status and files it.
func (c *Comm) take(timeoutNs int64) error {
	var st uapi.Status
	if timeoutNs == 0 {
		s, ok := c.drv.Poll()
		if !ok {
			return nil
		}
		st = s
	} else {
		s, err := c.drv.Wait(timeoutNs)
		if err != nil {
			return err
		}
		st = s
	}
	switch st.Type {
	case uapi.StPUSH:
		k, op := Kind(st.Imm&0xff), st.Imm>>8
		from, ok := c.rankOf[st.SrcNode]
		if !ok {
			return nil // not of this group
		}
		if c.opts.Observer != nil {
			c.opts.Observer.Received(c.rank, from, k, op)
		}
		c.early[msgKey{k, op}]++
	case uapi.StError:
		return fmt.Errorf("%w: %s to its destination: %s", ErrFailed, st.Opcode, st.Err)
	}
	return nil
}
