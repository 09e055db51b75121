package uapi

import "fmt"

// Opcode is a command's operation.
type Opcode uint8

// Opcodes. 0 is invalid so that a zeroed descriptor is refused, not run.
const (
	OpNOP      Opcode = 1  // completes at once (with a status when Signal is set)
	OpFENCE    Opcode = 2  // completes when every earlier command has completed
	OpPUSH     Opcode = 3  // RDMA write: local link memory -> remote link memory at RemoteAddr
	OpPULL     Opcode = 4  // RDMA read: remote link memory at RemoteAddr -> local link memory
	OpIPUSH    Opcode = 5  // indirect push: the receiver's device chooses where data lands (AMT ring)
	OpREADDONE Opcode = 6  // AMT ring in device-head mode: advance ring RemoteAddr's head to Imm
	OpPAGE     Opcode = 7  // LMMC remote paging request: page port Imm into DstNode's frame RemoteAddr
	OpPAGEDONE Opcode = 8  // LMMC: paging for DstNode's request is done; place its data again
	OpFADD8    Opcode = 9  // remote atomic: add Operand to DstNode's 8-byte word at RemoteAddr, old value to LocalAddr
	OpCAS8     Opcode = 10 // remote atomic: if the word at RemoteAddr is Operand, store Imm; old value to LocalAddr
	NumOpcodes        = 11
)

var opNames = [NumOpcodes]string{"INVALID", "NOP", "FENCE", "PUSH", "PULL", "IPUSH", "READ_DONE", "PAGE", "PAGE_DONE", "FADD8", "CAS8"}

// Reads reports whether o brings data back from DstNode (PULL and the
// remote atomics): it completes with PULL_DONE once that data landed.
func (o Opcode) Reads() bool { return o == OpPULL || o == OpFADD8 || o == OpCAS8 }

// Atomic reports whether o is a remote atomic, performed on an aligned
// 8-byte word by the receive engine of DstNode's device.
func (o Opcode) Atomic() bool { return o == OpFADD8 || o == OpCAS8 }

func (o Opcode) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("OP(%d)", uint8(o))
}

// OpcodeDocs documents each opcode for the datasheet.
var OpcodeDocs = []struct {
	Op  Opcode
	Doc string
}{
	{OpNOP, "completes at once; a status only when SIGNAL is set"},
	{OpFENCE, "completes (status when SIGNAL) once every earlier command has completed; nothing after it is taken until then"},
	{OpPUSH, "RDMA write of Length bytes from LocalAddr to RemoteAddr on DstNode; the receiver gets a PUSH status"},
	{OpPULL, "RDMA read of Length bytes at RemoteAddr on DstNode into LocalAddr; completes with a PULL_DONE status once all of it landed (SIGNAL or not), or ERROR; the node read from writes no status"},
	{OpIPUSH, "indirect push of Length bytes from LocalAddr to DstNode: its device places them at the tail of the ring its AMT Address Table names for SrcProc (with DIRECT_AMT: ring RemoteAddr), whatever DstProc says"},
	{OpREADDONE, "for an AMT ring in device-head mode: the driver has read up to ring position Imm of ring RemoteAddr; the device advances the head (DIMMnet-2's Prefetch Window read done)"},
	{OpPAGE, "LMMC remote paging request to DstNode: page port Imm into its link page frame RemoteAddr; it travels in order with the data, the receiver gets a PAGE_REQ status and its device then places nothing more from this node until its driver posts PAGE_DONE"},
	{OpPAGEDONE, "LMMC: the driver has paged for DstNode's request; the device places that node's data again"},
	{OpFADD8, "remote fetch-and-add: DstNode's receive engine adds OPERAND to the 8-byte word at RemoteAddr (8-byte aligned, inside its window) atomically and returns the old value, which lands at LocalAddr; LENGTH must be 8. Completes like a PULL: PULL_DONE (its IMM the old value) or ERROR (REMOTE_ADDR outside the window). Executed at most once: the request is a sequenced packet, so a resend is dropped as a duplicate; a command that fails UNREACHABLE or HOLD_LIMIT may have changed the word (its answer was lost), as on an RDMA NIC"},
	{OpCAS8, "remote compare-and-swap: DstNode's receive engine stores IMM into the 8-byte word at RemoteAddr if it equals OPERAND, atomically, and returns the old value (equal to OPERAND: it swapped), which lands at LocalAddr; otherwise as FADD8"},
}

// Command flags (Desc.Flags).
const (
	FlagSignal    = 1 << 0 // write a DONE status when the command completes (errors always do)
	FlagPktStatus = 1 << 1 // the receiver writes a status per packet, not per message
	FlagDirectAMT = 1 << 2 // IPUSH: RemoteAddr is the receiver's AMT index (no AMT Address Table)
	FlagTagged    = 1 << 3 // PUSH: Operand's low 16 bits name the LMMC port whose frames it must land in
	FlagsValid    = FlagSignal | FlagPktStatus | FlagDirectAMT | FlagTagged
)

