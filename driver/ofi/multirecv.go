//go:build dimmnet_ofi

package main

import "unsafe"

// Multi-receive buffers (FI_MULTI_RECV, fi_msg(3)): one posted receive
// that successive untagged messages fill, each whole and packed right
// after the one before (no alignment: the provider copies bodies with
// the CPU or PULLs them into link memory at any byte address). Each
// message completes on its own with buf pointing at its place; the
// buffer is released, with an entry carrying FI_MULTI_RECV, once what
// is left falls below the minimum FI_OPT_MIN_MULTI_RECV set when it was
// posted.
//
// A message is never split across buffers nor cut short while a buffer
// has room for smaller ones: one longer than what is left releases the
// buffer (it would have to be truncated) and goes on to the next posted
// receive, or waits among the unexpected messages until one is posted,
// as an application reposts on the release. Only a buffer that has taken
// nothing yet truncates a longer message, as an ordinary receive does.
// A rendezvous message's place is taken when it matches and its body
// PULLed into it later, so the buffer is released only once every PULL
// into it has completed: the completion of the last message placed
// carries FI_MULTI_RECV when it is written as an entry of its own right,
// and otherwise (an error entry, a completion that FI_SELECTIVE_COMPLETION
// suppresses, a buffer released because the next message did not fit)
// the release is an entry of its own, flags FI_MULTI_RECV only, len 0,
// buf NULL, the buffer's context, which fi_msg(3) has written even when
// the receive's other completions are suppressed.

// minMultiRecvDefault is FI_OPT_MIN_MULTI_RECV until the caller sets it:
// the eager limit's bound (16 KiB, as libfabric's tcp provider and rxm's
// buffer size), so that a buffer still posted always has room for any
// eager message and only a rendezvous one can find it too short.
const minMultiRecvDefault = 16 << 10

// multiRecv is the state of one posted FI_MULTI_RECV buffer.
type multiRecv struct {
	r        *recvOp // the posted receive: buf, size, ctx, flags
	off      int     // bytes placed
	min      int     // FI_OPT_MIN_MULTI_RECV when it was posted
	pending  int     // messages placed whose completions are still to come
	released bool    // out of the posted list: it takes no more messages
}

// postMulti posts receive r, which carries FI_MULTI_RECV: the messages
// already waiting fill it first, in the order they came.
func (e *endpoint) postMulti(r *recvOp) int {
	mr := &multiRecv{r: r, min: e.minMultiRecv}
	r.mr = mr
	e.stats.Recvs++
	for i := 0; i < len(e.unexp[0]); {
		m := e.unexp[0][i]
		if !e.matches(r, m) {
			i++
			continue
		}
		c, fits := e.slot(mr, m)
		if !fits {
			return 0 // released; m waits for the next receive
		}
		e.unexp[0] = append(e.unexp[0][:i], e.unexp[0][i+1:]...)
		released := mr.released
		e.deliver(c, m)
		if released {
			return 0
		}
	}
	e.posted[0] = append(e.posted[0], r)
	return 0
}

// arriveMulti goes on with arrive's matching of message m at posted
// receive i, a multi-receive buffer that matched it: a message that does
// not fit releases the buffer and goes on to the receives posted after
// it, and one no receive takes is kept as unexpected.
func (e *endpoint) arriveMulti(i int, m *inMsg) {
	for i < len(e.posted[0]) {
		r := e.posted[0][i]
		if !e.matches(r, m) {
			i++
			continue
		}
		if r.mr == nil {
			e.posted[0] = append(e.posted[0][:i], e.posted[0][i+1:]...)
			e.deliver(r, m)
			return
		}
		c, fits := e.slot(r.mr, m)
		if !fits {
			e.posted[0] = append(e.posted[0][:i], e.posted[0][i+1:]...)
			continue
		}
		if r.mr.released {
			e.posted[0] = append(e.posted[0][:i], e.posted[0][i+1:]...)
		}
		e.deliver(c, m)
		return
	}
	e.keep(m)
}

// slot takes message m's place in buffer mr and returns the receive that
// fills it (to deliver), released first if what is left after it is
// below the minimum. A message longer than what is left releases the
// buffer and takes no place (fits false); mr may then be gone, so the
// caller only unposts it.
func (e *endpoint) slot(mr *multiRecv, m *inMsg) (c *recvOp, fits bool) {
	r := mr.r
	left := r.size - mr.off
	if m.n > left && mr.off > 0 {
		mr.released = true
		if mr.pending == 0 {
			e.multiReleased(mr)
		}
		return nil, false
	}
	n := min(m.n, left) // less only in a buffer that took nothing yet: truncated
	c = e.newRecv()
	c.buf, c.size, c.src, c.ctx = unsafe.Add(r.buf, mr.off), n, r.src, r.ctx
	c.flags = r.flags &^ fMultiRecv
	c.from = mr
	mr.off += n
	mr.pending++
	if r.size-mr.off < mr.min {
		mr.released = true
	}
	return c, true
}

// placedDone is told that the completion of receive c, placed in a
// multi-receive buffer, is being written, and says whether that releases
// the buffer (the last message of a released one).
func (e *endpoint) placedDone(c *recvOp) bool {
	mr := c.from
	c.from = nil
	mr.pending--
	if !mr.released || mr.pending > 0 {
		return false
	}
	e.freeRecv(mr.r)
	return true
}

// multiReleased writes the entry of its own that releases buffer mr,
// whose messages have all completed, and frees it.
func (e *endpoint) multiReleased(mr *multiRecv) {
	e.releaseEntry(mr.r.ctx)
	e.freeRecv(mr.r)
}

// releaseEntry writes a release that no message's completion carries.
func (e *endpoint) releaseEntry(ctx unsafe.Pointer) {
	if e.rxcq != nil {
		e.rxcq.push(cqEntry{ctx: ctx, flags: fMultiRecv, src: notAvail})
	}
}

// cancelMulti cancels posted multi-receive buffer r (already unposted)
// with an FI_ECANCELED error entry. A buffer that took nothing is
// released by it (it carries FI_MULTI_RECV). One that took messages is
// released by an entry of its own in the completion queue, behind their
// completions: error entries are read first, and a release ahead of
// them would hand the buffer back while completions still point into
// it. With PULLs still going into it, the last of their completions
// releases it instead, unless the endpoint is closing (closing): no
// PULL completes after that, so it is released now.
func (e *endpoint) cancelMulti(r *recvOp, closing bool) {
	mr := r.mr
	mr.released = true
	if e.rxCntr != nil {
		e.rxCntr.errs++
	}
	done := mr.pending == 0 || closing
	f := fRecv | fMsg
	if done && mr.off == 0 {
		f |= fMultiRecv
	}
	if e.rxcq != nil {
		e.rxcq.push(cqEntry{ctx: r.ctx, flags: f, buf: r.buf, err: errCancel, src: notAvail})
	}
	switch {
	case !done:
	case mr.off > 0:
		e.multiReleased(mr) // mr.r is r
	default:
		e.freeRecv(r)
	}
}
