package datasheet

import (
	"fmt"
	"strings"

	"github.com/dimmnet/dimmnet/uapi"
)

// Python renders uapi/dimmnet_uapi.py: the ABI's numbers as a Python 3
// module, with the same names as the C header less its DIMMNET_ prefix,
// so a Python driver (or a test of one) imports them instead of copying.
func Python() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("\"\"\"The dimmnet device ABI, version %d, for Python 3.\n\n", uapi.ABIVersion)
	p("Generated from package uapi by `go generate ./uapi` (with docs/datasheet.md,\n")
	p("which explains every rule, and uapi/dimmnet.h, the same numbers in C); do\n")
	p("not edit. Names are the header's without its DIMMNET_ prefix.\n\"\"\"\n\n")
	p("MAGIC = 0x%X\nABI_VERSION = %d\nREGS_SIZE = %d\nMIN_REGION_SIZE = %d\nPROCS_PER_NODE = %d\n", uapi.Magic, uapi.ABIVersion, uapi.RegPageSize, uapi.MinRegionSize, uapi.ProcsPerNode)
	p("MAX_XFER = %d\nADDR_ALIGN = %d\nRING_ALIGN = %d\n\n", uapi.MaxXfer, uapi.AddrAlign, uapi.RingAlign)

	p("# Register offsets in the register page (64-bit words).\n")
	for _, r := range uapi.Registers {
		p("REG_%s = 0x%03X  # %s\n", cIdent(r.Name), r.Off, r.Access)
	}
	p("REG_COUNTERS = 0x%03X\nREG_TRACE = 0x%03X\nREG_VIOL_LOG = 0x%03X\n\n", uapi.RegCounters, uapi.RegTrace, uapi.RegViolLog)

	p("STATE_RESET, STATE_RUNNING, STATE_STOPPED = %d, %d, %d\n", uapi.StateReset, uapi.StateRunning, uapi.StateStopped)
	p("RINGFULL_HOLD, RINGFULL_NACK = %d, %d\n\n", uapi.RingFullHold, uapi.RingFullNACK)
	p("# Feature bits (FEATURES).\n")
	for _, f := range uapi.FeatureNames {
		p("FEAT_%s = 1 << %d\n", f.Name, bit(f.Bit))
	}
	p("FEATURE_NAMES = {%s}\n\n", pyDict(featureNames()))

	p("# Counters: the word of counter i is at REG_COUNTERS + 8*i.\n")
	for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
		p("CTR_%s = %d\n", c, c)
	}
	p("NUM_COUNTERS = %d\nCOUNTER_NAMES = {%s}\n\n", uapi.NumCounters, pyDict(counterNames()))
	for i, n := range uapi.TraceNames {
		p("%s = %d\n", n, i)
	}
	p("NUM_TRACE = %d\n\n", uapi.NumTrace)

	p("AMTAT_OP_READ, AMTAT_OP_WRITE = %d, %d\nAMTAT_RESULT_OK, AMTAT_RESULT_ERR = %d, %d\nAMTAT_VALID = 0x%X\n\n",
		uapi.AMTATOpRead, uapi.AMTATOpWrite, uapi.AMTATResultOK, uapi.AMTATResultErr, uapi.AMTATValid)

	p("# Opcodes.\n")
	for _, o := range uapi.OpcodeDocs {
		p("OP_%s = %d\n", o.Op, o.Op)
	}
	p("NUM_OPCODES = %d\nOPCODE_NAMES = {%s}\n\n", uapi.NumOpcodes, pyDict(opNames()))
	p("# Command flags.\n")
	for _, f := range uapi.FlagNames {
		p("FLAG_%s = 0x%02X\n", f.Name, f.Bit)
	}
	p("FLAGS_VALID = 0x%02X\n\n", uapi.FlagsValid)

	p("# Command descriptor: (offset, size, name) of each field.\n")
	p("DESC_SIZE = %d\nDESC_SEQ_OFF = %d\nDESC_FIELDS = %s\n\n", uapi.DescSize, uapi.DescSeqOff, pyFields(uapi.DescFields))
	p("# Status types.\n")
	for _, t := range uapi.StatusTypeDocs {
		p("ST_%s = %d\n", t.T, t.T)
	}
	p("NUM_STATUS_TYPES = %d\nSTATUS_NAMES = {%s}\n", uapi.NumStatusTypes, pyDict(statusNames()[1:]))
	p("ST_FLAG_LAST, ST_FLAG_FIRST, ST_FLAG_INTERLEAVED, ST_FLAG_WRAPPED = %d, %d, %d, %d\n",
		uapi.StFlagLast, uapi.StFlagFirst, uapi.StFlagInterleaved, uapi.StFlagWrapped)
	p("STATUS_SIZE = %d\nSTATUS_FIELDS = %s\n\n", uapi.StatusSize, pyFields(uapi.StatusFields))

	p("# AMT entry.\n")
	p("AMT_SIZE = %d\nAMT_BASE, AMT_CFG, AMT_HEAD, AMT_TAIL = %d, %d, %d, %d\nAMT_FLAG_VALID, AMT_FLAG_DEV_HEAD = %d, %d\nAMT_FIELDS = %s\n\n",
		uapi.AMTSize, uapi.AMTBase, uapi.AMTCfg, uapi.AMTHead, uapi.AMTTail, uapi.AMTFlagValid, uapi.AMTFlagDevHead, pyFields(uapi.AMTFields))

	p("# Error codes.\n")
	for e := uapi.Errno(0); e < uapi.NumErrnos; e++ {
		p("E_%s = %d\n", e.String(), e)
	}
	p("NUM_ERRNOS = %d\nERRNO_NAMES = {%s}\n\n", uapi.NumErrnos, pyDict(errnoNames()))

	p("# Checked devices: the violation log.\n")
	p("VIOL_LOG_ENTRIES, VIOL_ENTRY_SIZE, VIOL_LOG_PER_SECOND = %d, %d, %d\n", uapi.ViolLogEntries, uapi.ViolEntrySize, uapi.ViolLogPerSecond)
	p("VIOL_SEQ, VIOL_KIND, VIOL_INDEX, VIOL_WHERE, VIOL_EXPECTED, VIOL_GOT, VIOL_TIME = %d, %d, %d, %d, %d, %d, %d\n",
		uapi.ViolSeq, uapi.ViolKind, uapi.ViolIndex, uapi.ViolWhere, uapi.ViolExpected, uapi.ViolGot, uapi.ViolTime)
	for _, v := range uapi.ViolationDocs {
		p("VIO_%s = %d\n", v.Name, v.Kind)
	}
	p("NUM_VIOLATION_KINDS = %d\nVIOLATION_NAMES = {%s}\n", uapi.NumViolationKinds, pyDict(violationNames()))
	return b.String()
}

func featureNames() (ns []named) {
	for _, f := range uapi.FeatureNames {
		ns = append(ns, named{int(f.Bit), f.Name})
	}
	return ns
}

func pyDict(ns []named) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, fmt.Sprintf("%d: %q", n.v, n.n))
	}
	return strings.Join(parts, ", ")
}

func pyFields(fs []uapi.Field) string {
	var parts []string
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("(%d, %d, %q)", f.Off, f.Size, f.Name))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
