package wire

import (
	"encoding/binary"
	"errors"
)

// A PUSHB frame ([TypePushBatch]) carries several whole PUSH messages to
// one receiver under one sequence number: a sender that finds more than
// one small PUSH queued for a peer sends one frame (and, on a ring
// medium, stores one slot word) for them all, as a NIC's doorbell batch
// or a message aggregator does. The header's MsgLen is the number of
// messages; its payload is that many sub-messages, each a SubLen-byte
// sub-header ([SubFields]) followed by its data, padded with zeros to a
// multiple of 8 bytes so the next sub-header is aligned. The header's
// own Addr, Imm, MsgID, Offset and DstProc are 0, its flags First and
// Last are set and PktStatus, DirectAMT, Tagged and Unordered are not
// (Signal when a sub-message has it), or the frame is malformed, so that
// a later use of them is not misread. Every sub-message is a message of
// its own, placed and given its status as a one-packet PUSH with the
// sub-header's fields would be. The frame is acknowledged, resent and deduplicated whole.
// A receiver refuses the sub-messages it cannot place (a refusal NACK
// whose Imm has bit i set for sub-message i) and places the others.

// SubLen is the size of a PUSHB sub-header.
const SubLen = 32

// MaxSubs bounds the sub-messages of one PUSHB frame: a refusal NACK
// names the refused ones in a 64-bit mask.
const MaxSubs = 64

// ErrBatch means a PUSHB frame's payload does not hold exactly MsgLen
// well-formed sub-messages (a sub-header or its data runs past the
// payload, bytes are left over, a count of 0 or above MaxSubs, a
// sub-message of length 0, or flags other than Signal).
var ErrBatch = errors.New("wire: malformed PUSHB batch")

// Sub is one PUSHB sub-header: the fields of a one-packet PUSH that
// differ between messages.
type Sub struct {
	Addr    uint64 // where the data goes in the receiver's link memory
	Imm     uint64 // the operand delivered in the receive status
	MsgID   uint32 // the message's id among the sender's
	Len     uint32 // data bytes (the message's whole length)
	SrcProc uint32 // global process id of the sender
	Flags   Flags  // only FlagSignal
}

// SubFields places and explains the sub-header's fields, as [Fields] does
// the header's; go generate renders it into docs/wire.md and the
// dissector.
var SubFields = []Field{
	{"Addr", 0, 8, "Address", true, "link-memory address of the message's first byte at the receiver"},
	{"Imm", 8, 8, "Immediate", true, "an operand delivered in the receive status"},
	{"MsgID", 16, 4, "Message id", false, "identifies the message among the sender's"},
	{"Len", 20, 4, "Length", false, "the message's bytes, which follow the sub-header (padded to a multiple of 8); at least 1"},
	{"SrcProc", 24, 4, "Source process", false, "global process id of the sender"},
	{"Flags", 28, 2, "Flags", true, "only Signal (the sender wants a completion for this message); others make the frame malformed"},
	{"Reserved", 30, 2, "Reserved", true, "0; another value makes the frame malformed"},
}

// subPad is a sub-message's length on the wire: its sub-header and data,
// padded to a multiple of 8.
func subPad(n uint32) int { return SubLen + (int(n)+7)&^7 }

// SubSize is the bytes AppendSub adds for a message of n bytes: what a
// sender budgets against the packet payload.
func SubSize(n uint32) int { return subPad(n) }

// AppendSub appends one sub-message (s and its data, len(data) == s.Len)
// to a PUSHB payload being built, padded with zeros.
func AppendSub(dst []byte, s *Sub, data []byte) []byte {
	start := len(dst)
	need := subPad(s.Len)
	if cap(dst)-start >= need {
		dst = dst[:start+need]
	} else {
		dst = append(dst, make([]byte, need)...)
	}
	b := dst[start:]
	binary.LittleEndian.PutUint64(b[0:], s.Addr)
	binary.LittleEndian.PutUint64(b[8:], s.Imm)
	binary.LittleEndian.PutUint32(b[16:], s.MsgID)
	binary.LittleEndian.PutUint32(b[20:], s.Len)
	binary.LittleEndian.PutUint32(b[24:], s.SrcProc)
	binary.LittleEndian.PutUint16(b[28:], uint16(s.Flags))
	binary.LittleEndian.PutUint16(b[30:], 0)
	n := copy(b[SubLen:], data)
	clear(b[SubLen+n:])
	return dst
}

// NextSub decodes the sub-message at the start of payload: its sub-header,
// its data (aliasing payload) and the payload after it. It fails with
// ErrBatch for a sub-message that runs past payload or breaks the rules
// of SubFields.
func NextSub(payload []byte) (s Sub, data, rest []byte, err error) {
	if len(payload) < SubLen {
		return Sub{}, nil, nil, ErrBatch
	}
	s = Sub{
		Addr:    binary.LittleEndian.Uint64(payload[0:]),
		Imm:     binary.LittleEndian.Uint64(payload[8:]),
		MsgID:   binary.LittleEndian.Uint32(payload[16:]),
		Len:     binary.LittleEndian.Uint32(payload[20:]),
		SrcProc: binary.LittleEndian.Uint32(payload[24:]),
		Flags:   Flags(binary.LittleEndian.Uint16(payload[28:])),
	}
	if s.Len == 0 || s.Flags&^FlagSignal != 0 || binary.LittleEndian.Uint16(payload[30:]) != 0 || uint64(s.Len) > uint64(len(payload)-SubLen) {
		return Sub{}, nil, nil, ErrBatch
	}
	end := subPad(s.Len)
	if end > len(payload) {
		return Sub{}, nil, nil, ErrBatch
	}
	return s, payload[SubLen : SubLen+int(s.Len)], payload[end:], nil
}

// CheckBatch checks that a PUSHB frame's payload holds exactly h.MsgLen
// well-formed sub-messages and nothing more, so a receiver that passes
// it can place them without checking the framing again.
func CheckBatch(h *Header, payload []byte) error {
	const whole = FlagFirst | FlagLast
	const notPush = FlagPktStatus | FlagDirectAMT | FlagTagged | FlagUnordered
	if h.MsgLen == 0 || h.MsgLen > MaxSubs || h.Offset != 0 || h.Addr != 0 || h.Imm != 0 || h.MsgID != 0 || h.DstProc != 0 ||
		h.Flags&whole != whole || h.Flags&notPush != 0 {
		return ErrBatch
	}
	for i := uint32(0); i < h.MsgLen; i++ {
		var err error
		if _, _, payload, err = NextSub(payload); err != nil {
			return err
		}
	}
	if len(payload) != 0 {
		return ErrBatch
	}
	return nil
}
