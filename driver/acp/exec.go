package acp

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// doCopy runs a copy on this rank: locally, by PUSH when this rank owns
// the source, by PULL when it owns the destination. A copy this rank owns
// neither side of goes to the source's owner (see pushCopy), one whose
// remote destination is not 8-byte aligned (the device writes aligned
// ranges only) to the destination's owner; the END of the rank that
// knows the bytes landed completes handle. fin runs when this rank's
// part is done.
func (st *station) doCopy(dst, src GA, n uint64, parent int, handle uint64, fin func(error)) {
	c := st.c
	me := st.rank
	dr, _, dseg, doff := c.split.Parts(dst)
	sr, _, sseg, soff := c.split.Parts(src)
	if n == 0 {
		fin(nil)
		return
	}
	delegate := func() {
		st.send(dr, msg{typ: msgCopy, parent: uint32(me), handle: handle, dst: uint64(dst), src: uint64(src), a: n},
			func(err error) {
				if err != nil {
					st.onEnd(int64(handle), err, 0)
				}
			})
	}
	switch {
	case dr != me && sr != me:
		st.send(sr, msg{typ: msgCopy, parent: uint32(me), handle: handle, dst: uint64(dst), src: uint64(src), a: n},
			func(err error) {
				if err != nil {
					st.onEnd(int64(handle), err, 0)
				}
			})
	case dr == me && sr == me:
		da, _, err := c.local(dst, n)
		if err != nil {
			fin(err)
			return
		}
		sa, _, err := c.local(src, n)
		if err != nil {
			fin(err)
			return
		}
		copy(c.lm[da:da+n], c.lm[sa:sa+n])
		fin(nil)
	case sr == me:
		sa, _, err := c.local(src, n)
		if err != nil {
			fin(err)
			return
		}
		st.resolve(dr, dseg, doff, n, func(ra uint64, err error) {
			switch {
			case err != nil:
				fin(err)
			case ra%8 != 0:
				delegate()
			case sa%8 == 0:
				st.post(uapi.Desc{Opcode: uapi.OpPUSH, DstNode: st.rankNode[dr], Length: uint32(n), LocalAddr: sa, RemoteAddr: ra}, fin)
			default:
				st.pushBounced(st.rankNode[dr], sa, ra, n, fin)
			}
		})
	default:
		da, _, err := c.local(dst, n)
		if err != nil {
			fin(err)
			return
		}
		st.resolve(sr, sseg, soff, n, func(ra uint64, err error) {
			switch {
			case err != nil:
				fin(err)
			case ra%8 == 0 && da%8 == 0:
				st.post(uapi.Desc{Opcode: uapi.OpPULL, DstNode: st.rankNode[sr], Length: uint32(n), LocalAddr: da, RemoteAddr: ra}, fin)
			default:
				st.pullBounced(st.rankNode[sr], da, ra, n, fin)
			}
		})
	}
}

// pushCopy is the source owner's part of a third-party copy: it PUSHes
// the bytes to the destination and, right behind them on the same
// session, a LANDED message, and the destination's owner sends the
// parent END when LANDED arrives. Its device places a node's packets in
// sequence (only middle packets of a PUSH may go early, and LANDED, an
// IPUSH, is placed only once every packet before it was), so LANDED
// proves the bytes landed: three one-way hops (COPY, data with LANDED,
// END) where the destination owner's PULL took four, and no step waits
// for an acknowledgement. A destination not 8-byte aligned goes on to
// its owner, which PULLs and sends END; a source not aligned goes
// through the bounce buffer and, as every chunk's PUSH was acknowledged,
// this rank sends END itself. Up to inlineMax bytes travel inside one
// DATA message instead, at any alignment: one IPUSH in place of a PUSH
// and an IPUSH, no lookup of the destination's segment, and the
// destination's owner, which checks the range against its own table,
// stores them and sends END.
func (st *station) pushCopy(dst, src GA, n uint64, parent int, handle uint64) {
	c := st.c
	dr, _, dseg, doff := c.split.Parts(dst)
	end := func(err error) { st.reply(parent, handle, err, 0) }
	sa, _, err := c.local(src, n)
	if err != nil {
		end(err)
		return
	}
	if n <= inlineMax {
		m := msg{typ: msgData, parent: uint32(parent), handle: handle, dst: uint64(dst)}
		m.inline(c.lm[sa : sa+n])
		st.send(dr, m, func(err error) {
			if err != nil {
				end(err)
			}
		})
		return
	}
	st.resolve(dr, dseg, doff, n, func(ra uint64, err error) {
		switch {
		case err != nil:
			end(err)
		case ra%8 != 0:
			st.send(dr, msg{typ: msgCopy, parent: uint32(parent), handle: handle, dst: uint64(dst), src: uint64(src), a: n},
				func(err error) {
					if err != nil {
						end(err)
					}
				})
		case sa%8 != 0:
			st.pushBounced(st.rankNode[dr], sa, ra, n, end)
		default:
			// Both complete in posting order (one destination): the
			// PUSH's outcome is known when LANDED's callback runs. A
			// resolved range lies in the destination's window, so its
			// device never refuses the PUSH; what fails it (the peer
			// unreachable) fails LANDED queued behind it too, and this
			// rank sends the END then.
			var pushErr error
			st.post(uapi.Desc{Opcode: uapi.OpPUSH, DstNode: st.rankNode[dr], Length: uint32(n), LocalAddr: sa, RemoteAddr: ra},
				func(err error) { pushErr = err })
			if pushErr != nil {
				// Failed before it left (post calls back at once): no
				// LANDED, whose END would report the copy done.
				end(pushErr)
				return
			}
			st.send(dr, msg{typ: msgLanded, parent: uint32(parent), handle: handle}, func(err error) {
				if err = errors.Join(pushErr, err); err != nil {
					end(err)
				}
			})
		}
	})
}

