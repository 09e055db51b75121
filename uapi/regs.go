// Package uapi is the driver-visible ABI of one dimmnet device: the layout of
// its shared region (register page, command queue, LLCM with the receive
// status ring and the AMT, link memory), the command descriptor, the receive
// status entry, the AMT entry, opcodes, flags and error codes, with atomic
// accessors over a mapped region.
//
// It holds no logic beyond encoding: the device model (vdev) and every driver
// (driver, guest binaries, a user's own) agree through this package only.
// docs/datasheet.md is generated from the tables here (go generate ./uapi) and
// a test fails when the two disagree, so the numbers live once.
package uapi

import "fmt"

//go:generate go run ./gendatasheet -o ../docs/datasheet.md -h dimmnet.h -py dimmnet_uapi.py

// Magic identifies a dimmnet register page ("DIMMNET1" read as a little-endian
// u64). A driver that finds anything else at offset 0 is not looking at a
// dimmnet device (the PCI ids of an ivshmem device identify nothing).
const Magic uint64 = 0x3154454E4D4D4944

// ABIVersion is bumped on every incompatible change of this package's layouts.
const ABIVersion uint64 = 7

// RegPageSize is the size of the register page at offset 0 of the region.
const RegPageSize = 4096

// MinRegionSize is the smallest region: QEMU maps the whole file as a PCI BAR,
// which must be a power of two, and below 1 MiB nothing useful fits.
const MinRegionSize = 1 << 20

// ProcsPerNode fixes the global process id space: GPID = node*ProcsPerNode +
// local process. One id space for the whole system is what the IPUSH AMT
// Address Table is indexed by.
const ProcsPerNode = 16

// GPID returns the global process id of local process proc on node.
func GPID(node uint16, proc uint32) uint32 { return uint32(node)*ProcsPerNode + proc }

// GPIDNode returns the node of a global process id.
func GPIDNode(gpid uint32) uint16 { return uint16(gpid / ProcsPerNode) }

// Access says who writes a register.
type Access uint8

// Register access classes.
const (
	// RO registers are written by the device only; a driver reads them.
	RO Access = iota
	// RW registers are written by the driver and read by the device.
	RW
)

func (a Access) String() string {
	if a == RW {
		return "RW"
	}
	return "RO"
}

// Register offsets in the register page. Every register is a 64-bit word read
// and written with sync/atomic. Pointers the two sides exchange sit on cache
// lines of their own so a producer and a consumer never false-share.
const (
	RegMagic        = 0x000
	RegABIVersion   = 0x008
	RegFeatures     = 0x010
	RegNodeID       = 0x018
	RegRegionSize   = 0x020
	RegState        = 0x028
	RegAlive        = 0x030
	RegMTU          = 0x038
	RegCmdqOff      = 0x040
	RegCmdqEntries  = 0x048
	RegStatqOff     = 0x050
	RegStatqEntries = 0x058
	RegAMTOff       = 0x060
	RegAMTEntries   = 0x068
	RegAMTATEntries = 0x070
	RegLLCMOff      = 0x078
	RegLLCMSize     = 0x080
	RegScratchOff   = 0x088
	RegScratchSize  = 0x090
	RegLinkMemOff   = 0x098
	RegLinkMemSize  = 0x0A0
	RegPageSizeReg  = 0x0A8
	RegProcsPerNode = 0x0B0
	RegAMTATMirOff  = 0x0B8
	RegVectors      = 0x0C0
	RegFrameTagOff  = 0x0C8
	RegMaxInflight  = 0x0D0

	RegCmdqTail  = 0x100
	RegCmdqHead  = 0x140
	RegStatqTail = 0x180
	RegStatqHead = 0x1C0

	RegDevSleep   = 0x200
	RegDoorbell   = 0x208
	RegDrvWait    = 0x240
	RegInterrupts = 0x248

	RegAMTATSel  = 0x280
	RegAMTATData = 0x288
	RegAMTATCtrl = 0x290
	RegAMTATDone = 0x298

	RegRingFullMode = 0x300
	RegWinBase      = 0x308
	RegWinSize      = 0x310
	RegTraceCtrl    = 0x318

	RegError      = 0x380
	RegErrorCount = 0x388

	RegCounters = 0x400 // Counter i is at RegCounters + 8*i.
	RegTrace    = 0x800 // Trace stamp i is at RegTrace + 8*i.
)

// Device states in RegState.
const (
	StateReset   = 0
	StateRunning = 1
	StateStopped = 2
)

// StateName names a STATE value as the inspection tools print it; a value
// the ABI does not define is "unknown" (printed beside its number), never
// hidden.
func StateName(v uint64) string {
	switch v {
	case StateReset:
		return "reset"
	case StateRunning:
		return "running"
	case StateStopped:
		return "stopped"
	}
	return "unknown"
}

