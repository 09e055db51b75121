//go:build dimmnet_ofi

package main

import (
	"github.com/dimmnet/dimmnet/uapi"
)

// Unsignalled injects. An fi_inject owes its caller no completion once it
// returns, only an error entry if it fails, so nothing needs the device's
// DONE for it but the staging copy in link memory, which the device reads
// until the peer acknowledges the message. A signalled IPUSH per inject
// made the device write a DONE status and the provider take it (read the
// status, find the operation in a map, free it) on the path of the
// answer, whose frame carries the acknowledgement: about 0.1 µs of every
// 8-byte one-way time (BenchmarkInjectPingPong's profile).
//
// So an inject is posted without FlagSignal and its staging waits in its
// peer's queue (injQ), to be freed by a later DONE: the device completes
// a peer's writes in posting order (vdev's retire: an acknowledgement
// completes a prefix of the peer's queue), so the DONE of a signalled
// inject to a peer frees every inject queued to that peer before it.
// One inject in injSignalEvery (or the one that brings those since the
// last signalled one to injSignalBytes) is posted signalled. A failed
// inject still writes an ERROR status (errors always do), which frees
// what its DONE would have and is reported (injectErr) from what its
// staging still holds: the header's flags and the length. A FENCE, whose
// DONE comes once every command before it completed, frees every queue
// when the arena runs out (alloc).
//
// With a transmit counter bound, every inject is signalled as before:
// the counter counts each one's completion.
//
// A failed inject call, whichever way it went (unsignalled, signalled
// for a counter, a rendezvous offer), is reported as libfabric's fi_cq(3)
// asks of an operation that asked for no completion: an error entry on
// the transmit CQ with op_context NULL (the call took none), the flags
// naming the operation, its length, err and prov_errno, the rest 0; and
// one more error on the transmit counter when one is bound. Success costs
// nothing more: the failure is read back from the staging, which is only
// freed after its status.

// ckInject is the cookie kind of an unsignalled-inject IPUSH (the peer's
// node in bits 40-55, the inject's sequence number below), and ckFence
// of the FENCE that frees every queue.
const (
	ckInject = 0x20
	ckFence  = 0x21

	injSeqBits = 40
	injSeqMask = 1<<injSeqBits - 1
)

// injSignalEvery and injSignalBytes bound the unsignalled injects to a
// peer after a signalled one: every 64th is signalled, or the one that
// brings them to 64 KiB. So a caller that stops injecting leaves at most
// 63 stagings (a 16-byte header and 8 bytes take one 64-byte granule) or
// 64 KiB of link memory held per peer until a later inject's DONE; while
// DONEs lag (a stream), the injects in flight are held besides.
const (
	injSignalEvery = 64
	injSignalBytes = 64 << 10
)

// injQ holds the stagings of a peer's unsignalled injects, in posting
// order.
type injQ struct {
	node  uint16
	ents  []injEnt // ents[head:] are held
	head  int
	bytes uint64
	// unsignalled injects, and their bytes, since the last signalled one:
	// a stream whose DONEs lag asks for one every injSignalEvery, not
	// for one per inject until the first comes back
	since, sinceBytes uint64
}

type injEnt struct{ seq, at, n uint64 }

// injState is an endpoint's unsignalled injects.
type injState struct {
	qs    []*injQ
	last  *injQ  // the queue of the last peer injected to
	seq   uint64 // the last inject's sequence number
	fence uint64 // a FENCE posted and not completed: the seq it frees to; 0 none
	held  int    // stagings held over all queues
}

// queue is node's queue, made on first use.
func (s *injState) queue(node uint16) *injQ {
	if q := s.last; q != nil && q.node == node {
		return q
	}
	for _, q := range s.qs {
		if q.node == node {
			s.last = q
			return q
		}
	}
	q := &injQ{node: node}
	s.qs = append(s.qs, q)
	s.last = q
	return q
}