// withBounce runs f once the bounce buffer is free; f calls release.
func (st *station) withBounce(f func(release func())) {
	if st.bounceBusy {
		st.bounceWait = append(st.bounceWait, func() { st.withBounce(f) })
		return
	}
	st.bounceBusy = true
	f(func() {
		st.bounceBusy = false
		if len(st.bounceWait) > 0 {
			w := st.bounceWait[0]
			st.bounceWait = st.bounceWait[1:]
			w()
		}
	})
}

// pushBounced PUSHes from a misaligned local address through the bounce
// buffer, a chunk at a time (the remote address is aligned).
func (st *station) pushBounced(node uint16, la, ra, n uint64, fin func(error)) {
	c := st.c
	chunk := uint64(c.o.Bounce)
	st.withBounce(func(release func()) {
		var step func(done uint64)
		step = func(done uint64) {
			if done == n {
				release()
				fin(nil)
				return
			}
			k := min(n-done, chunk)
			copy(c.lm[c.bounceBase:c.bounceBase+k], c.lm[la+done:la+done+k])
			st.post(uapi.Desc{Opcode: uapi.OpPUSH, DstNode: node, Length: uint32(k), LocalAddr: c.bounceBase, RemoteAddr: ra + done},
				func(err error) {
					if err != nil {
						release()
						fin(err)
						return
					}
					step(done + k)
				})
		}
		step(0)
	})
}

// pullBounced PULLs a misaligned remote range (or into a misaligned local
// one) through the bounce buffer: it reads from the aligned word below
// and copies the part asked for.
func (st *station) pullBounced(node uint16, la, ra, n uint64, fin func(error)) {
	c := st.c
	chunk := uint64(c.o.Bounce) - 8
	st.withBounce(func(release func()) {
		var step func(done uint64)
		step = func(done uint64) {
			if done == n {
				release()
				fin(nil)
				return
			}
			k := min(n-done, chunk)
			from := ra + done
			delta := from % 8
			st.post(uapi.Desc{Opcode: uapi.OpPULL, DstNode: node, Length: uint32(delta + k), LocalAddr: c.bounceBase, RemoteAddr: from - delta},
				func(err error) {
					if err != nil {
						release()
						fin(err)
						return
					}
					copy(c.lm[la+done:la+done+k], c.lm[c.bounceBase+delta:c.bounceBase+delta+k])
					step(done + k)
				})
		}
		step(0)
	})
}

// resolve finds the link address of [off, off+n) in segment seg of rank:
// this rank's from its table, a peer's from the cache or else by PULLing
// the entry of the peer's registration table (the owner's table is the
// truth: a range it does not hold fails ErrUnregistered, nothing moved).
func (st *station) resolve(rank, seg int, off, n uint64, fn func(uint64, error)) {
	c := st.c
	if rank == st.rank {
		a, _, err := c.local(c.split.GA(rank, 0, seg, off), n)
		fn(a, err)
		return
	}
	if rank >= len(st.rankNode) || st.rankNode[rank] == 0 {
		fn(0, fmt.Errorf("segment %d of rank %d: %w", seg, rank, ErrRank))
		return
	}
	key := uint64(rank)<<maxSegBits | uint64(seg)
	if e, ok := st.cache[key]; ok && off < e.size && n <= e.size-off {
		fn(e.base+off, nil)
		return
	}
	check := func(e segEnt, err error) {
		if err == nil && (off >= e.size || n > e.size-off) {
			err = fmt.Errorf("%d bytes at offset %d of rank %d's %d-byte segment %d: %w", n, off, rank, e.size, seg, ErrUnregistered)
		}
		fn(e.base+off, err)
	}
	if w, ok := st.resolving[key]; ok {
		st.resolving[key] = append(w, check)
		return
	}
	st.resolving[key] = []func(segEnt, error){check}
	st.fetchSeg(rank, seg, key)
}

