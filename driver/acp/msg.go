package acp

import (
	"encoding/binary"
	"fmt"
)

// Delegation messages are what one rank's layer sends another's: a
// command to execute (COPY, ATOMIC, PUT), the answer (END), the proof
// that a third-party copy's bytes arrived (LANDED) and the
// layer's own Init and Sync traffic. Each is one 64-byte IPUSH into the
// receiver's single delegation ring, so a receiver needs one ring however
// many ranks there are (the paper's per-rank command receive buffers are
// the term its section 6 names to shrink). The layout, little-endian:
//
//	off size field
//	0   1    type (msgCopy ...)
//	1   1    atomic operation (aopCAS ...) or, for END, an error code
//	2   1    width of an atomic or a PUT: 4 or 8
//	3   1    reserved, 0
//	4   4    parent rank: the rank whose handle this is for
//	8   8    parent handle
//	16  8    GA_DST
//	24  8    GA_SRC; DATA: bytes 0-7 it carries
//	32  8    SIZE (COPY, DATA), operand (atomics; CAS: the compared value), value (PUT, END)
//	40  8    second operand (CAS: the new value); DATA: bytes 8-15 it carries
//	48  4    epoch: the Init or Reset generation; older ones are dropped
//	52  4    sequence (SYNC, RELEASE) or the sender's rank (HELLO)
//	56  8    layout check (HELLO): starter size and table geometry must agree
const msgSize = 64

// Message types.
const (
	msgCopy    = 1  // execute a copy one of whose sides is the receiver's (third-party copy: the source's)
	msgAtomic  = 2  // execute an atomic on the receiver's word at GA_SRC, the old value to GA_DST
	msgPut     = 3  // store the 4- or 8-byte value at GA_DST (an atomic's result for a third rank)
	msgEnd     = 4  // the parent's handle is done (value: an atomic's old value); op holds the error code
	msgHello   = 5  // Init and Reset: the sender is rank seq and has laid out its areas
	msgSync    = 6  // Sync number seq reached by the sender (to rank 0)
	msgRelease = 7  // Sync number seq complete (from rank 0)
	msgHelloOK = 8  // a hello was heard: the sender stops sending it
	msgLanded  = 9  // the bytes of the parent's copy, PUSHed here before this message, have landed: send the parent END
	msgData    = 10 // store the SIZE (1 to inlineMax) bytes carried at 24 and 40 at GA_DST, then send the parent END
	msgMax     = msgData
)

// inlineMax is the most bytes a DATA message carries: the 16 bytes of
// the GA_SRC and second operand fields, which DATA does not otherwise use.
const inlineMax = 16

// inline packs p (at most inlineMax bytes) into a DATA message's two
// carrying fields, the bytes past len(p) zero.
func (m *msg) inline(p []byte) {
	var b [inlineMax]byte
	copy(b[:], p)
	m.a = uint64(len(p))
	m.src = binary.LittleEndian.Uint64(b[:8])
	m.b = binary.LittleEndian.Uint64(b[8:])
}

// inlined unpacks the bytes a DATA message carries into b. A value
// receiver and the caller's array: taking m's address, or returning a
// local array, would move every message the delegate station handles to
// the heap (its closures capture m).
func (m msg) inlined(b *[inlineMax]byte) []byte {
	binary.LittleEndian.PutUint64(b[:8], m.src)
	binary.LittleEndian.PutUint64(b[8:], m.b)
	return b[:m.a]
}

// Atomic operations, in acp.h's order.
const (
	aopCAS = iota + 1
	aopSwap
	aopAdd
	aopAnd
	aopOr
	aopXor
	aopMax = aopXor
)

// END error codes: the failures a delegate reports to the parent.
const (
	endOK = iota
	endUnregistered
	endAlign
	endRank
	endDevice
	endMax = endDevice
)

// msg is one decoded delegation message.
type msg struct {
	typ, op, width uint8
	parent         uint32
	handle         uint64
	dst, src       uint64
	a, b           uint64
	epoch, seq     uint32
	layout         uint64
}

func (m *msg) encode(b []byte) {
	_ = b[msgSize-1]
	b[0], b[1], b[2], b[3] = m.typ, m.op, m.width, 0
	le := binary.LittleEndian
	le.PutUint32(b[4:], m.parent)
	le.PutUint64(b[8:], m.handle)
	le.PutUint64(b[16:], m.dst)
	le.PutUint64(b[24:], m.src)
	le.PutUint64(b[32:], m.a)
	le.PutUint64(b[40:], m.b)
	le.PutUint32(b[48:], m.epoch)
	le.PutUint32(b[52:], m.seq)
	le.PutUint64(b[56:], m.layout)
}

// words packs m as the eight 64-bit words the sender stores into its
// outgoing slot (and the receiver loads atomically from its ring).
func (m *msg) words() (w [8]uint64) {
	var b [msgSize]byte
	m.encode(b[:])
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return w
}

// decodeMsg checks and decodes a message a peer wrote: anything a correct
// peer never sends is an error, so a corrupt or hostile message is never
// acted on.
func decodeMsg(b []byte) (msg, error) {
	if len(b) != msgSize {
		return msg{}, fmt.Errorf("delegation message of %d bytes, want %d: %w", len(b), msgSize, ErrProtocol)
	}
	le := binary.LittleEndian
	m := msg{typ: b[0], op: b[1], width: b[2], parent: le.Uint32(b[4:]), handle: le.Uint64(b[8:]),
		dst: le.Uint64(b[16:]), src: le.Uint64(b[24:]), a: le.Uint64(b[32:]), b: le.Uint64(b[40:]),
		epoch: le.Uint32(b[48:]), seq: le.Uint32(b[52:]), layout: le.Uint64(b[56:])}
	if b[3] != 0 || m.typ == 0 || m.typ > msgMax {
		return msg{}, fmt.Errorf("delegation message type %d (reserved %d): %w", m.typ, b[3], ErrProtocol)
	}
	switch m.typ {
	case msgAtomic:
		if m.op == 0 || m.op > aopMax || m.width != 4 && m.width != 8 {
			return msg{}, fmt.Errorf("atomic op %d width %d: %w", m.op, m.width, ErrProtocol)
		}
	case msgPut:
		if m.width != 4 && m.width != 8 {
			return msg{}, fmt.Errorf("put width %d: %w", m.width, ErrProtocol)
		}
	case msgEnd:
		if m.op > endMax {
			return msg{}, fmt.Errorf("end code %d: %w", m.op, ErrProtocol)
		}
	case msgData:
		// The bytes past SIZE are zero, as inline leaves them.
		if m.a == 0 || m.a > inlineMax || !bytesZero(b[24:32], int(m.a)) || !bytesZero(b[40:48], int(m.a)-8) {
			return msg{}, fmt.Errorf("data message of %d bytes (at most %d, the rest zero): %w", m.a, inlineMax, ErrProtocol)
		}
	}
	if m.typ != msgAtomic && m.typ != msgPut && m.width != 0 || m.typ != msgAtomic && m.typ != msgEnd && m.op != 0 {
		return msg{}, fmt.Errorf("type %d with op %d width %d: %w", m.typ, m.op, m.width, ErrProtocol)
	}
	return m, nil
}

// bytesZero reports whether b[used:] is zero (all of b when used <= 0).
func bytesZero(b []byte, used int) bool {
	for i := max(used, 0); i < len(b); i++ {
		if b[i] != 0 {
			return false
		}
	}
	return true
}
