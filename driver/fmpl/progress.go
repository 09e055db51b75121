package fmpl

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// errWaitTimeout is waitFor's deadline passing: SendBufSet's switch to the
// spool, never returned to a caller.
var errWaitTimeout = errors.New("fmpl: wait timed out")

// Any-source immediates: hello bit, communicator, index, size.
const (
	immHello     = 1 << 63
	immCommShift = 52
	immCommMask  = 1<<11 - 1
	immIdxShift  = 32
	immIdxMask   = 1<<20 - 1
)

// progress consumes every status the device has published and acts on
// it, then performs the sends whose headers came. It never waits.
func (w *World) progress() {
	for len(w.backlog) > 0 {
		s := w.backlog[0]
		w.backlog = w.backlog[1:]
		w.dispatch(&s)
	}
	for {
		s, ok := w.d.Poll()
		if !ok {
			break
		}
		w.dispatch(&s)
	}
	w.performReady()
	w.spool.reclaim(w)
}

// dispatch acts on one status.
func (w *World) dispatch(s *uapi.Status) {
	switch s.Type {
	case uapi.StDone:
		r := int(s.Cookie >> 32 & 0xffffff)
		if r >= w.size {
			return
		}
		p := &w.peers[r]
		p.done = max(p.done, s.End+1)
		switch s.Cookie >> 56 {
		case ckProbe:
			p.probing = false
		case ckHello:
			w.helloAcked[r] = true
		}
	case uapi.StError:
		r := int(s.Cookie >> 32 & 0xffffff)
		if r >= w.size {
			return
		}
		p := &w.peers[r]
		p.done = max(p.done, s.End+1)
		kind := s.Cookie >> 56
		if kind == ckHello {
			if w.helloPending && !w.helloAfter[r] {
				w.helloRetry[r] = true // the peer is not there yet: Init tries again
			}
			return // a hello after the peer's own is not needed: the peer may have finished and gone
		}
		if s.Err == uapi.EUnreachable {
			if p.dead == nil {
				p.dead = fmt.Errorf("rank %d (node %d) unreachable: %w", r, p.node, ErrPeerDead)
			}
			return
		}
		w.errs = append(w.errs, fmt.Errorf("%v to rank %d: %v: %w", s.Opcode, r, s.Err, ErrDevice))
	case uapi.StPUSH:
		switch {
		case s.Addr >= w.match && s.Addr < w.match+MatchBytes(w.size, w.cfg.Count):
			w.header(s.Addr)
		case s.Addr >= w.flags && s.Addr < w.flags+FlagBytes(w.size, w.cfg.Count):
			w.flag(s.Addr, s.Imm)
		}
		// anything else is a body (its flag follows) or a liveness probe
	case uapi.StIPUSHPkt, uapi.StIPUSHMsg:
		w.anyPacket(s)
	}
}

// header records a header a peer's receive wrote into our matching area.
func (w *World) header(addr uint64) {
	off := (addr - w.match) / hdrBytes
	r, idx := int(off)/w.nsl, int(off)%w.nsl
	if r == w.rank || r >= w.size {
		w.proto++
		return
	}
	sl := &w.slots[off]
	sl.hdrAddr = w.load(w.match + off*hdrBytes)
	sl.hdrSize = uint32(w.load(w.match + off*hdrBytes + 8))
	sl.hdr = true
	w.hdrq = append(w.hdrq, readyHdr{r, idx})
}

// flag completes the receive whose completion flag the sender PUSHed.
func (w *World) flag(addr, imm uint64) {
	off := (addr - w.flags) / 8
	v := w.load(addr)
	w.store(addr, 0)
	if v&flagValid == 0 || off >= uint64(len(w.slots)) {
		w.proto++
		return
	}
	op := w.slots[off].recv
	if op == nil || op.done {
		w.proto++
		return
	}
	op.done = true
	op.got = int(v & sizeMask)
	if v&flagImm != 0 && v&flagTrunc == 0 && op.got <= ImmMax && op.got <= op.size {
		for i := 0; i < op.got; i++ {
			w.lm[op.addr+uint64(i)] = byte(imm >> (8 * i))
		}
	}
	op.idx = int(v >> flagIdxShift & flagIdxMask)
	op.trunc = v&flagTrunc != 0
	op.poison = v&flagPoison != 0
}

