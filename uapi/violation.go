package uapi

import "fmt"

// A checked device (serve --check, pingpong --check, vdev.Config.Check)
// validates the driver's side of this contract and reports what it sees
// broken: each violation moves the VIOLATIONS counter and, at most
// ViolLogPerSecond a second, is written into the violation log in the
// register page, which every transport (a guest's BAR too) can read. It
// behaves exactly as an unchecked device otherwise: a driver developer
// runs the same program both ways and learns what real hardware would
// have hidden until it corrupted something.

// Violation log geometry: ViolLogEntries entries of ViolEntrySize bytes at
// RegViolLog; violation n (from 1) is entry (n-1) mod ViolLogEntries.
const (
	RegViolLog       = 0xC00
	ViolLogEntries   = 16
	ViolEntrySize    = 64
	ViolLogPerSecond = 100
)

// Offsets of the words of a violation log entry. SEQ is stored last, so a
// reader that sees SEQ = n sees entry n whole (read SEQ again after the
// other words: a changed SEQ means the entry was rewritten meanwhile).
const (
	ViolSeq      = 0  // the violation's number, from 1 (0: entry unused)
	ViolKind     = 8  // ViolationKind
	ViolIndex    = 16 // the command index, AMT entry or status count it concerns
	ViolWhere    = 24 // region offset of the word found wrong
	ViolExpected = 32 // what the contract says it should hold
	ViolGot      = 40 // what it held
	ViolTime     = 48 // CLOCK_MONOTONIC ns on the device host
)

// ViolationKind says which rule a driver broke.
type ViolationKind uint64

// The rules a checked device checks; ViolationDocs says each one's name,
// what was seen and the datasheet section that states the rule.
const (
	VioDescChanged  ViolationKind = iota + 1 // a descriptor's words changed after its SEQ was published
	VioStatusHead                            // STATQ_HEAD moved backwards or past STATQ_TAIL
	VioAMTHead                               // an AMT HEAD moved backwards or past its TAIL
	VioReadOnly                              // a read-only register no longer holds the device's value
	VioNoDoorbell                            // a command published while DEV_SLEEP = 1 and no doorbell rung
	VioSlotOverrun                           // a slot republished before the device took its command
	VioAMTChanged                            // an AMT entry set up anew while valid and holding data
	VioSkippedIndex                          // a command published ahead of the next index, which is not: the queue stalls
	NumViolationKinds
)

// ViolationDoc explains one kind for the datasheet, `dimmnet stat` and the
// FUSE view.
type ViolationDoc struct {
	Kind    ViolationKind
	Name    string
	What    string // what the device saw; INDEX, WHERE, EXPECTED and GOT say the rest
	Section string // the datasheet section that states the rule
}