// injectPush posts an inject whose n bytes (header included) are staged
// at at: unsignalled unless its peer's queue is due a DONE.
func (e *endpoint) injectPush(node uint16, at uint64, n int, imm uint64) int {
	s := &e.inj
	q := s.queue(node)
	seq := (s.seq + 1) & injSeqMask
	var flags uint8 = uapi.FlagDirectAMT | uapi.FlagPktStatus
	signal := q.since+1 >= injSignalEvery || q.sinceBytes+uint64(n) >= injSignalBytes
	if signal {
		flags |= uapi.FlagSignal
	}
	_, err := e.d.Post(&uapi.Desc{Opcode: uapi.OpIPUSH, Flags: flags,
		DstNode: node, SrcProc: e.d.GPID(), Length: uint32(n), LocalAddr: at, RemoteAddr: ringAMT,
		Imm: imm, Cookie: uint64(ckInject)<<56 | uint64(node)<<injSeqBits | seq})
	if postFailed("inject", node, err) {
		e.arena.free(at, uint64(n))
		return postErr("inject", node, err)
	}
	s.seq = seq
	if signal {
		q.since, q.sinceBytes = 0, 0
	} else {
		q.since++
		q.sinceBytes += uint64(n)
	}
	q.ents = append(q.ents, injEnt{seq: seq, at: at, n: uint64(n)})
	q.bytes += uint64(n)
	s.held++
	return 0
}

// injectDone takes the DONE or ERROR status of an inject: it and every
// inject queued to its peer before it are complete, so their stagings
// are freed; a failed one is reported first, from its staging.
func (e *endpoint) injectDone(st *uapi.Status) {
	node, seq := uint16(st.Cookie>>injSeqBits), st.Cookie&injSeqMask
	q := e.inj.queue(node)
	if st.Type == uapi.StError {
		e.injectFailed(q, seq, st)
	}
	e.injFree(q, seq)
}

// injectFailed reports the unsignalled inject seq, still held in q, that
// its ERROR status st failed: the staging's eager header says whether it
// was tagged, its size less the header is the length.
func (e *endpoint) injectFailed(q *injQ, seq uint64, st *uapi.Status) {
	flags, n := fSend|fMsg, 0
	for _, en := range q.ents[q.head:] {
		if en.seq == seq {
			if e.lm[en.at+1]&hdrTagged != 0 {
				flags = fSend | fTagged
			}
			n = int(en.n) - eagerHdrLen
			break
		}
	}
	logf("an inject to node %d failed: %v", q.node, st.Err)
	e.injectErr(flags, n, errFor(st), int(st.Err))
}

// injectErr reports a failed inject call (a send or a tagged send: flags
// FI_SEND with FI_MSG or FI_TAGGED) of n bytes: one error on the
// transmit counter, if bound, and an error entry on the transmit CQ with
// no context, as fi_cq(3) has every failed operation reported, those
// that asked for no completion included. Its tag and data are 0: they
// name a received message, and an unsignalled inject keeps no tag.
func (e *endpoint) injectErr(flags uint64, n int, err, prov int) {
	if e.txCntr != nil {
		e.txCntr.errs++
	}
	if e.txcq != nil {
		e.txcq.push(cqEntry{flags: flags, len: n, err: err, provErr: prov, src: notAvail})
	}
}

// injFree frees q's stagings up to sequence number seq.
func (e *endpoint) injFree(q *injQ, seq uint64) {
	for q.head < len(q.ents) && seqBefore(q.ents[q.head].seq, seq) {
		en := q.ents[q.head]
		e.arena.free(en.at, en.n)
		q.bytes -= en.n
		q.head++
		e.inj.held--
	}
	if q.head == len(q.ents) {
		q.ents, q.head = q.ents[:0], 0
	} else if q.head >= injSignalEvery && 2*q.head >= len(q.ents) {
		n := copy(q.ents, q.ents[q.head:])
		q.ents, q.head = q.ents[:n], 0
	}
}

// seqBefore: inject sequence number a was posted no later than b (40-bit
// numbers, compared across a wrap).
func seqBefore(a, b uint64) bool { return (b-a)&injSeqMask < 1<<(injSeqBits-1) }

// injectFence posts a signalled FENCE when stagings are held and none is
// in flight: its DONE frees every queue (the arena ran out, and a held
// staging waits for a later inject to its peer that may not come).
func (e *endpoint) injectFence() {
	s := &e.inj
	if s.held == 0 || s.fence != 0 {
		return
	}
	if _, err := e.d.Post(&uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal, SrcProc: e.d.GPID(),
		Cookie: uint64(ckFence) << 56}); postFailed("fence", e.d.Node(), err) {
		return // a full command queue: the next alloc failure tries again
	}
	s.fence = s.seq | 1<<injSeqBits // nonzero even for sequence number 0
}

// fenceDone frees every staging posted before the FENCE that completed.
func (e *endpoint) fenceDone() {
	s := &e.inj
	upto := s.fence & injSeqMask
	s.fence = 0
	for _, q := range s.qs {
		e.injFree(q, upto)
	}
}
