package fmpl

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Collectives (2.7, 3.3, 5.2) run over the zero-copy point-to-point path,
// on matching areas of their own beyond Count, so they never take a tag
// from the program. Every member must call them in the same order. Bcast,
// Reduce and Allreduce are binomial trees; Barrier is a dissemination
// barrier (ceil(log2 p) rounds in which every rank sends and receives). A
// device with hardware multicast would take over the fan-out halves:
// Bcast's tree and Allreduce's release; a barrier on it would become a
// gather and one multicast (two message latencies whatever p). The
// fan-in (Reduce) stays in software because it computes.

// commInfo is one communicator: its world ranks in rank order.
type commInfo struct {
	ranks []int
	me    int // this process's rank in it
}

func (c *commInfo) rankOf(world int) int {
	for i, r := range c.ranks {
		if r == world {
			return i
		}
	}
	return -1
}

func worldComm(size, rank int) *commInfo {
	c := &commInfo{me: rank}
	for r := 0; r < size; r++ {
		c.ranks = append(c.ranks, r)
	}
	return c
}

func (w *World) comm(c Comm) (*commInfo, error) {
	if c < 0 || int(c) >= len(w.comms) || w.comms[c] == nil {
		return nil, fmt.Errorf("communicator %d: %w", c, ErrComm)
	}
	return w.comms[c], nil
}

// CommNull is what CommCreate returns to a rank that joins no group.
const CommNull Comm = -1

// NoKey is the key of a rank that joins no group.
const NoKey = -1

// CommCreate makes communicators out of CommWorld (fmpl_comm_create):
// every rank calls it, and the ranks that give the same key (>= 0) form
// one new communicator, ranked in world order; NoKey joins none. Each
// rank's key and its count of CommCreate calls are gathered and checked
// on every rank, so a key below NoKey or a rank that is at a different
// CommCreate fails everywhere with ErrCommKey and creates nothing.
func (w *World) CommCreate(key int) (Comm, error) {
	if !w.live {
		return CommNull, ErrNotInit
	}
	w.commSeq++
	rec := make([]byte, 16*w.size)
	binary.LittleEndian.PutUint64(rec[16*w.rank:], uint64(int64(key)))
	binary.LittleEndian.PutUint64(rec[16*w.rank+8:], uint64(w.commSeq))
	slot := w.cfg.Count + idxComm
	if w.rank == 0 {
		for r := 1; r < w.size; r++ {
			if _, err := w.recvColl(rec[16*r:16*r+16], r, slot); err != nil {
				return CommNull, fmt.Errorf("comm create: gather from %d: %w", r, err)
			}
		}
	} else if err := w.sendColl(rec[16*w.rank:16*w.rank+16], 0, slot, false); err != nil {
		return CommNull, fmt.Errorf("comm create: gather: %w", err)
	}
	if err := w.bcast(rec, 0, w.comms[CommWorld], slot); err != nil {
		return CommNull, fmt.Errorf("comm create: %w", err)
	}
	keys := make([]int, w.size)
	for r := range keys {
		keys[r] = int(int64(binary.LittleEndian.Uint64(rec[16*r:])))
		seq := int(binary.LittleEndian.Uint64(rec[16*r+8:]))
		if keys[r] < NoKey {
			return CommNull, fmt.Errorf("comm create: rank %d gave key %d: %w", r, keys[r], ErrCommKey)
		}
		if seq != w.commSeq {
			return CommNull, fmt.Errorf("comm create: rank %d is at its call %d, this rank at %d: %w", r, seq, w.commSeq, ErrCommKey)
		}
	}
	// Every rank appends one entry per call, so ids agree everywhere.
	id := Comm(len(w.comms))
	if keys[w.rank] == NoKey {
		w.comms = append(w.comms, nil)
		return CommNull, nil
	}
	c := &commInfo{}
	for r, k := range keys {
		if k == keys[w.rank] {
			if r == w.rank {
				c.me = len(c.ranks)
			}
			c.ranks = append(c.ranks, r)
		}
	}
	w.comms = append(w.comms, c)
	return id, nil
}

// CommSize and CommRank describe a communicator from this rank.
func (w *World) CommSize(c Comm) (int, error) {
	ci, err := w.comm(c)
	if err != nil {
		return 0, err
	}
	return len(ci.ranks), nil
}

// CommRank is this process's rank in c.
func (w *World) CommRank(c Comm) (int, error) {
	ci, err := w.comm(c)
	if err != nil {
		return 0, err
	}
	return ci.me, nil
}

// Stages counts the tree rounds of the last collective on this rank:
// rounds in which it sent or received, per phase. The maximum over the
// ranks is the depth of the tree, ceil(log2 p) per phase.
type Stages struct {
	Up, Down int
}