// anyPacket takes one IPUSH packet of the any-source domain (or a hello)
// out of the ring.
func (w *World) anyPacket(s *uapi.Status) {
	data := w.anyRing.Data(s)
	if data == nil {
		data = make([]byte, s.Length)
		w.anyRing.Copy(data, s)
	}
	msg, ok := w.reasm.Add(s, data)
	w.anyRing.Release(s.End)
	if !ok {
		return
	}
	r, known := w.nodeRank[msg.SrcNode]
	if !known {
		w.proto++
		return
	}
	if msg.Imm&immHello != 0 {
		w.gotHello(r, msg.Data)
		return
	}
	n := int(msg.Imm & sizeMask)
	if n > len(msg.Data) {
		w.proto++
		return
	}
	w.anyQ = append(w.anyQ, anyMsg{src: r, comm: Comm(msg.Imm >> immCommShift & immCommMask),
		idx: int(msg.Imm >> immIdxShift & immIdxMask), data: msg.Data[:n]})
}

// waitFor makes progress until cond holds. peer is the rank the wait
// depends on (-1: none in particular): it is probed when the wait grows
// long, and its death ends the wait with ErrPeerDead. timeout < 0 waits
// for ever; otherwise errWaitTimeout after it.
func (w *World) waitFor(peer int, cond func() bool, timeout time.Duration) error {
	start := monotime.Now()
	lastProbe := start
	for {
		w.progress()
		if cond() {
			return nil
		}
		if peer >= 0 && w.peers[peer].dead != nil {
			return w.peers[peer].dead
		}
		now := monotime.Now()
		if timeout >= 0 && now-start >= int64(timeout) {
			return errWaitTimeout
		}
		if peer >= 0 && now-lastProbe >= int64(w.cfg.ProbeAfter) {
			lastProbe = now
			w.probePeer(peer)
		}
		slice := int64(10 * time.Millisecond)
		if timeout >= 0 {
			slice = min(slice, max(int64(timeout)-(now-start), 1))
		}
		if _, err := w.d.WaitTail(slice); err != nil && !errors.Is(err, driver.ErrTimeout) {
			return fmt.Errorf("wait for the device: %w", err)
		}
	}
}

// probePeer writes 8 bytes into the peer's probe word: a peer that is
// gone fails the write with UNREACHABLE, which is how a wait on a dead
// rank ends with a named error instead of a hang.
func (w *World) probePeer(r int) {
	p := &w.peers[r]
	if p.probing || p.dead != nil {
		return
	}
	if _, err := w.post(&uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: p.node, SrcProc: w.d.GPID(),
		Length: 8, LocalAddr: w.probeSrc, RemoteAddr: w.probe, Cookie: cookie(ckProbe, r)}); err == nil {
		p.probing = true
	}
}

// post publishes a descriptor, consuming statuses into the backlog while
// the command queue is full (they are dispatched by the next progress).
// A descriptor whose doorbell could not be rung (driver.ErrNotRung) is
// posted: the device runs it at its next look, so it succeeds here, and
// is counted (Stats.NotRung). Taken for a failure, it had a send's
// buffer handed back while the device read it, a receive's header
// dropped while the peer wrote into it, a probe posted twice.
func (w *World) post(c *uapi.Desc) (uint64, error) {
	for i := 0; ; i++ {
		idx, err := w.d.Post(c)
		if !errors.Is(err, driver.ErrQueueFull) {
			if !driver.Posted(err) {
				return idx, fmt.Errorf("post %v to node %d: %w", c.Opcode, c.DstNode, err)
			}
			if err != nil {
				w.stats.NotRung++
			}
			return idx, nil
		}
		if s, ok := w.d.Poll(); ok {
			w.backlog = append(w.backlog, s)
		} else {
			runtime.Gosched()
		}
		if i%1024 == 1023 {
			if err := w.d.Alive(); err != nil {
				return 0, fmt.Errorf("post %v: %w", c.Opcode, err)
			}
		}
	}
}

