// Package impair wraps a link.Port in an impaired medium: it drops, duplicates,
// reorders, corrupts and delays the frames the port receives, with
// probabilities drawn from a seeded generator so that a run can be
// repeated exactly. Impairments apply on the receive side only, so wrapping
// both ports of a pair impairs both directions, and wrapping one port
// impairs only the traffic towards it.
//
// It exists to test the device's reliability layer (retransmission,
// duplicate suppression, in-order delivery, CRC checks) on any link, from
// tests and from the --fault flag of the ping-pong and the daemon.
package impair

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/vdev/link"
)

// Config says which faults to inject. The zero Config injects none.
type Config struct {
	// Loss is the probability that a received frame is dropped.
	Loss float64
	// Dup is the probability that a frame is delivered twice (the copy
	// right after the original).
	Dup float64
	// Reorder is the probability that a frame is held back and delivered
	// after the next one (or after MaxHold if no next one comes).
	Reorder float64
	// Corrupt is the probability that one random bit of a frame, past the
	// 14-byte Ethernet header, is flipped.
	Corrupt float64
	// Delay is added to every frame: Recv does not return a frame before
	// it has waited this long in the wrapper. 0 adds none.
	Delay time.Duration
	// Seed seeds the generator; the same seed and the same sequence of
	// received frames give the same faults.
	Seed int64
}

// MaxHold bounds how long a frame held back for reordering waits for a
// next frame to overtake it; after that it is delivered anyway, so a
// reordered last frame is late rather than lost.
const MaxHold = time.Millisecond

// maxQueue bounds the frames the wrapper takes from the wrapped port ahead
// of the caller, so that a slow (delayed) receiver still pushes back on
// its senders through the medium instead of buffering without limit.
const maxQueue = 1024

// ethHeaderLen is the Ethernet II header that corruption leaves intact,
// so corrupted frames still reach the device and fail its CRC check.
const ethHeaderLen = 14

// Parse reads a fault specification of comma-separated key=value pairs,
// as given to --fault: "loss=0.1,dup=0.01,reorder=0.05,corrupt=0.001,
// delay=50us,seed=1". Probabilities are numbers in [0, 1] or percentages
// ("10%"); delay is a Go duration; seed an integer. Keys may be omitted
// (zero) but not repeated; the empty string is the zero Config.
func Parse(spec string) (Config, error) {
	var c Config
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		key, val, ok := strings.Cut(item, "=")
		key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
		if !ok || val == "" {
			return Config{}, fmt.Errorf("fault: %q: want key=value (keys: loss, dup, reorder, corrupt, delay, seed)", item)
		}
		if seen[key] {
			return Config{}, fmt.Errorf("fault: key %q given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "loss":
			c.Loss, err = parseProb(key, val)
		case "dup":
			c.Dup, err = parseProb(key, val)
		case "reorder":
			c.Reorder, err = parseProb(key, val)
		case "corrupt":
			c.Corrupt, err = parseProb(key, val)
		case "delay":
			c.Delay, err = time.ParseDuration(val)
			if err != nil {
				err = fmt.Errorf("fault: delay=%s: not a duration (e.g. 50us, 2ms)", val)
			} else if c.Delay < 0 {
				err = fmt.Errorf("fault: delay=%s: must not be negative", val)
			}
		case "seed":
			c.Seed, err = strconv.ParseInt(val, 0, 64)
			if err != nil {
				err = fmt.Errorf("fault: seed=%s: not an integer", val)
			}
		default:
			err = fmt.Errorf("fault: unknown key %q (keys: loss, dup, reorder, corrupt, delay, seed)", key)
		}
		if err != nil {
			return Config{}, err
		}
	}
	return c, nil
}

func parseProb(key, val string) (float64, error) {
	s, pct := strings.CutSuffix(val, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("fault: %s=%s: not a number", key, val)
	}
	if pct {
		v /= 100
	}
	if !(v >= 0 && v <= 1) { // also rejects NaN
		return 0, fmt.Errorf("fault: %s=%s: probability must be in [0, 1]", key, val)
	}
	return v, nil
}

