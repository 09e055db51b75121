//go:build dimmnet_ofi

package main

import "sort"

// arena hands out link memory for staging copies and rendezvous bodies:
// first fit over a sorted free list, 64-byte granules (the device wants
// 8-byte aligned addresses; whole cache lines keep two copies apart).
type arena struct {
	free_ []span
	inUse uint64
}

type span struct{ at, n uint64 }

const granule = 64

func (a *arena) init(base, n uint64) {
	base = (base + granule - 1) &^ (granule - 1)
	a.free_ = []span{{base, n &^ (granule - 1)}}
}

func (a *arena) alloc(n uint64) (uint64, bool) {
	n = max((n+granule-1)&^(granule-1), granule)
	for i, s := range a.free_ {
		if s.n >= n {
			at := s.at
			if s.n == n {
				a.free_ = append(a.free_[:i], a.free_[i+1:]...)
			} else {
				a.free_[i] = span{s.at + n, s.n - n}
			}
			a.inUse += n
			return at, true
		}
	}
	return 0, false
}

// room is the free bytes in all and the largest free piece.
func (a *arena) room() (total, largest uint64) {
	for _, s := range a.free_ {
		total += s.n
		largest = max(largest, s.n)
	}
	return total, largest
}

func (a *arena) free(at, n uint64) {
	if n == 0 {
		return
	}
	n = max((n+granule-1)&^(granule-1), granule)
	a.inUse -= n
	i := sort.Search(len(a.free_), func(i int) bool { return a.free_[i].at > at })
	a.free_ = append(a.free_, span{})
	copy(a.free_[i+1:], a.free_[i:])
	a.free_[i] = span{at, n}
	// coalesce with the next and the previous span
	if i+1 < len(a.free_) && a.free_[i].at+a.free_[i].n == a.free_[i+1].at {
		a.free_[i].n += a.free_[i+1].n
		a.free_ = append(a.free_[:i+1], a.free_[i+2:]...)
	}
	if i > 0 && a.free_[i-1].at+a.free_[i-1].n == a.free_[i].at {
		a.free_[i-1].n += a.free_[i].n
		a.free_ = append(a.free_[:i], a.free_[i+1:]...)
	}
}
