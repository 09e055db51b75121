package uapi

import "fmt"

// Errno is the reason a command failed, as the device reports it in an ERROR
// status and in the ERROR register.
type Errno uint16

// Error codes. 0 means no error.
const (
	EOK          Errno = iota
	EBadOpcode         // opcode unknown
	EBadFlags          // flag bits unknown or not valid for the opcode
	EBadLength         // length 0 or above MaxXfer
	EBadAlign          // address not 8-byte aligned
	EBadAddr           // local range outside link memory
	ERemoteAddr        // remote range outside what the remote node exposes
	ENoAMTEntry        // IPUSH: the receiver's AMT Address Table has no entry for the sender
	EBadAMT            // AMT index out of range or the entry is invalid/malformed
	EBadNode           // destination node unknown or the device itself
	EUnreachable       // the peer stopped acknowledging
	EBadHead           // READ_DONE: new head outside [head, tail] or ring not in device-head mode
	ETooBig            // IPUSH: message larger than the ring can ever hold
	EBadTag            // TAGGED PUSH into a link page frame of another port (counted MISPLACED there)
	EHoldLimit         // the peer held the command's packets past the device's hold limit
	NumErrnos
)

var errNames = [NumErrnos]string{
	"OK", "BAD_OPCODE", "BAD_FLAGS", "BAD_LENGTH", "BAD_ALIGN", "BAD_ADDR",
	"REMOTE_ADDR", "NO_AMT_ENTRY", "BAD_AMT", "BAD_NODE", "UNREACHABLE",
	"BAD_HEAD", "TOO_BIG", "BAD_TAG", "HOLD_LIMIT",
}

// ErrnoDocs are the datasheet's explanations, indexed by Errno.
var ErrnoDocs = [NumErrnos]string{
	"no error",
	"opcode unknown",
	"flag bits unknown or not valid for the opcode",
	"length 0 or above MaxXfer",
	"an address is not 8-byte aligned",
	"the local range lies outside link memory",
	"the remote range lies outside the window the remote node exposes (refused there)",
	"IPUSH: the receiver's AMT Address Table has no entry for the sender (refused there)",
	"AMT index out of range, or the entry is invalid or malformed",
	"destination node unknown, or the device itself",
	"the peer stopped acknowledging (on a link that reports gone peers itself, only that report counts), or its link reported it gone (a process at the other end of a shared-memory link exited)",
	"READ_DONE: new head outside [head, tail], or the ring is not in device-head mode",
	"IPUSH: message larger than the ring can ever hold",
	"TAGGED PUSH into a link page frame that belongs to another LMMC port (refused there and counted MISPLACED)",
	"the peer held the command's packets (its ring or status ring full) longer than the sender's hold limit; the sending session to it ends, as for UNREACHABLE (counted HOLD_EXPIRED)",
}

func (e Errno) String() string {
	if e < NumErrnos {
		return errNames[e]
	}
	return fmt.Sprintf("ERRNO(%d)", uint16(e))
}

// Error makes Errno an error, so drivers can return it and callers can
// errors.Is against the constants.
func (e Errno) Error() string { return "dimmnet: " + e.String() }