func (st *station) fetchSeg(rank, seg int, key uint64) {
	c := st.c
	if len(st.resFree) == 0 {
		st.resWait = append(st.resWait, func() { st.fetchSeg(rank, seg, key) })
		return
	}
	slot := st.resFree[len(st.resFree)-1]
	st.resFree = st.resFree[:len(st.resFree)-1]
	la := c.resolveBase + slot*tableEntry
	atomic.AddUint64(&st.stats.Resolves, 1)
	st.post(uapi.Desc{Opcode: uapi.OpPULL, DstNode: st.rankNode[rank], Length: tableEntry, LocalAddr: la,
		RemoteAddr: c.tableBase + uint64(seg)*tableEntry}, func(err error) {
		w0, w1 := c.reg.Load64At(c.lmOff+la), c.reg.Load64At(c.lmOff+la+8) // the device wrote them
		st.resFree = append(st.resFree, slot)
		var e segEnt
		switch {
		case err != nil:
		case w1>>63 == 0:
			err = fmt.Errorf("rank %d has no segment %d: %w", rank, seg, ErrUnregistered)
		default:
			e = segEnt{base: w0, size: w1 & (1<<40 - 1)}
			st.cache[key] = e
		}
		fns := st.resolving[key]
		delete(st.resolving, key)
		for _, f := range fns {
			f(e, err)
		}
		if len(st.resWait) > 0 {
			w := st.resWait[0]
			st.resWait = st.resWait[1:]
			w()
		}
	})
}

// startAtomic sends an atomic to the source word's owner (the paper's
// delegation), or runs it here when that is this rank.
func (st *station) startAtomic(h int64, m cmd) {
	sr, _, _, _ := st.c.split.Parts(m.src)
	dr, _, _, _ := st.c.split.Parts(m.dst)
	if sr == st.rank {
		st.execAtomic(st.rank, uint64(h), m.op, m.width, m.dst, m.src, m.a, m.b)
		return
	}
	if dr == st.rank && m.width == 8 && (m.op == aopAdd || m.op == aopCAS) && st.c.devAtomics.Load() {
		st.deviceAtomic(h, m, sr)
		return
	}
	if dr == st.rank {
		st.atomicDst[h] = atomicDst{m.dst, m.width}
	}
	st.send(sr, msg{typ: msgAtomic, op: m.op, width: m.width, parent: uint32(st.rank), handle: uint64(h),
		dst: uint64(m.dst), src: uint64(m.src), a: m.a, b: m.b}, func(err error) {
		if err != nil {
			st.onEnd(h, err, 0)
		}
	})
}

// deviceAtomic has the source word's device perform a fetch-add or CAS
// (ABI 6's FADD8, CAS8), the old value landing in the caller's dst.
func (st *station) deviceAtomic(h int64, m cmd, sr int) {
	c := st.c
	da, _, err := c.local(m.dst, 8)
	if err == nil && da%8 != 0 {
		err = fmt.Errorf("result word at link address %#x: %w", da, ErrAlign)
	}
	if err != nil {
		st.complete(h, err)
		return
	}
	_, _, seg, off := c.split.Parts(m.src)
	st.resolve(sr, seg, off, 8, func(ra uint64, err error) {
		if err == nil && ra%8 != 0 {
			err = fmt.Errorf("atomic8 at rank %d's link address %#x: %w", sr, ra, ErrAlign)
		}
		if err != nil {
			st.complete(h, err)
			return
		}
		atomic.AddUint64(&st.stats.DeviceAtomics, 1)
		op := uapi.OpFADD8
		if m.op == aopCAS {
			op = uapi.OpCAS8
		}
		st.post(uapi.Desc{Opcode: op, DstNode: st.rankNode[sr], Length: 8, LocalAddr: da, RemoteAddr: ra, Operand: m.a, Imm: m.b},
			func(err error) { st.complete(h, err) })
	})
}