// hello tells every other rank that this one's areas are laid out, and
// waits until every rank has said the same: nobody writes a header into
// a rank that has not zeroed its areas yet. Each hello carries the
// layout, which must be the same everywhere.
func (w *World) hello() error {
	w.helloAcked = make([]bool, w.size)
	w.helloRetry = make([]bool, w.size)
	w.helloFrom = make([]bool, w.size)
	w.helloAfter = make([]bool, w.size)
	w.helloAcked[w.rank], w.helloFrom[w.rank] = true, true
	w.helloPending = true
	defer func() { w.helloPending = false }()
	src := w.helloSrc
	for i, v := range w.layout() {
		w.store(src+8*uint64(i), v)
	}
	send := func(r int) error {
		_, err := w.post(&uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagSignal | uapi.FlagDirectAMT | uapi.FlagPktStatus,
			DstNode: w.peers[r].node, SrcProc: w.d.GPID(), Length: layoutWords * 8, LocalAddr: src,
			RemoteAddr: uint64(w.cfg.AnyAMT), Imm: immHello, Cookie: cookie(ckHello, r)})
		return err
	}
	for r := range w.peers {
		if r != w.rank {
			if err := send(r); err != nil {
				return fmt.Errorf("fmpl init: hello to rank %d: %w", r, err)
			}
		}
	}
	deadline := monotime.Now() + int64(w.cfg.InitTimeout)
	// Done when every peer's hello came (it is set up) and ours reached it,
	// or was sent again after its hello came: that one finds it there. A
	// peer that finished Init may exit before acknowledging.
	all := func() bool {
		for r := range w.peers {
			if !w.helloFrom[r] || !w.helloAcked[r] && !w.helloAfter[r] {
				return false
			}
		}
		return true
	}
	for !all() {
		if w.helloBad != nil {
			return w.helloBad
		}
		if monotime.Now() > deadline {
			var missing []int
			for r := range w.peers {
				if !w.helloAcked[r] || !w.helloFrom[r] {
					missing = append(missing, r)
				}
			}
			return fmt.Errorf("fmpl init: rank %d waited %v for ranks %v: %w", w.rank, w.cfg.InitTimeout, missing, ErrInitTimeout)
		}
		if err := w.waitFor(-1, func() bool { return all() || w.retryDue() || w.resendDue() }, 2*time.Millisecond); err != nil && !errors.Is(err, errWaitTimeout) {
			return fmt.Errorf("fmpl init: %w", err)
		}
		for r := range w.peers {
			if r != w.rank && w.helloFrom[r] && !w.helloAcked[r] && !w.helloAfter[r] {
				w.helloAfter[r] = true
				w.helloRetry[r] = false
				if err := send(r); err != nil {
					return fmt.Errorf("fmpl init: hello to rank %d: %w", r, err)
				}
			}
		}
		for r, again := range w.helloRetry {
			if again {
				w.helloRetry[r] = false
				time.Sleep(time.Millisecond) // the peer's process is still starting
				if err := send(r); err != nil {
					return fmt.Errorf("fmpl init: hello to rank %d: %w", r, err)
				}
			}
		}
	}
	if w.helloBad != nil {
		return w.helloBad
	}
	return nil
}

func (w *World) resendDue() bool {
	for r := range w.peers {
		if r != w.rank && w.helloFrom[r] && !w.helloAcked[r] && !w.helloAfter[r] {
			return true
		}
	}
	return false
}

func (w *World) retryDue() bool {
	for _, r := range w.helloRetry {
		if r {
			return true
		}
	}
	return false
}

// layoutWords is the size of a hello: what every rank must agree on.
const layoutWords = 8

func (w *World) layout() [layoutWords]uint64 {
	return [layoutWords]uint64{0x464d504c, uint64(w.rank), uint64(w.size), uint64(w.cfg.Count),
		w.match, w.flags, w.probe, uint64(w.cfg.AnyAMT)}
}

// gotHello checks a peer's hello against our own layout.
func (w *World) gotHello(r int, data []byte) {
	got, err := decodeHello(data)
	if err != nil {
		w.helloBad = fmt.Errorf("fmpl init: hello from rank %d: %w", r, err)
		return
	}
	want := w.layout()
	want[1] = uint64(r)
	if got != want {
		w.helloBad = fmt.Errorf("fmpl init: rank %d's layout %v differs from ours %v: %w", r, got, want, ErrConfig)
		return
	}
	w.helloFrom[r] = true
}

// decodeHello reads a hello's words; anything else than layoutWords
// little-endian words is refused.
func decodeHello(b []byte) ([layoutWords]uint64, error) {
	var v [layoutWords]uint64
	if len(b) != layoutWords*8 {
		return v, fmt.Errorf("hello of %d bytes, want %d: %w", len(b), layoutWords*8, ErrProtocol)
	}
	for i := range v {
		for j := 7; j >= 0; j-- {
			v[i] = v[i]<<8 | uint64(b[8*i+j])
		}
	}
	if v[0] != 0x464d504c {
		return v, fmt.Errorf("hello magic %#x: %w", v[0], ErrProtocol)
	}
	return v, nil
}

// drain waits until every signalled command this rank posted has
// completed, so the process may exit without taking a message with it.
func (w *World) drain() error {
	for r := range w.peers {
		if r == w.rank {
			continue
		}
		last := w.peers[r].lastSig
		if last == 0 {
			continue
		}
		if err := w.waitFor(r, func() bool { return w.peers[r].done >= last }, -1); err != nil {
			return err
		}
	}
	return nil
}