// String formats c in the syntax Parse accepts, listing only the faults
// that are on (and the seed), e.g. for a report; the zero Config is "".
func (c Config) String() string {
	var parts []string
	add := func(k string, v float64) {
		if v != 0 {
			parts = append(parts, k+"="+strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	add("loss", c.Loss)
	add("dup", c.Dup)
	add("reorder", c.Reorder)
	add("corrupt", c.Corrupt)
	if c.Delay != 0 {
		parts = append(parts, "delay="+c.Delay.String())
	}
	if len(parts) > 0 || c.Seed != 0 {
		parts = append(parts, "seed="+strconv.FormatInt(c.Seed, 10))
	}
	return strings.Join(parts, ",")
}

// Active reports whether c injects any fault, so callers can leave a port
// unwrapped otherwise.
func (c Config) Active() bool {
	return c.Loss > 0 || c.Dup > 0 || c.Reorder > 0 || c.Corrupt > 0 || c.Delay > 0
}

// Stats counts what a Port did to the frames it received.
type Stats struct {
	// Dropped frames were released without being delivered.
	Dropped uint64
	// Duplicated frames were delivered twice.
	Duplicated uint64
	// Reordered frames were held back and delivered after a later one
	// (or, with no later one, after MaxHold).
	Reordered uint64
	// Corrupted frames were delivered with one bit flipped (a corrupted
	// frame that was also duplicated counts twice: both copies fail the
	// receiver's CRC).
	Corrupted uint64
	// Delayed frames were held for Config.Delay before delivery.
	Delayed uint64
}

// Port is a link.Port with faults injected on receive; Wrap makes one.
// Its methods are safe for concurrent use as far as the wrapped port's
// are.
type Port struct {
	inner link.Port
	cfg   Config

	mu      sync.Mutex
	rng     *rand.Rand // decisions: four draws per frame, whatever is on
	bits    *rand.Rand // which bit to flip, so decisions do not depend on it
	q       []queued   // frames to deliver, in order
	held    []queued   // frames held back for reordering
	heldAt  time.Time
	closed  bool
	waiting atomic.Int32 // len(q) + len(held), read by Pending without the lock

	dropped, duplicated, reordered, corrupted, delayed atomic.Uint64
}

type queued struct {
	f   []byte
	due time.Time // zero: deliver at once
}

// Wrap returns p with the faults of c injected on its receive side. The
// result is a *Port (for Stats); Send, Buffer, Release, SetNotify, MAC,
// MTU and Close pass through to p. Wrapping takes over p: use only the
// result afterwards.
func Wrap(p link.Port, c Config) link.Port {
	seed := uint64(c.Seed)
	return &Port{
		inner: p,
		cfg:   c,
		rng:   rand.New(rand.NewPCG(seed, 0x64696d6d6e6574)), // "dimmnet"
		bits:  rand.New(rand.NewPCG(seed, 0x626974666c6970)), // "bitflip"
	}
}

// StatsOf returns the fault counters of p, looking through wrappers that
// have an Unwrap() link.Port method (such as a capture), and false when no
// fault Port is found.
func StatsOf(p link.Port) (Stats, bool) {
	for p != nil {
		if f, ok := p.(*Port); ok {
			return f.Stats(), true
		}
		u, ok := p.(interface{ Unwrap() link.Port })
		if !ok {
			break
		}
		p = u.Unwrap()
	}
	return Stats{}, false
}

// Stats returns the counters so far.
func (p *Port) Stats() Stats {
	return Stats{
		Dropped:    p.dropped.Load(),
		Duplicated: p.duplicated.Load(),
		Reordered:  p.reordered.Load(),
		Corrupted:  p.corrupted.Load(),
		Delayed:    p.delayed.Load(),
	}
}

// Config returns the configuration the port was wrapped with.
func (p *Port) Config() Config { return p.cfg }

// Unwrap returns the wrapped port.
func (p *Port) Unwrap() link.Port { return p.inner }

// NeedsCRC is true: frames may be corrupted, so the device must checksum
// them.
func (p *Port) NeedsCRC() bool { return true }

// Pending reports whether Recv may have a frame: one held or delayed here,
// or one the wrapped port reports waiting (true when it cannot tell). A
// delayed frame keeps it true until delivered, so a polling engine does
// not sleep past the frame's time.
func (p *Port) Pending() bool {
	if p.waiting.Load() > 0 {
		return true
	}
	if r, ok := p.inner.(interface{ Pending() bool }); ok {
		return r.Pending()
	}
	return true
}

// WaitFrame returns at once while a frame is held or delayed here (its
// time comes without a wake-up from the descriptor), and is otherwise
// the wrapped port's (link.FrameWaiter).
func (p *Port) WaitFrame(timeoutNs int64) bool {
	if p.waiting.Load() > 0 {
		return true
	}
	if w := link.FrameWaiterOf(p.inner); w != nil {
		return w.WaitFrame(timeoutNs)
	}
	return false
}

// WaitsFrames is the wrapped port's.
func (p *Port) WaitsFrames() bool { return link.FrameWaiterOf(p.inner) != nil }

// MTU is the wrapped port's.
func (p *Port) MTU() int { return p.inner.MTU() }

// MAC is the wrapped port's.
func (p *Port) MAC() net.HardwareAddr { return p.inner.MAC() }

// Buffer is the wrapped port's.
func (p *Port) Buffer() []byte { return p.inner.Buffer() }

// Send passes the frame to the wrapped port unchanged: faults apply on
// receive.
func (p *Port) Send(frame []byte) error { return p.inner.Send(frame) }

// SendVec sends a frame whose payload lies elsewhere: the faults act on
// the receive side, so sends reach the wrapped port as they would without
// the wrapper, gathered when it can (a lossy run then measures loss, not
// an extra copy: measured 1.7x slower 1 MiB ping-pongs before).
func (p *Port) SendVec(head, payload []byte) error {
	if v, ok := p.inner.(link.VectorSender); ok {
		return v.SendVec(head, payload)
	}
	return p.inner.Send(append(head, payload...)) // head is a Buffer: room for the payload
}

// ShareMemory shares the memory through the wrapped port when it can: its
// frames that refer to a payload still reach this wrapper whole (Recv),
// and the faults act on them as on any other.
func (p *Port) ShareMemory(fd int, off int64, mem []byte) error {
	if s, ok := p.inner.(link.MemorySharer); ok {
		return s.ShareMemory(fd, off, mem)
	}
	return fmt.Errorf("impair: %T shares no memory: %w", p.inner, errors.ErrUnsupported)
}

// Backlog is the wrapped port's transmit backlog, when it keeps one.
func (p *Port) Backlog(dst [6]byte) (queued int, lastSent int64) {
	if b, ok := p.inner.(link.Backlogger); ok {
		return b.Backlog(dst)
	}
	return 0, 0
}

// Release returns a frame from Recv to the wrapped port (duplicates too:
// their buffers come from its Buffer).
func (p *Port) Release(frame []byte) { p.inner.Release(frame) }

// SetNotify installs f on the wrapped port.
func (p *Port) SetNotify(f func()) { p.inner.SetNotify(f) }

// Close releases the frames still held here and closes the wrapped port.
func (p *Port) Close() error {
	p.mu.Lock()
	for _, e := range p.q {
		p.inner.Release(e.f)
	}
	for _, e := range p.held {
		p.inner.Release(e.f)
	}
	p.q, p.held = nil, nil
	p.waiting.Store(0)
	p.closed = true
	p.mu.Unlock()
	return p.inner.Close()
}

// Recv returns the next frame due, or nil. It takes every frame the
// wrapped port has waiting (up to a bound), applies the faults to each and
// queues the survivors, then returns the head of the queue if its delay
// has passed.
func (p *Port) Recv() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	var now time.Time
	timed := p.cfg.Delay > 0 || p.cfg.Reorder > 0
	if timed {
		now = time.Now()
	}
	for len(p.q)+len(p.held) < maxQueue {
		f := p.inner.Recv()
		if f == nil {
			break
		}
		p.admit(f, now)
	}
	if len(p.held) > 0 && now.Sub(p.heldAt) >= MaxHold {
		p.q = append(p.q, p.held...)
		p.held = p.held[:0]
	}
	var f []byte
	if len(p.q) > 0 && (p.q[0].due.IsZero() || !p.q[0].due.After(now)) {
		f = p.q[0].f
		p.q[0] = queued{}
		p.q = p.q[1:]
		if len(p.q) == 0 {
			p.q = p.q[:0:0] // let the backing array go rather than creep forward
		}
	}
	p.waiting.Store(int32(len(p.q) + len(p.held)))
	return f
}

// admit applies the faults to one received frame. The four decisions are
// drawn for every frame whether or not their fault is on, so that the
// frames lost for a seed do not change when, say, Dup is turned on.
func (p *Port) admit(f []byte, now time.Time) {
	c := &p.cfg
	drop := p.rng.Float64() < c.Loss
	corrupt := p.rng.Float64() < c.Corrupt
	dup := p.rng.Float64() < c.Dup
	reorder := p.rng.Float64() < c.Reorder
	if drop {
		p.dropped.Add(1)
		p.inner.Release(f)
		return
	}
	if corrupt && len(f) > ethHeaderLen {
		bit := p.bits.IntN((len(f) - ethHeaderLen) * 8)
		f[ethHeaderLen+bit/8] ^= 1 << (bit % 8)
		p.corrupted.Add(1)
	}
	var due time.Time
	if c.Delay > 0 {
		due = now.Add(c.Delay)
	}
	n := len(p.q)
	p.q = append(p.q, queued{f, due})
	if dup {
		p.q = append(p.q, queued{append(p.inner.Buffer(), f...), due})
		p.duplicated.Add(1)
		if corrupt && len(f) > ethHeaderLen {
			p.corrupted.Add(1) // the copy carries the flipped bit too: one more frame the CRC must catch
		}
	}
	if c.Delay > 0 {
		p.delayed.Add(uint64(len(p.q) - n))
	}
	switch {
	case len(p.held) > 0:
		// This frame overtook the held ones: they follow it.
		p.q = append(p.q, p.held...)
		p.held = p.held[:0]
	case reorder:
		p.held = append(p.held, p.q[n:]...)
		p.q = p.q[:n]
		p.heldAt = now
		p.reordered.Add(1)
	}
}

// KnowsPeer is the wrapped port's answer (false when it cannot tell).
func (p *Port) KnowsPeer(mac [6]byte) bool {
	s := link.VouchesFor(p.inner)
	return s != nil && s.KnowsPeer(mac)
}

// Vouches is whether the wrapped port can tell its senders.
func (p *Port) Vouches() bool { return link.VouchesFor(p.inner) != nil }