// execAtomic is the delegate station's atomic on this rank's word at src;
// the old value goes to dst: stored here, returned in the END when the
// parent owns dst, or PUT to a third rank, which sends the END.
func (st *station) execAtomic(parent int, handle uint64, op, width uint8, dst, src GA, a, b uint64) {
	c := st.c
	sa, _, err := c.local(src, uint64(width))
	if err == nil && sa%uint64(width) != 0 {
		err = fmt.Errorf("atomic%d at link address %#x: %w", width, sa, ErrAlign)
	}
	if err != nil {
		st.reply(parent, handle, err, 0)
		return
	}
	old := c.atomicLocal(sa, op, width, a, b)
	dr, _, _, _ := c.split.Parts(dst)
	switch {
	case dr == st.rank:
		st.reply(parent, handle, st.storeLocal(dst, width, old), 0)
	case dr == parent:
		st.reply(parent, handle, nil, old)
	default:
		st.send(dr, msg{typ: msgPut, width: width, parent: uint32(parent), handle: handle, dst: uint64(dst), a: old},
			func(err error) {
				if err != nil {
					st.reply(parent, handle, err, 0)
				}
			})
	}
}

// storeBytes stores a DATA message's bytes into this rank's memory at g.
func (st *station) storeBytes(g GA, p []byte) error {
	a, _, err := st.c.local(g, uint64(len(p)))
	if err != nil {
		return err
	}
	copy(st.c.lm[a:], p)
	return nil
}

// storeLocal stores an atomic's result into this rank's word at g.
func (st *station) storeLocal(g GA, width uint8, v uint64) error {
	c := st.c
	a, _, err := c.local(g, uint64(width))
	if err != nil {
		return err
	}
	if a%uint64(width) != 0 {
		return fmt.Errorf("result word at link address %#x: %w", a, ErrAlign)
	}
	if width == 4 {
		atomic.StoreUint32((*uint32)(c.word(a)), uint32(v))
	} else {
		atomic.StoreUint64((*uint64)(c.word(a)), v)
	}
	return nil
}

// atomicLocal performs op on the aligned word at link address a and
// returns its old value. Every atomic on a rank's words runs on its
// communication goroutine, and with sync/atomic, so callers of Go code on
// the same words see them atomic too.
func (c *ACP) atomicLocal(a uint64, op, width uint8, x, y uint64) uint64 {
	if width == 4 {
		p := (*uint32)(c.word(a))
		v, w := uint32(x), uint32(y)
		switch op {
		case aopCAS:
			for {
				old := atomic.LoadUint32(p)
				if old != v || atomic.CompareAndSwapUint32(p, old, w) {
					return uint64(old)
				}
			}
		case aopSwap:
			return uint64(atomic.SwapUint32(p, v))
		case aopAdd:
			return uint64(atomic.AddUint32(p, v) - v)
		case aopAnd:
			return uint64(atomic.AndUint32(p, v))
		case aopOr:
			return uint64(atomic.OrUint32(p, v))
		}
		for {
			old := atomic.LoadUint32(p)
			if atomic.CompareAndSwapUint32(p, old, old^v) {
				return uint64(old)
			}
		}
	}
	p := (*uint64)(c.word(a))
	switch op {
	case aopCAS:
		for {
			old := atomic.LoadUint64(p)
			if old != x || atomic.CompareAndSwapUint64(p, old, y) {
				return old
			}
		}
	case aopSwap:
		return atomic.SwapUint64(p, x)
	case aopAdd:
		return atomic.AddUint64(p, x) - x
	case aopAnd:
		return atomic.AndUint64(p, x)
	case aopOr:
		return atomic.OrUint64(p, x)
	}
	for {
		old := atomic.LoadUint64(p)
		if atomic.CompareAndSwapUint64(p, old, old^x) {
			return old
		}
	}
}

// syncStart begins Sync number syncSeq+1: every rank reports to rank 0,
// which releases all once it has heard from each.
func (st *station) syncStart(fin func()) {
	st.syncSeq++
	n := st.syncSeq
	st.syncFin[n] = fin
	if st.rank == 0 {
		st.checkSync(n)
		return
	}
	st.send(0, msg{typ: msgSync, seq: n}, func(err error) { st.fail(err) })
}

func (st *station) checkSync(n uint32) {
	if st.rank != 0 {
		return
	}
	fin, ok := st.syncFin[n]
	if !ok || st.arrivals[n] < st.c.o.Procs-1 {
		return
	}
	delete(st.syncFin, n)
	delete(st.arrivals, n)
	for r := 1; r < st.c.o.Procs; r++ {
		st.send(r, msg{typ: msgRelease, seq: n}, func(err error) { st.fail(err) })
	}
	fin()
}