// Feature bits in RegFeatures.
const (
	FeatIPUSH     = 1 << 0 // IPUSH with the AMT
	FeatAMTAT     = 1 << 1 // AMT Address Table (sender id -> AMT entry)
	FeatDirectAMT = 1 << 2 // IPUSH naming the AMT entry (no table)
	FeatPULL      = 1 << 3
	FeatPktStatus = 1 << 4  // per-packet receive status
	FeatDevHead   = 1 << 5  // device-advanced AMT head (READ_DONE)
	FeatHold      = 1 << 6  // ring-full hold mode
	FeatNACK      = 1 << 7  // ring-full NACK mode
	FeatTrace     = 1 << 8  // stage timestamps (RegTraceCtrl)
	FeatReliable  = 1 << 9  // per-peer sequence numbers and ACKs
	FeatCheck     = 1 << 10 // a checked device: violations are counted and logged at VIOL_LOG
)

// FeatureNames names the feature bits, in bit order: the datasheet, the
// header, `dimmnet stat` and `dimmnet devices` all print these names.
var FeatureNames = []struct {
	Bit  uint64
	Name string
}{
	{FeatIPUSH, "IPUSH"}, {FeatAMTAT, "AMTAT"}, {FeatDirectAMT, "DIRECT_AMT"},
	{FeatPULL, "PULL"}, {FeatPktStatus, "PKT_STATUS"}, {FeatDevHead, "DEV_HEAD"},
	{FeatHold, "HOLD"}, {FeatNACK, "NACK"}, {FeatTrace, "TRACE"}, {FeatReliable, "RELIABLE"},
	{FeatCheck, "CHECK"},
}

// Features names the bits set in a FEATURES value; an unknown bit shows as
// BIT<n>, so nothing a device reports is hidden.
func Features(v uint64) []string {
	var names []string
	known := uint64(0)
	for _, f := range FeatureNames {
		known |= f.Bit
		if v&f.Bit != 0 {
			names = append(names, f.Name)
		}
	}
	for b := 0; b < 64; b++ {
		if v&^known&(1<<b) != 0 {
			names = append(names, fmt.Sprintf("BIT%d", b))
		}
	}
	return names
}

// Ring-full modes in RegRingFullMode (per device).
const (
	RingFullHold = 0 // stop receiving on that link until the head moves
	RingFullNACK = 1 // drop and NACK; the sender retransmits
)

// AMT Address Table access: the driver writes RegAMTATSel (a GPID) and, for a
// write, RegAMTATData, then RegAMTATCtrl = seq<<8 | op with a fresh seq; the
// device executes it and stores RegAMTATDone = seq<<8 | result, and for a read
// puts the entry in RegAMTATData. The table lives inside the device (as in
// DIMMnet-2's controller), not in shared memory.
const (
	AMTATOpRead  = 1
	AMTATOpWrite = 2

	AMTATResultOK  = 0
	AMTATResultErr = 1 // GPID out of range, bad op or AMT index out of range

	// AMTATValid marks a table entry that maps to an AMT entry; the low 16
	// bits are the AMT index. Without it IPUSH from that sender is refused.
	AMTATValid = 1 << 31
)

// Trace stamps (RegTrace + 8*i): CLOCK_MONOTONIC ns of the last data packet,
// written only while RegTraceCtrl is 1.
const (
	TraceCmdSeen = iota // command engine read the descriptor
	TraceTx             // frame handed to the link
	TraceRx             // frame taken from the link
	TracePlaced         // payload written into link memory
	TraceStatus         // status entry and tail published
	NumTrace
)

// Reg describes one register for the datasheet and the inspector.
type Reg struct {
	Name   string
	Off    uint32
	Access Access
	Doc    string
}

