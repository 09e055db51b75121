package acp

import (
	"fmt"
	"sort"
	"unsafe"
)

// Memory a rank registers must lie where its device reaches: link
// memory. Malloc hands out such memory (acp_malloc's role in ACP's
// middle layer); RegisterMemory refuses anything else with ErrNotLinkMem.

// Malloc returns n bytes of this rank's link memory, 64-byte aligned,
// for RegisterMemory. Finalize and Reset do not free it; Free does.
func (c *ACP) Malloc(n int) ([]byte, error) {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	a, ok := c.heap.alloc(uint64(n))
	if !ok {
		return nil, fmt.Errorf("acp malloc %d bytes: %w", n, ErrNoMemory)
	}
	return c.lm[a : a+uint64(n) : a+uint64(n)], nil
}

// Free returns memory Malloc gave.
func (c *ACP) Free(b []byte) error {
	a, ok := c.linkAddr(b)
	if !ok {
		return fmt.Errorf("acp free: %w", ErrNotLinkMem)
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if !c.heap.free(a) {
		return fmt.Errorf("acp free at %#x: not from Malloc: %w", a, ErrNotLinkMem)
	}
	return nil
}

// linkAddr is the link address of b's first byte, if b lies in link memory.
func (c *ACP) linkAddr(b []byte) (uint64, bool) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	base := uintptr(unsafe.Pointer(unsafe.SliceData(c.lm)))
	if p < base || p-base+uintptr(len(b)) > uintptr(len(c.lm)) {
		return 0, false
	}
	return uint64(p - base), true
}

// RegisterMemory makes buf part of the global memory with the given
// color and returns its address translation key (acp_register_memory).
// buf must lie in this rank's link memory above the library's own areas
// (from Malloc, or the starter memory). A registration of the same range,
// or of a range that starts where a registration of the same color ends,
// is merged into it: the key is the old one, its count goes up (Merges
// counts the adjacent case), and UnregisterMemory must be called once per
// registration. Registrations are not announced: a peer learns a segment
// from its owner's table the first time it uses an address in it.
func (c *ACP) RegisterMemory(buf []byte, color int) (Key, error) {
	if !c.live.Load() {
		return KeyNull, ErrNotInit
	}
	if color < 0 || color >= c.Colors() {
		return KeyNull, fmt.Errorf("acp register memory: color %d of %d: %w", color, c.Colors(), ErrColor)
	}
	a, ok := c.linkAddr(buf)
	if !ok || a < c.starterBase || len(buf) == 0 {
		return KeyNull, fmt.Errorf("acp register memory of %d bytes: %w", len(buf), ErrNotLinkMem)
	}
	n := uint64(len(buf))
	c.regMu.Lock()
	defer c.regMu.Unlock()
	for i := 2; i < len(c.segs); i++ {
		s := &c.segs[i]
		if s.refs == 0 || s.color != color {
			continue
		}
		if s.base == a && s.size == n {
			s.refs++
			return c.key(i), nil
		}
		if s.base+s.size == a {
			s.size += n
			s.refs++
			c.merges++
			c.publishSeg(i)
			return c.key(i), nil
		}
	}
	// Take free entries round robin, so an entry a peer may still have
	// cached is reused as late as possible.
	for k := 1; k < len(c.segs); k++ {
		i := (c.segRR+k-1)%(len(c.segs)-2) + 2
		if c.segs[i].refs == 0 {
			c.segs[i] = segment{base: a, size: n, color: color, refs: 1}
			c.segRR = i
			c.publishSeg(i)
			return c.key(i), nil
		}
	}
	return KeyNull, fmt.Errorf("acp register memory: all %d segments in use: %w", len(c.segs)-2, ErrNoMemory)
}

func (c *ACP) key(seg int) Key {
	return Key(c.split.GA(c.Rank(), c.segs[seg].color, seg, 0))
}

// publishSeg writes entry seg of the registration table in link memory,
// where peers read it with PULL: the base, then size|color|valid last.
func (c *ACP) publishSeg(seg int) {
	s := c.segs[seg]
	e := c.lmOff + c.tableBase + uint64(seg)*tableEntry
	if s.refs == 0 {
		c.reg.Store64At(e+8, 0)
		return
	}
	c.reg.Store64At(e, s.base)
	c.reg.Store64At(e+8, s.size&(1<<40-1)|uint64(s.color)<<40|1<<63)
}

// UnregisterMemory undoes one RegisterMemory of key (acp_unregister_memory);
// the segment goes once every registration merged into it is undone.
func (c *ACP) UnregisterMemory(k Key) error {
	rank, _, seg, off := c.split.Parts(GA(k))
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if rank != c.Rank() || off != 0 || seg < 2 || seg >= len(c.segs) || c.segs[seg].refs == 0 {
		return fmt.Errorf("acp unregister memory %#x: %w", uint64(k), ErrKey)
	}
	c.segs[seg].refs--
	if c.segs[seg].refs == 0 {
		c.publishSeg(seg)
	}
	return nil
}