// LastStages is Stages of the last collective this rank took part in.
func (w *World) LastStages() Stages { return w.stages }

func (w *World) sendColl(buf []byte, r, slot int, poison bool) error {
	if err := w.isend(buf, r, slot, poison); err != nil {
		return err
	}
	return w.isendWait(r, slot, -1)
}

func (w *World) recvColl(buf []byte, r, slot int) (Msg, error) {
	if err := w.irecv(buf, r, slot); err != nil {
		return Msg{}, err
	}
	return w.irecvWait(r, slot)
}

// token is what Barrier's messages carry: its size is all that matters.
var token [8]byte

// Barrier blocks until every rank of comm has called it (fmpl_barrier).
// It is a dissemination barrier: in round k every rank sends to the rank
// 2^k above it and receives from the rank 2^k below (mod p), so after
// ceil(log2 p) rounds each has heard, directly or through others, from
// all. That is ceil(log2 p) message latencies where a fan-in and fan-out
// tree takes twice as many, and no rank idles while the root works. Every
// round's receive is posted on entry: a send waits for its receiver's
// header (sender-side matching), and posting each only when its round
// comes would put a header's trip in front of every round.
func (w *World) Barrier(comm Comm) error {
	if !w.live {
		return ErrNotInit
	}
	c, err := w.comm(comm)
	if err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	if err := w.barrier(c); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	return nil
}

func (w *World) barrier(c *commInfo) error {
	slot := w.cfg.Count + idxBarrier
	p, me := len(c.ranks), c.me
	rounds := 0
	for d := 1; d < p; d <<= 1 {
		rounds++
	}
	from := func(k int) int { return c.ranks[(me-(1<<k)%p+p)%p] }
	to := func(k int) int { return c.ranks[(me+1<<k)%p] }
	posted := 0 // rounds whose receive is still posted: [done, posted)
	done := 0
	fail := func(err error) error { // leave nothing posted for the next call to trip on
		for k := done; k < posted; k++ {
			if w.slots[w.slotOff(from(k), slot)].recv != nil {
				w.dropRecv(from(k), slot)
			}
		}
		return err
	}
	// The sources of the rounds are distinct (2^k mod p differ for
	// 2^k < p), so each round has a matching area of its own.
	for ; posted < rounds; posted++ {
		if err := w.irecv(w.barTok[posted][:], from(posted), slot); err != nil {
			return fail(fmt.Errorf("round %d: %w", posted, err))
		}
	}
	for ; done < rounds; done++ {
		if err := w.sendColl(token[:], to(done), slot, false); err != nil {
			return fail(fmt.Errorf("round %d: %w", done, err))
		}
		if _, err := w.irecvWait(from(done), slot); err != nil {
			done++ // irecvWait dropped its own receive
			return fail(fmt.Errorf("round %d: %w", done-1, err))
		}
	}
	w.stages = Stages{Up: rounds}
	return nil
}

// Bcast copies root's buf into buf on every rank of comm (fmpl_bcast).
// With buf in link memory each hop is zero copy.
func (w *World) Bcast(buf []byte, root int, comm Comm) error {
	if !w.live {
		return ErrNotInit
	}
	c, err := w.comm(comm)
	if err != nil {
		return fmt.Errorf("bcast: %w", err)
	}
	if root < 0 || root >= len(c.ranks) {
		return fmt.Errorf("bcast root %d: %w", root, ErrRank)
	}
	w.stages = Stages{}
	if err := w.bcast(buf, root, c, w.cfg.Count+idxColl); err != nil {
		return fmt.Errorf("bcast: %w", err)
	}
	return nil
}

// bcast is the binomial fan-out from root: a rank receives from the rank
// that differs in its lowest set bit (relative to root), then sends to
// the ranks below that bit.
func (w *World) bcast(buf []byte, root int, c *commInfo, slot int) error {
	p := len(c.ranks)
	vr := (c.me - root + p) % p
	mask := 1
	rounds := 0
	var poisoned error
	for mask < p {
		if vr&mask != 0 {
			src := c.ranks[(vr-mask+root)%p]
			if _, err := w.recvColl(buf, src, slot); err != nil {
				if !errors.Is(err, errPoisoned) {
					return err
				}
				poisoned = err
			}
			rounds++
			break
		}
		mask <<= 1
	}
	mask >>= 1
	for ; mask > 0; mask >>= 1 {
		if vr+mask < p {
			dst := c.ranks[(vr+mask+root)%p]
			if err := w.sendColl(buf, dst, slot, poisoned != nil); err != nil {
				return err
			}
			rounds++
		}
	}
	w.stages.Down = rounds
	return poisoned
}

