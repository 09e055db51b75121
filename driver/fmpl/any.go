package fmpl

import (
	"fmt"

	"github.com/dimmnet/dimmnet/uapi"
)

// The any-source domain (2.4, 3.2.3): a receiver that cannot name the
// sender cannot write a header into the sender's matching area, so these
// messages travel the other way round: the sender IPUSHes header and body
// into one ring on the receiver shared by all senders (DIRECT_AMT names
// it), and the receiver matches on the index in arrival order. The two
// domains never see each other's messages.

type anyMsg struct {
	src  int // world rank
	comm Comm
	idx  int
	data []byte
}

// AnyMax is the largest message of the any-source domain: a quarter of
// the ring, so a message never waits for the ring to be empty.
func (w *World) AnyMax() int { return w.cfg.AnyRing / 4 }

// SendAny sends buf to rank dst of comm for a RecvAny under idx
// (fmpl_send_any). It returns once buf is copied out (blocking).
func (w *World) SendAny(buf []byte, dst, idx int, comm Comm) error {
	if !w.live {
		return ErrNotInit
	}
	r, err := w.world(comm, dst)
	if err != nil {
		return fmt.Errorf("send any: %w", err)
	}
	if idx < 0 || idx > immIdxMask || comm < 0 || int(comm) > immCommMask {
		return fmt.Errorf("send any to %d: index %d, communicator %d: %w", dst, idx, comm, ErrIndex)
	}
	if len(buf) > w.AnyMax() {
		return fmt.Errorf("send any of %d bytes (at most %d): %w", len(buf), w.AnyMax(), ErrCount)
	}
	p := &w.peers[r]
	if p.dead != nil {
		return fmt.Errorf("send any: %w", p.dead)
	}
	n := uint64(max(len(buf), 1))
	var at uint64
	if err := w.waitFor(-1, func() bool {
		w.staging.reclaim(w)
		var ok bool
		at, ok = w.staging.alloc(align(n, 8))
		return ok
	}, -1); err != nil {
		return fmt.Errorf("send any: %w", err)
	}
	copy(w.lm[at:at+n], buf)
	imm := uint64(comm)<<immCommShift | uint64(idx)<<immIdxShift | uint64(len(buf))
	cmd, err := w.post(&uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagSignal | uapi.FlagDirectAMT | uapi.FlagPktStatus,
		DstNode: p.node, SrcProc: w.d.GPID(), Length: uint32(n), LocalAddr: at, RemoteAddr: uint64(w.cfg.AnyAMT),
		Imm: imm, Cookie: cookie(ckAny, r)})
	w.staging.commit(r, cmd)
	if err != nil {
		return fmt.Errorf("send any to %d: %w", dst, err)
	}
	p.lastSig = cmd + 1
	return nil
}

// RecvAny receives the first message that arrived for idx on comm from
// any rank, waiting for one (fmpl_recv_any); it also returns the source
// and size, which the paper's interface lacks. A message larger than buf
// is consumed and reported as ErrTruncated, nothing copied.
func (w *World) RecvAny(buf []byte, idx int, comm Comm) (Msg, error) {
	if !w.live {
		return Msg{}, ErrNotInit
	}
	c, err := w.comm(comm)
	if err != nil {
		return Msg{}, fmt.Errorf("recv any: %w", err)
	}
	find := func() int {
		for i, m := range w.anyQ {
			if m.idx == idx && m.comm == comm {
				return i
			}
		}
		return -1
	}
	if err := w.waitFor(-1, func() bool { return find() >= 0 }, -1); err != nil {
		return Msg{}, fmt.Errorf("recv any: %w", err)
	}
	i := find()
	m := w.anyQ[i]
	w.anyQ = append(w.anyQ[:i], w.anyQ[i+1:]...)
	src := c.rankOf(m.src)
	if len(m.data) > len(buf) {
		return Msg{Source: src, Index: idx}, fmt.Errorf("recv any from %d: %d bytes, buffer %d: %w", src, len(m.data), len(buf), ErrTruncated)
	}
	copy(buf, m.data)
	return Msg{Source: src, Index: idx, Size: len(m.data)}, nil
}