// Merges counts registrations merged into an adjacent one.
func (c *ACP) Merges() int {
	c.regMu.RLock()
	defer c.regMu.RUnlock()
	return c.merges
}

// QueryGA translates p, which must lie in the registration of key, to a
// global address (acp_query_ga).
func (c *ACP) QueryGA(k Key, p []byte) (GA, error) {
	rank, _, seg, off := c.split.Parts(GA(k))
	a, ok := c.linkAddr(p)
	c.regMu.RLock()
	defer c.regMu.RUnlock()
	if rank != c.Rank() || off != 0 || seg < 1 || seg >= len(c.segs) || c.segs[seg].refs == 0 {
		return GANull, fmt.Errorf("acp query ga of key %#x: %w", uint64(k), ErrKey)
	}
	s := c.segs[seg]
	if !ok || a < s.base || a-s.base+uint64(len(p)) > s.size {
		return GANull, fmt.Errorf("acp query ga: memory outside key %#x: %w", uint64(k), ErrUnregistered)
	}
	return GA(uint64(k) | (a - s.base)), nil
}

// QueryAddress is the memory at g to its segment's end, if g is this
// rank's (acp_query_address).
func (c *ACP) QueryAddress(g GA) ([]byte, error) {
	a, n, err := c.local(g, 0)
	if err != nil {
		return nil, fmt.Errorf("acp query address: %w", err)
	}
	return c.lm[a : a+n : a+n], nil
}

// QueryRank is the rank g belongs to (acp_query_rank), -1 for GANull.
func (c *ACP) QueryRank(g GA) int {
	if g == GANull {
		return -1
	}
	r, _, _, _ := c.split.Parts(g)
	return r
}

// QueryColor is g's color (acp_query_color), -1 for GANull.
func (c *ACP) QueryColor(g GA) int {
	if g == GANull {
		return -1
	}
	_, col, _, _ := c.split.Parts(g)
	return col
}

// StarterGA is the global address of rank's starter memory
// (acp_query_starter_ga), GANull for a rank out of range.
func (c *ACP) StarterGA(rank int) GA {
	if rank < 0 || rank >= c.o.Procs {
		return GANull
	}
	return c.split.GA(rank, 0, 1, 0)
}

// local checks that [g, g+n) is registered here and returns its link
// address and, for n 0, the bytes to the segment's end.
func (c *ACP) local(g GA, n uint64) (addr, left uint64, err error) {
	rank, _, seg, off := c.split.Parts(g)
	if rank >= c.o.Procs {
		return 0, 0, fmt.Errorf("address %#x of rank %d: %w", uint64(g), rank, ErrRank)
	}
	if rank != c.Rank() {
		return 0, 0, fmt.Errorf("address %#x is rank %d's, this is rank %d: %w", uint64(g), rank, c.Rank(), ErrUnregistered)
	}
	c.regMu.RLock()
	defer c.regMu.RUnlock()
	if seg == 0 || seg >= len(c.segs) || c.segs[seg].refs == 0 {
		return 0, 0, fmt.Errorf("address %#x: segment %d: %w", uint64(g), seg, ErrUnregistered)
	}
	s := c.segs[seg]
	if off >= s.size || n > s.size-off { // not off+n: a peer's n may wrap it
		return 0, 0, fmt.Errorf("address %#x: %d bytes at offset %d of a %d-byte segment: %w", uint64(g), n, off, s.size, ErrUnregistered)
	}
	return s.base + off, s.size - off, nil
}

// heap is a first-fit allocator of link memory.
type heap struct {
	holes []extent // sorted by address
	inUse map[uint64]uint64
}

type extent struct{ addr, size uint64 }

func newHeap(lo, hi uint64) heap {
	return heap{holes: []extent{{lo, hi - lo}}, inUse: map[uint64]uint64{}}
}

func (h *heap) alloc(n uint64) (uint64, bool) {
	n = alignUp(max(n, 1), 64)
	for i, e := range h.holes {
		if e.size >= n {
			h.holes[i] = extent{e.addr + n, e.size - n}
			if h.holes[i].size == 0 {
				h.holes = append(h.holes[:i], h.holes[i+1:]...)
			}
			h.inUse[e.addr] = n
			return e.addr, true
		}
	}
	return 0, false
}

func (h *heap) free(a uint64) bool {
	n, ok := h.inUse[a]
	if !ok {
		return false
	}
	delete(h.inUse, a)
	h.holes = append(h.holes, extent{a, n})
	sort.Slice(h.holes, func(i, j int) bool { return h.holes[i].addr < h.holes[j].addr })
	out := h.holes[:1]
	for _, e := range h.holes[1:] {
		if l := &out[len(out)-1]; l.addr+l.size == e.addr {
			l.size += e.size
		} else {
			out = append(out, e)
		}
	}
	h.holes = out
	return true
}
