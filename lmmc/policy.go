package lmmc

import (
	"fmt"
	"math"
)

// Policy chooses the send link page frame to page out when a write traps.
// A Node keeps one Policy instance per connected node; its methods are
// called with the node's table lock held, so implementations need no
// locking. Time is a logical clock: the connection's count of writes.
type Policy interface {
	// Name is the policy's name as Bench and NewPolicy know it.
	Name() string
	// Load records that port was paged into frame at time now.
	Load(frame uint32, port uint16, now uint64)
	// Access records a write through frame (holding port) at time now.
	Access(frame uint32, port uint16, now uint64)
	// Consumed records the application's hint that the receiver has read
	// what frame holds (only Comm uses it).
	Consumed(frame uint32)
	// Victim picks one of frames (all occupied) to page out at time now.
	Victim(frames []uint32, now uint64) uint32
}

// Policies lists the policy names NewPolicy accepts.
var Policies = []string{"fifo", "lru", "comm"}

// NewPolicy returns a fresh policy by name: "fifo", "lru" or "comm".
func NewPolicy(name string) (Policy, error) {
	switch name {
	case "fifo":
		return &FIFO{loaded: map[uint32]uint64{}}, nil
	case "lru":
		return &LRU{used: map[uint32]uint64{}}, nil
	case "comm":
		return &Comm{frames: map[uint32]*commFrame{}, ports: map[uint16]*commPort{}}, nil
	}
	return nil, fmt.Errorf("lmmc: policy %q: %w", name, ErrUnknownPolicy)
}

// FIFO pages out the frame that was paged in longest ago.
type FIFO struct{ loaded map[uint32]uint64 }

// Name is "fifo".
func (*FIFO) Name() string { return "fifo" }

// Load stamps the frame's page-in time.
func (p *FIFO) Load(f uint32, _ uint16, now uint64) { p.loaded[f] = now }

// Access does nothing: FIFO ignores use.
func (*FIFO) Access(uint32, uint16, uint64) {}

// Consumed does nothing.
func (*FIFO) Consumed(uint32) {}

// Victim is the frame with the oldest page-in.
func (p *FIFO) Victim(frames []uint32, _ uint64) uint32 {
	return argBest(frames, func(f uint32) float64 { return -float64(p.loaded[f]) })
}

// LRU pages out the least recently written frame.
type LRU struct{ used map[uint32]uint64 }

// Name is "lru".
func (*LRU) Name() string { return "lru" }

// Load counts as a use.
func (p *LRU) Load(f uint32, _ uint16, now uint64) { p.used[f] = now }

// Access stamps the frame's last use.
func (p *LRU) Access(f uint32, _ uint16, now uint64) { p.used[f] = now }

// Consumed does nothing.
func (*LRU) Consumed(uint32) {}

// Victim is the least recently used frame.
func (p *LRU) Victim(frames []uint32, _ uint64) uint32 {
	return argBest(frames, func(f uint32) float64 { return -float64(p.used[f]) })
}

// Comm is a policy for communication buffers. LRU and FIFO assume the
// locality of memory accesses; communication buffers are reused
// periodically instead (a channel is written once per round, rounds cycle
// over channels), so Comm learns each port's reuse interval (a moving
// average of the time between its writes, kept across page-outs),
// predicts each resident port's next write as last write + interval, and
// pages out the frame whose next write lies furthest in the future (an
// online approximation of Belady's choice). Frames the application has
// marked consumed (Node.Consumed: the receiver has read them) are
// preferred over frames whose contents are still unread. A port with no
// history yet is predicted far away.
type Comm struct {
	frames map[uint32]*commFrame
	ports  map[uint16]*commPort
}

type commFrame struct {
	port     uint16
	consumed bool
}

type commPort struct {
	last     uint64
	interval float64 // 0: unknown
}

// Name is "comm".
func (*Comm) Name() string { return "comm" }

func (p *Comm) port(port uint16) *commPort {
	cp := p.ports[port]
	if cp == nil {
		cp = &commPort{}
		p.ports[port] = cp
	}
	return cp
}

// Load records the port now in frame and counts the write that trapped.
func (p *Comm) Load(f uint32, port uint16, now uint64) {
	p.frames[f] = &commFrame{port: port}
	p.Access(f, port, now)
}

// Access updates the port's reuse interval and clears the consumed mark.
func (p *Comm) Access(f uint32, port uint16, now uint64) {
	cp := p.port(port)
	if cp.last != 0 && now > cp.last {
		d := float64(now - cp.last)
		if cp.interval == 0 {
			cp.interval = d
		} else {
			cp.interval += (d - cp.interval) / 4
		}
	}
	cp.last = now
	if cf := p.frames[f]; cf != nil {
		cf.consumed = false
	}
}

// Consumed marks the frame's contents as read by the receiver.
func (p *Comm) Consumed(f uint32) {
	if cf := p.frames[f]; cf != nil {
		cf.consumed = true
	}
}

// Victim is the frame predicted to be written again last, consumed first.
func (p *Comm) Victim(frames []uint32, _ uint64) uint32 {
	return argBest(frames, func(f uint32) float64 {
		cf := p.frames[f]
		if cf == nil {
			return math.Inf(1)
		}
		cp := p.port(cf.port)
		next := float64(cp.last) + cp.interval
		if cp.interval == 0 {
			next = float64(cp.last) + 1e12
		}
		if cf.consumed {
			next += 1e15
		}
		return next
	})
}

// argBest returns the frame with the highest score (lowest frame on ties).
func argBest(frames []uint32, score func(uint32) float64) uint32 {
	best, bs := frames[0], math.Inf(-1)
	for _, f := range frames {
		if s := score(f); s > bs || s == bs && f < best {
			best, bs = f, s
		}
	}
	return best
}
