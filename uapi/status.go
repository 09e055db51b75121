package uapi

import "fmt"

// StatusType says what a receive status entry reports.
type StatusType uint8

// Status types.
const (
	StPUSH         StatusType = 1 // PUSH data arrived (per message, or per packet with PKT)
	StIPUSHPkt     StatusType = 2 // one IPUSH packet placed in a ring
	StIPUSHMsg     StatusType = 3 // a whole IPUSH message placed in a ring
	StPULLDone     StatusType = 4 // a PULL's data has all landed in local link memory
	StDone         StatusType = 5 // a signaled command completed
	StError        StatusType = 6 // a command failed: Opcode and End (its index) say which, Err why
	StRingFull     StatusType = 7 // hold mode: an IPUSH ring is full, receiving stopped until its head moves
	StPageReq      StatusType = 8 // LMMC remote paging request from SrcNode: port Imm into frame Addr
	NumStatusTypes            = 9
)

var stNames = [NumStatusTypes]string{"INVALID", "PUSH", "IPUSH_PKT", "IPUSH_MSG", "PULL_DONE", "DONE", "ERROR", "RING_FULL", "PAGE_REQ"}

func (t StatusType) String() string {
	if int(t) < len(stNames) {
		return stNames[t]
	}
	return fmt.Sprintf("ST(%d)", uint8(t))
}

// StatusTypeDocs documents the status types for the datasheet.
var StatusTypeDocs = []struct {
	T   StatusType
	Doc string
}{
	{StPUSH, "PUSH data placed at ADDR (once per message, on its last packet; per packet with PKT_STATUS)"},
	{StIPUSHPkt, "one IPUSH packet placed in ring AMT at ADDR; OFFSET in message MSG_ID; LAST on the final packet; END is the ring position after it"},
	{StIPUSHMsg, "a whole IPUSH message placed in ring AMT starting at ADDR (INTERLEAVED: another sender's packets came between, so the extent is not contiguous)"},
	{StPULLDone, "a PULL, FADD8 or CAS8 completed (always, SIGNAL or not), OPCODE saying which (4, 9 or 10: match on all three): LENGTH bytes are at ADDR (its LOCAL_ADDR); END is the command's index, COOKIE its cookie, SRC_NODE the node read from; FADD8, CAS8: IMM is the word's old value"},
	{StDone, "a signaled command completed (PUSH/IPUSH: acknowledged by the receiver); END is its index, COOKIE its cookie, LENGTH its LENGTH"},
	{StError, "a command failed: OPCODE and END (the command's free-running index; there is no separate index field) name it, ERR says why, COOKIE is its cookie"},
	{StRingFull, "hold mode: ring AMT is full; receiving on the link stops until its head moves (one per stall)"},
	{StPageReq, "LMMC remote paging request from SRC_NODE: page port IMM into link page frame ADDR; nothing more from that node is placed until the driver posts PAGE_DONE"},
}

// Status flags.
const (
	StFlagLast        = 1 << 0 // last packet of its message
	StFlagFirst       = 1 << 1 // first packet of its message
	StFlagInterleaved = 1 << 2 // per-message status whose packets were interleaved with another message's
	// StFlagWrapped marks a per-message status whose message continues at
	// the ring base: OFFSET bytes lie at ADDR, the other LENGTH-OFFSET at
	// the ring's base (only when the message could not be placed whole).
	StFlagWrapped = 1 << 3
)

// StatusSize is the size of a receive status entry (one cache line).
const StatusSize = 64

// Status is a receive status entry as the device writes it.
type Status struct {
	Type    StatusType
	Flags   uint8
	SrcNode uint16
	SrcProc uint32 // sender's GPID
	MsgID   uint32
	Length  uint32 // bytes of this packet (per packet) or message
	Offset  uint32 // offset of this packet in its message
	AMT     uint16 // ring (IPUSH, RING_FULL)
	Err     Errno  // StError
	Opcode  Opcode // StDone/StError/StPULLDone: the command's opcode
	Addr    uint64 // link address where the data lies
	End     uint64 // IPUSH: ring position after this data; DONE/ERROR/PULL_DONE: command index
	Cookie  uint64 // DONE/ERROR/PULL_DONE: the command's cookie
	Imm     uint64 // PUSH/IPUSH: the sender's immediate
}