// Registers lists every register of the page except counters and trace
// stamps, which Counters and TraceNames describe.
var Registers = []Reg{
	{"MAGIC", RegMagic, RO, "0x3154454E4D4D4944 (\"DIMMNET1\")"},
	{"ABI_VERSION", RegABIVersion, RO, "layout version of this ABI"},
	{"FEATURES", RegFeatures, RO, "feature bits (FEAT_*)"},
	{"NODE_ID", RegNodeID, RO, "this device's node id"},
	{"REGION_SIZE", RegRegionSize, RO, "bytes in the whole region (a power of two)"},
	{"STATE", RegState, RO, "0 reset (no link yet), 1 running, 2 stopped (gone for good)"},
	{"ALIVE", RegAlive, RO, "heartbeat: the device host's CLOCK_MONOTONIC in ns, stored by the engine every 10 ms while it works, at least every 100 ms asleep (see Liveness)"},
	{"MTU", RegMTU, RO, "largest payload of one packet on the device's link"},
	{"CMDQ_OFF", RegCmdqOff, RO, "offset of the command queue"},
	{"CMDQ_ENTRIES", RegCmdqEntries, RO, "command queue entries (power of two, 64 B each)"},
	{"STATQ_OFF", RegStatqOff, RO, "offset of the receive status ring (in LLCM)"},
	{"STATQ_ENTRIES", RegStatqEntries, RO, "status ring entries (power of two, 64 B each)"},
	{"AMT_OFF", RegAMTOff, RO, "offset of the AMT (in LLCM)"},
	{"AMT_ENTRIES", RegAMTEntries, RO, "AMT entries (32 B each)"},
	{"AMTAT_ENTRIES", RegAMTATEntries, RO, "AMT Address Table entries (GPIDs 0..n-1)"},
	{"LLCM_OFF", RegLLCMOff, RO, "offset of the low latency common memory"},
	{"LLCM_SIZE", RegLLCMSize, RO, "bytes of LLCM"},
	{"SCRATCH_OFF", RegScratchOff, RO, "offset of the LLCM scratch area free for drivers"},
	{"SCRATCH_SIZE", RegScratchSize, RO, "bytes of scratch"},
	{"LINKMEM_OFF", RegLinkMemOff, RO, "offset of link memory; link addresses count from here"},
	{"LINKMEM_SIZE", RegLinkMemSize, RO, "bytes of link memory"},
	{"PAGE_SIZE", RegPageSizeReg, RO, "link page frame size (LMMC)"},
	{"PROCS_PER_NODE", RegProcsPerNode, RO, "GPID = node*PROCS_PER_NODE + process (read it: do not assume a number)"},
	{"AMTAT_MIRROR_OFF", RegAMTATMirOff, RO, "offset of the read-only mirror of the AMT Address Table (LLCM, 4 B per GPID, same encoding as AMTAT_DATA), for inspection"},
	{"VECTORS", RegVectors, RO, "doorbell/interrupt vectors per peer (ivshmem vectors); 1 in-process"},
	{"FRAME_TAG_OFF", RegFrameTagOff, RO, "offset of the frame tag table (LLCM; 4 B per link page frame, written by the driver): the LMMC port a TAGGED PUSH into that frame must name"},
	{"MAX_INFLIGHT", RegMaxInflight, RO, "commands the device keeps in flight (taken, not completed) before it takes no more: see Command processing"},
	{"CMDQ_TAIL", RegCmdqTail, RW, "the driver stores its next command index here after publishing, for inspectors only: the device never reads it (a descriptor is published by its SEQ word)"},
	{"CMDQ_HEAD", RegCmdqHead, RO, "free-running index of the next descriptor the device takes: it has taken every one below (their slots are free again; completion is reported by status)"},
	{"STATQ_TAIL", RegStatqTail, RO, "free-running count of status entries the device published"},
	{"STATQ_HEAD", RegStatqHead, RW, "free-running count of status entries the driver consumed: the device writes no further than STATQ_ENTRIES past it"},
	{"DEV_SLEEP", RegDevSleep, RO, "1 while the device's engine sleeps: after publishing a descriptor (its SEQ) or storing AMTAT_CTRL, load it and ring the doorbell if 1 (see Publishing a command)"},
	{"DOORBELL", RegDoorbell, RW, "count of doorbells the driver rang, for inspectors only: writing it wakes nothing, the device never reads it (the doorbell itself is the transport's: see Transports)"},
	{"DRV_WAIT", RegDrvWait, RW, "the driver stores 1 before it blocks on its interrupt and 0 after: while it is 1 the device signals the interrupt after publishing statuses (see Waiting for statuses)"},
	{"INTERRUPTS", RegInterrupts, RO, "count of interrupts the device sent"},
	{"AMTAT_SEL", RegAMTATSel, RW, "GPID selected for AMT Address Table access"},
	{"AMTAT_DATA", RegAMTATData, RW, amtatDataDoc},
	{"AMTAT_CTRL", RegAMTATCtrl, RW, "seq<<8 | op (1 read, 2 write): starts an access when its value changes (use the last seq + 1)"},
	{"AMTAT_DONE", RegAMTATDone, RO, "seq<<8 | result (0 ok, 1 error) of the last access"},
	{"RINGFULL_MODE", RegRingFullMode, RW, "0 hold, 1 NACK: what the receive engine does when an IPUSH ring is full"},
	{"WIN_BASE", RegWinBase, RW, "link address (bytes from LINKMEM_OFF) where the window remote PUSH and PULL may touch starts; default 0"},
	{"WIN_SIZE", RegWinSize, RW, "bytes in that window; default LINKMEM_SIZE (all of link memory). See Remote access window"},
	{"TRACE_CTRL", RegTraceCtrl, RW, "1: take stage timestamps (TRACE_*) of data packets"},
	{"ERROR", RegError, RO, "last command error: code | opcode<<16 | (command index & 0xffffffff)<<32 (the ERROR status's END holds the whole index)"},
	{"ERROR_COUNT", RegErrorCount, RO, "commands that completed with an error"},
}

// amtatDataDoc spells out AMTAT_VALID's value for the register table.
var amtatDataDoc = fmt.Sprintf("entry value: AMTAT_VALID (%#x) | AMT index (low 16 bits); 0: no entry (read result or write value)", AMTATValid)

// TraceNames names the trace stamps, index i at RegTrace+8*i.
var TraceNames = [NumTrace]string{"TRACE_CMD_SEEN", "TRACE_TX", "TRACE_RX", "TRACE_PLACED", "TRACE_STATUS"}