// reset is Reset's local part, between the Sync of the old ranks and the
// hellos of the new: registrations go, the starter memory is zeroed, the
// peers' segments are forgotten and messages of the old epoch dropped.
func (st *station) reset(rank int) {
	c := st.c
	c.regMu.Lock()
	for i := 2; i < len(c.segs); i++ {
		if c.segs[i].refs != 0 {
			c.segs[i].refs = 0
			c.publishSeg(i)
		}
	}
	c.merges = 0
	clear(c.lm[c.starterBase : c.starterBase+uint64(c.o.StarterSize)])
	c.regMu.Unlock()
	clear(st.cache)
	st.epoch++
	st.rank = rank
	c.rank.Store(int32(rank))
	clear(st.heard)
}

// layout is what every rank's hello must agree on: how GAs split and
// where the starter memory and the registration table lie.
func (c *ACP) layout() uint64 {
	s := c.split
	return uint64(c.o.StarterSize)<<40 | uint64(s.OffBits)<<34 | uint64(s.SegBits)<<30 | c.tableBase&(1<<30-1)
}

// helloStart sends this rank's hello to every node of the job, again
// while a peer has not laid out its ring (its device refuses the IPUSH),
// and finishes once every peer's hello came and every one of ours landed.
func (st *station) helloStart(fin func(error)) {
	c := st.c
	n := len(c.o.Nodes)
	st.hello = &helloState{fin: fin, acked: make([]bool, n), retryAt: make([]int64, n),
		deadline: monotime.Now() + int64(c.o.InitTimeout)}
	st.rankNode = make([]uint16, c.o.Procs)
	for i, node := range c.o.Nodes {
		if node == c.d.Node() {
			st.hello.acked[i] = true
			continue
		}
		st.sendHello(i)
	}
	future := st.future
	st.future = nil
	for _, f := range future {
		st.handle(f.m, f.node)
	}
	st.checkHello()
}

func (st *station) sendHello(i int) {
	h := st.hello
	st.sendNode(st.c.o.Nodes[i], msg{typ: msgHello, seq: uint32(st.rank), layout: st.c.layout()}, func(err error) {
		if st.hello != h {
			return
		}
		// Refused (the peer has no ring yet): again in 1 ms. Placed: again
		// in 5 ms unless its answer comes, as a peer ending its previous
		// life drops hellos unanswered.
		h.retryAt[i] = monotime.Now() + 1_000_000
		if err == nil {
			h.retryAt[i] += 4_000_000
		}
	})
}

// onHelloOK notes that node heard our hello.
func (st *station) onHelloOK(node uint16) {
	h := st.hello
	if h == nil {
		return
	}
	for i, n := range st.c.o.Nodes {
		if n == node && !h.acked[i] {
			h.acked[i] = true
			h.retryAt[i] = 0
		}
	}
	st.checkHello()
}

func (st *station) helloTick() {
	h := st.hello
	now := monotime.Now()
	if now > h.deadline {
		st.hello = nil
		h.fin(fmt.Errorf("%d of %d peers heard: %w", len(st.heard), len(st.c.o.Nodes)-1, ErrInitTimeout))
		return
	}
	for i, t := range h.retryAt {
		if t != 0 && now >= t && !h.acked[i] {
			h.retryAt[i] = 0
			st.sendHello(i)
		}
	}
}

func (st *station) onHello(m msg, node uint16) {
	c := st.c
	if m.layout != c.layout() {
		if st.hello != nil && st.hello.bad == nil {
			st.hello.bad = fmt.Errorf("node %d's layout %#x differs from ours %#x: %w", node, m.layout, c.layout(), ErrConfig)
		}
	}
	st.heard[node] = int(m.seq)
	if st.hello != nil {
		st.checkHello()
	}
}

func (st *station) checkHello() {
	h := st.hello
	c := st.c
	if h == nil || len(st.heard) < len(c.o.Nodes)-1 {
		return
	}
	for _, a := range h.acked {
		if !a {
			return
		}
	}
	st.hello = nil
	err := h.bad
	st.rankNode[st.rank] = c.d.Node()
	for node, r := range st.heard {
		if r >= c.o.Procs || r == st.rank || st.rankNode[r] != 0 {
			err = fmt.Errorf("node %d claims rank %d, taken or out of range: %w", node, r, ErrConfig)
			continue
		}
		st.rankNode[r] = node
	}
	h.fin(err)
}