// ViolationDocs lists the kinds in numeric order.
var ViolationDocs = []ViolationDoc{
	{VioDescChanged, "DESC_CHANGED", "a descriptor word, read again when its command completed, differs from what the device took when the slot's SEQ word was published: SEQ was stored before the body was complete (INDEX: the command; WHERE: the word; EXPECTED: taken; GOT: now). Rewriting a slot CMDQ_HEAD has passed, for the slot's next index, is allowed even while its previous command is in flight: it is not reported once the driver has published the index before that next one (INDEX + CMDQ_ENTRIES - 1), as a driver posting in order has; a driver that writes several slots of the next lap before publishing the first of them may be", "Publishing a command"},
	{VioStatusHead, "STATUS_HEAD", "STATQ_HEAD moved backwards, or past STATQ_TAIL (EXPECTED: the bound it broke; GOT: the head)", "Consuming statuses"},
	{VioAMTHead, "AMT_HEAD", "an AMT entry's HEAD moved backwards or past its TAIL while the entry was valid (INDEX: the AMT entry; EXPECTED: the bound it broke; GOT: the head)", "IPUSH rings"},
	{VioReadOnly, "READ_ONLY", "a read-only register, counter or trace stamp no longer holds the value the device stored (WHERE: the register; EXPECTED: the device's value; GOT: what it holds); the device goes on from the new value", "Registers"},
	{VioNoDoorbell, "NO_DOORBELL", "a command was published while DEV_SLEEP was 1 and no doorbell was rung: the device found it only when its sleep timed out, up to 100 ms later (INDEX: the command; WHERE: its slot's SEQ word; EXPECTED: the DOORBELLS count a ring would have made, the count when the device fell asleep + 1; GOT: DOORBELLS as it was, unmoved). Reported once the driver has run on without ringing, i.e. published the next command or moved STATQ_HEAD at least 2 ms after the device found it; a doorbell rung before that is a late one, a legitimate race, not reported", "Publishing a command"},
	{VioSlotOverrun, "SLOT_OVERRUN", "a command slot was published for a later lap (SEQ = index + 1 + k*CMDQ_ENTRIES) before the device took the command at its index: the driver did not keep index - CMDQ_HEAD below CMDQ_ENTRIES (INDEX: the command lost; EXPECTED and GOT: the SEQ values)", "Publishing a command"},
	{VioAMTChanged, "AMT_CHANGED", "an AMT entry's BASE or SIZE|FLAGS was rewritten, or its TAIL set back, while it was valid and its ring held data (TAIL != HEAD) (INDEX: the AMT entry; WHERE: the word; EXPECTED: the old value; GOT: the new)", "IPUSH rings"},
	{VioSkippedIndex, "SKIPPED_INDEX", "a command was published ahead of the next index (its slot's SEQ is its index + 1) while the slot at CMDQ_HEAD is not published, for a second: the driver skipped an index or started at the wrong one, and the device waits at CMDQ_HEAD for ever (INDEX: CMDQ_HEAD, the index never published; WHERE: its SEQ word; EXPECTED: INDEX + 1; GOT: the first index published ahead of it, plus 1). Looked for when the device falls asleep and at each timed wake-up", "Starting up"},
}

// String names the kind as the datasheet and `dimmnet stat` do.
func (k ViolationKind) String() string {
	if k >= 1 && k < NumViolationKinds {
		return ViolationDocs[k-1].Name
	}
	return fmt.Sprintf("VIOLATION(%d)", uint64(k))
}

// Violation is one decoded violation log entry.
type Violation struct {
	Seq, Index, Where, Expected, Got, Time uint64
	Kind                                   ViolationKind
}

// ReadViolations returns the log's entries that are still whole, oldest
// first (at most ViolLogEntries: older ones were overwritten).
func (r Region) ReadViolations() []Violation {
	var vs []Violation
	for i := range uint32(ViolLogEntries) {
		e := RegViolLog + i*ViolEntrySize
		seq := r.Load64(e + ViolSeq)
		if seq == 0 {
			continue
		}
		v := Violation{Seq: seq, Kind: ViolationKind(r.Load64(e + ViolKind)), Index: r.Load64(e + ViolIndex),
			Where: r.Load64(e + ViolWhere), Expected: r.Load64(e + ViolExpected), Got: r.Load64(e + ViolGot),
			Time: r.Load64(e + ViolTime)}
		if r.Load64(e+ViolSeq) != seq {
			continue // rewritten while read
		}
		vs = append(vs, v)
	}
	for i := 1; i < len(vs); i++ { // insertion sort by Seq: at most 16
		for j := i; j > 0 && vs[j].Seq < vs[j-1].Seq; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
	return vs
}

// WriteViolation stores v as entry v.Seq of the log, SEQ last.
func (r Region) WriteViolation(v Violation) {
	e := RegViolLog + uint32((v.Seq-1)%ViolLogEntries)*ViolEntrySize
	r.Store64(e+ViolSeq, 0)
	r.Store64(e+ViolKind, uint64(v.Kind))
	r.Store64(e+ViolIndex, v.Index)
	r.Store64(e+ViolWhere, v.Where)
	r.Store64(e+ViolExpected, v.Expected)
	r.Store64(e+ViolGot, v.Got)
	r.Store64(e+ViolTime, v.Time)
	r.Store64(e+ViolSeq, v.Seq)
}

// String is the entry as one line, for logs and traces.
func (v Violation) String() string {
	return fmt.Sprintf("#%d %v index %d at %#x: expected %#x, got %#x", v.Seq, v.Kind, v.Index, v.Where, v.Expected, v.Got)
}