// fanIn runs the binomial fan-in to root: recvChild for every child in
// round order, then sendParent (not at the root). It returns the rounds.
func (w *World) fanIn(c *commInfo, root, slot int, recvChild func(world int) error, sendParent func(world int) error) (int, error) {
	p := len(c.ranks)
	vr := (c.me - root + p) % p
	rounds := 0
	for mask := 1; mask < p; mask <<= 1 {
		if vr&mask != 0 {
			rounds++
			return rounds, sendParent(c.ranks[(vr-mask+root)%p])
		}
		if vr+mask < p {
			if err := recvChild(c.ranks[(vr+mask+root)%p]); err != nil {
				return rounds, err
			}
			rounds++
		}
	}
	return rounds, nil
}

// Reduce combines buf of every rank of comm element-wise with op into
// root's buf (fmpl_reduce); work is a buffer as large as buf that FMPL
// receives into. Other ranks' buf holds partial results afterwards.
func (w *World) Reduce(buf []byte, count int, op Op, root int, comm Comm, work []byte) error {
	if !w.live {
		return ErrNotInit
	}
	c, err := w.comm(comm)
	if err != nil {
		return fmt.Errorf("reduce: %w", err)
	}
	if root < 0 || root >= len(c.ranks) {
		return fmt.Errorf("reduce root %d: %w", root, ErrRank)
	}
	if err := w.reduce(buf, count, op, root, c, work); err != nil {
		return fmt.Errorf("reduce %s: %w", op.name, err)
	}
	return nil
}

func (w *World) reduce(buf []byte, count int, op Op, root int, c *commInfo, work []byte) error {
	n := count * op.elem
	if count < 0 || op.fn == nil || len(buf) < n || len(work) < n {
		return fmt.Errorf("%d elements of %d bytes, buffer %d, work %d: %w", count, op.elem, len(buf), len(work), ErrCount)
	}
	buf, work = buf[:n], work[:n]
	slot := w.cfg.Count + idxColl
	var bad error // a failed combine here or below: poisons what goes up
	up, err := w.fanIn(c, root, slot, func(child int) error {
		_, err := w.recvColl(work, child, slot)
		if errors.Is(err, errPoisoned) {
			bad = fmt.Errorf("below rank %d: %w", child, ErrUserOp)
			return nil
		}
		if err != nil || bad != nil {
			return err
		}
		bad = op.apply(buf, work)
		return nil
	}, func(parent int) error { return w.sendColl(buf, parent, slot, bad != nil) })
	w.stages = Stages{Up: up}
	if err != nil {
		return err
	}
	return bad
}

// Allreduce is Reduce to rank 0 followed by Bcast, so every rank's buf
// holds the result (fmpl_allreduce). A user function that panics on any
// rank fails the call on every rank with ErrUserOp.
func (w *World) Allreduce(buf []byte, count int, op Op, comm Comm, work []byte) error {
	if !w.live {
		return ErrNotInit
	}
	c, err := w.comm(comm)
	if err != nil {
		return fmt.Errorf("allreduce: %w", err)
	}
	rerr := w.reduce(buf, count, op, 0, c, work)
	if rerr != nil && !errors.Is(rerr, ErrUserOp) {
		return fmt.Errorf("allreduce %s: %w", op.name, rerr)
	}
	up := w.stages.Up
	var berr error
	if c.me == 0 && rerr != nil {
		berr = w.bcastPoisoned(buf[:count*op.elem], c)
	} else {
		berr = w.bcast(buf[:count*op.elem], 0, c, w.cfg.Count+idxColl)
	}
	w.stages.Up = up
	switch {
	case rerr != nil:
		return fmt.Errorf("allreduce %s: %w", op.name, rerr)
	case errors.Is(berr, errPoisoned):
		return fmt.Errorf("allreduce %s: on another rank: %w", op.name, ErrUserOp)
	case berr != nil:
		return fmt.Errorf("allreduce %s: %w", op.name, berr)
	}
	return nil
}

// bcastPoisoned is the root's fan-out of a failed reduction: every
// message is flagged, so every rank fails.
func (w *World) bcastPoisoned(buf []byte, c *commInfo) error {
	p := len(c.ranks)
	mask := 1
	for mask < p {
		mask <<= 1
	}
	rounds := 0
	for mask >>= 1; mask > 0; mask >>= 1 {
		if mask < p {
			if err := w.sendColl(buf, c.ranks[mask], w.cfg.Count+idxColl, true); err != nil {
				return err
			}
			rounds++
		}
	}
	w.stages.Down = rounds
	return nil
}