// CmdIndex is the free-running index of the command a DONE/ERROR/PULL_DONE
// status is about: its End field (the ABI has no other index field).
func (s *Status) CmdIndex() uint64 { return s.End }

// StatusFields documents the status layout for the datasheet.
var StatusFields = []Field{
	{0, 1, "TYPE", "StatusType"},
	{1, 1, "FLAGS", "LAST, FIRST, INTERLEAVED, WRAPPED"},
	{2, 2, "SRC_NODE", "sending node; DONE, ERROR: this device's own node; PULL_DONE: the node read from"},
	{4, 4, "SRC_PROC", "sending GPID; DONE, ERROR, PULL_DONE: the command's SRC_PROC"},
	{8, 4, "MSG_ID", "sender's message id"},
	{12, 4, "LENGTH", "bytes of this packet or message; DONE: the command's LENGTH; ERROR: 0"},
	{16, 4, "OFFSET", "offset of this packet in its message; IPUSH_MSG with WRAPPED: bytes before the wrap"},
	{20, 1, "OPCODE", "command opcode (DONE, ERROR, PULL_DONE: PULL_DONE's is PULL, FADD8 or CAS8)"},
	{21, 1, "RESERVED", "zero"},
	{22, 2, "AMT", "AMT index (IPUSH, RING_FULL)"},
	{24, 2, "ERR", "error code (ERROR)"},
	{26, 6, "RESERVED", "zero"},
	{32, 8, "ADDR", "link address (from LINKMEM_OFF, absolute: for IPUSH, BASE + position mod SIZE, not an offset in the ring) of the data; PULL_DONE: the command's LOCAL_ADDR; PAGE_REQ: the frame; DONE, ERROR: 0"},
	{40, 8, "END", "IPUSH_PKT, IPUSH_MSG: ring position after the data; DONE (a PUSH's DONE too: an index, not a position in memory), ERROR, PULL_DONE: the command's free-running index (all 64 bits); PUSH, RING_FULL, PAGE_REQ: 0"},
	{48, 8, "COOKIE", "the command's cookie (DONE, ERROR, PULL_DONE)"},
	{56, 8, "IMM", "sender's immediate (PUSH, IPUSH); PULL_DONE of FADD8 or CAS8: the word's old value"},
}

// Words encodes the status entry.
func (s *Status) Words() [8]uint64 {
	return [8]uint64{
		uint64(s.Type) | uint64(s.Flags)<<8 | uint64(s.SrcNode)<<16 | uint64(s.SrcProc)<<32,
		uint64(s.MsgID) | uint64(s.Length)<<32,
		uint64(s.Offset) | uint64(s.Opcode)<<32 | uint64(s.AMT)<<48,
		uint64(s.Err),
		s.Addr,
		s.End,
		s.Cookie,
		s.Imm,
	}
}

// StatusFromWords decodes a status entry.
func StatusFromWords(w [8]uint64) Status {
	return Status{
		Type:    StatusType(w[0]),
		Flags:   uint8(w[0] >> 8),
		SrcNode: uint16(w[0] >> 16),
		SrcProc: uint32(w[0] >> 32),
		MsgID:   uint32(w[1]),
		Length:  uint32(w[1] >> 32),
		Offset:  uint32(w[2]),
		Opcode:  Opcode(w[2] >> 32),
		AMT:     uint16(w[2] >> 48),
		Err:     Errno(w[3]),
		Addr:    w[4],
		End:     w[5],
		Cookie:  w[6],
		Imm:     w[7],
	}
}

func (s Status) String() string {
	switch s.Type {
	case StError:
		return fmt.Sprintf("ERROR cmd#%d %s: %s (cookie %#x)", s.End, s.Opcode, s.Err.String(), s.Cookie)
	case StDone:
		return fmt.Sprintf("DONE cmd#%d %s (cookie %#x)", s.End, s.Opcode, s.Cookie)
	case StRingFull:
		return fmt.Sprintf("RING_FULL amt %d", s.AMT)
	}
	return fmt.Sprintf("%s src %d/%d msg %d off %d len %d addr %#x end %d amt %d flags %#x",
		s.Type, s.SrcNode, s.SrcProc, s.MsgID, s.Offset, s.Length, s.Addr, s.End, s.AMT, s.Flags)
}
