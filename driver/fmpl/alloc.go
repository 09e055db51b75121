package fmpl

import "slices"

// extent is a piece of link memory handed out by a heap.
type extent struct{ addr, size uint64 }

// heap hands out link memory for the caller's buffers, host-buffer
// copies and the spool: first fit over a sorted free list, 64-byte
// granules, so a buffer never shares a cache line with another.
type heap struct {
	end   uint64
	holes []extent // sorted by address, coalesced
	used  map[uint64]uint64
}

const granule = 64

func newHeap(base, end uint64) heap {
	base = align(base, granule)
	h := heap{end: end, used: map[uint64]uint64{}}
	if base < end {
		h.holes = []extent{{base, (end - base) &^ (granule - 1)}}
	}
	return h
}

func (h *heap) alloc(n uint64) (extent, bool) {
	n = align(max(n, 1), granule)
	for i, f := range h.holes {
		if f.size < n {
			continue
		}
		e := extent{f.addr, n}
		if f.size == n {
			h.holes = slices.Delete(h.holes, i, i+1)
		} else {
			h.holes[i] = extent{f.addr + n, f.size - n}
		}
		h.used[e.addr] = n
		return e, true
	}
	return extent{}, false
}

// free returns the extent at addr; false if nothing was allocated there.
func (h *heap) free(addr uint64) bool {
	n, ok := h.used[addr]
	if !ok {
		return false
	}
	delete(h.used, addr)
	i, _ := slices.BinarySearchFunc(h.holes, addr, func(e extent, a uint64) int {
		switch {
		case e.addr < a:
			return -1
		case e.addr > a:
			return 1
		}
		return 0
	})
	h.holes = slices.Insert(h.holes, i, extent{addr, n})
	if i+1 < len(h.holes) && h.holes[i].addr+h.holes[i].size == h.holes[i+1].addr {
		h.holes[i].size += h.holes[i+1].size
		h.holes = slices.Delete(h.holes, i+1, i+2)
	}
	if i > 0 && h.holes[i-1].addr+h.holes[i-1].size == h.holes[i].addr {
		h.holes[i-1].size += h.holes[i].size
		h.holes = slices.Delete(h.holes, i, i+1)
	}
	return true
}

func (h *heap) largest() uint64 {
	var m uint64
	for _, f := range h.holes {
		m = max(m, f.size)
	}
	return m
}