// FlagNames names the command flag bits for the datasheet.
var FlagNames = []struct {
	Bit  uint8
	Name string
	Doc  string
}{
	{FlagSignal, "SIGNAL", "write a DONE status when the command completes (errors always write one)"},
	{FlagPktStatus, "PKT_STATUS", "the receiver writes a status for every packet, not once per message"},
	{FlagDirectAMT, "DIRECT_AMT", "IPUSH: RemoteAddr names the receiver's AMT entry (the variant without the AMT Address Table)"},
	{FlagTagged, "TAGGED", "PUSH: OPERAND's low 16 bits are an LMMC port; the receiver refuses (and counts MISPLACED) a write to a link page frame whose tag differs; the receiver writes no status for it (LMMC's plain remote write) unless PKT_STATUS"},
}

// DescSize is the size of a command descriptor.
const DescSize = 64

// DescSeqOff is the offset of a descriptor's SEQ word. A slot is published
// when SEQ equals the slot's free-running index + 1; the driver stores it
// last, atomically, and then advances CMDQ_TAIL, which only inspectors read:
// the device polls the SEQ word of the slot at its head, also in its look
// before it sleeps.
const DescSeqOff = 56

// MaxXfer is the largest Length of one command.
const MaxXfer = 1 << 30

// lengthDoc gives MaxXfer's value where the datasheet first uses it.
var lengthDoc = fmt.Sprintf("bytes to move (PUSH, PULL, IPUSH): 1..MaxXfer, MaxXfer = %d (1 GiB); a command moves at most MTU bytes per packet", MaxXfer)

// Alignment that PUSH/PULL/IPUSH addresses must have: DIMMnet-2 moves link
// memory in 8-byte words.
const AddrAlign = 8

// Desc is a command descriptor as the driver writes it into the command
// queue. Link addresses are offsets from the start of link memory.
type Desc struct {
	Opcode     Opcode
	Flags      uint8
	DstNode    uint16
	DstProc    uint32 // receiver's GPID (IPUSH)
	SrcProc    uint32 // sender's GPID
	Length     uint32
	LocalAddr  uint64
	RemoteAddr uint64 // remote link address; AMT index for DIRECT_AMT and READ_DONE
	Cookie     uint64 // returned in the command's DONE or ERROR status
	Imm        uint64 // PUSH/IPUSH: delivered in the receiver's status; READ_DONE: new head
	Operand    uint64 // reserved for atomics
}

// DescFields documents the descriptor layout for the datasheet.
var DescFields = []Field{
	{0, 1, "OPCODE", "Opcode"},
	{1, 1, "FLAGS", "command flags"},
	{2, 2, "DST_NODE", "destination node"},
	{4, 4, "DST_PROC", "IPUSH: the receiving process's GPID. Carried in the packet header only: no device acts on it today (the ring is chosen by SRC_PROC, or by REMOTE_ADDR with DIRECT_AMT, which the header then carries in its place) and no status reports it. PULL, FADD8, CAS8: the GPID read from, carried in the request; the node read from answers as that GPID (the SRC_PROC of its response frames, seen only in a capture), acts on it no further, and no status reports it (PULL_DONE's SRC_PROC is the command's SRC_PROC). PUSH and the rest: carried, unused; 0 will do"},
	{8, 4, "SRC_PROC", "the sender's GPID (node*PROCS_PER_NODE + process): indexes the receiver's AMT Address Table and is reported in the receiver's statuses"},
	{12, 4, "LENGTH", lengthDoc},
	{16, 8, "LOCAL_ADDR", "local link address (8-byte aligned); FADD8, CAS8: where the old value lands"},
	{24, 8, "REMOTE_ADDR", "PUSH, PULL, FADD8, CAS8: remote link address (8-byte aligned); IPUSH with DIRECT_AMT, READ_DONE: AMT index; PAGE: the remote link page frame; ignored by a plain IPUSH"},
	{32, 8, "COOKIE", "any value: returned in this command's DONE, PULL_DONE or ERROR status"},
	{40, 8, "IMM", "immediate delivered to the receiver's status; READ_DONE: new head position; CAS8: the value stored when the word equals OPERAND"},
	{48, 8, "OPERAND", "TAGGED PUSH: the LMMC port (low 16 bits); FADD8: the addend; CAS8: the value compared; otherwise reserved"},
	{56, 8, "SEQ", "publishes the slot: its free-running index + 1, stored last and atomically (the device polls it)"},
}

// Field describes one field of a fixed layout for the datasheet.
type Field struct {
	Off, Size int
	Name, Doc string
}

// Words encodes the descriptor as the 8 little-endian words of its slot.
func (d *Desc) Words() [8]uint64 {
	return [8]uint64{
		uint64(d.Opcode) | uint64(d.Flags)<<8 | uint64(d.DstNode)<<16 | uint64(d.DstProc)<<32,
		uint64(d.SrcProc) | uint64(d.Length)<<32,
		d.LocalAddr,
		d.RemoteAddr,
		d.Cookie,
		d.Imm,
		d.Operand,
		0,
	}
}

// DescFromWords decodes a descriptor slot.
func DescFromWords(w [8]uint64) Desc {
	return Desc{
		Opcode:     Opcode(w[0]),
		Flags:      uint8(w[0] >> 8),
		DstNode:    uint16(w[0] >> 16),
		DstProc:    uint32(w[0] >> 32),
		SrcProc:    uint32(w[1]),
		Length:     uint32(w[1] >> 32),
		LocalAddr:  w[2],
		RemoteAddr: w[3],
		Cookie:     w[4],
		Imm:        w[5],
		Operand:    w[6],
	}
}
