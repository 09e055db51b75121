package datasheet

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dimmnet/dimmnet/uapi"
)

// HeaderPath and PythonPath are where go generate ./uapi writes the C and
// Python forms of the ABI, relative to the repository root.
const (
	HeaderPath = "uapi/dimmnet.h"
	PythonPath = "uapi/dimmnet_uapi.py"
)

// cType is the C type of a field of size bytes, or "" for a size that is
// no integer type (a reserved run of bytes).
func cType(size int) string {
	switch size {
	case 1:
		return "uint8_t"
	case 2:
		return "uint16_t"
	case 4:
		return "uint32_t"
	case 8:
		return "uint64_t"
	}
	return ""
}

// cIdent turns a datasheet name into a C identifier part.
func cIdent(s string) string {
	return strings.NewReplacer("-", "_", " ", "_").Replace(s)
}

// comment wraps doc as a C block comment indented by ind.
func comment(ind, doc string) string {
	doc = strings.ReplaceAll(doc, "*/", "* /")
	var b strings.Builder
	words := strings.Fields(doc)
	line := ind + "/*"
	for _, w := range words {
		if len(line)+1+len(w) > 78 && len(line) > len(ind)+3 {
			b.WriteString(line + "\n")
			line = ind + " *"
		}
		line += " " + w
	}
	b.WriteString(line + " */\n")
	return b.String()
}

// structFields are a layout's fields as C members: reserved fields get
// their offset in their name (there may be several), and a field whose
// size is no integer type becomes a byte array.
type cField struct {
	name, typ, arr string
	off, size      int
	doc            string
}

func cFields(fs []uapi.Field) []cField {
	var out []cField
	for _, f := range fs {
		name := strings.ToLower(cIdent(f.Name))
		if f.Name == "RESERVED" {
			name = fmt.Sprintf("reserved%d", f.Off)
		}
		c := cField{name: name, typ: cType(f.Size), off: f.Off, size: f.Size, doc: f.Doc}
		if c.typ == "" {
			c.typ, c.arr = "uint8_t", fmt.Sprintf("[%d]", f.Size)
		}
		out = append(out, c)
	}
	return out
}

// cStruct renders a packed-by-construction struct of fields (each at its
// natural alignment, so no compiler inserts padding) and its asserts.
func cStruct(p printer, name, doc string, fs []cField, size int) {
	p("%s", comment("", doc))
	p("struct %s {\n", name)
	for _, f := range fs {
		p("%s", comment("\t", fmt.Sprintf("+%d: %s", f.off, f.doc)))
		p("\t%s %s%s;\n", f.typ, f.name, f.arr)
	}
	p("};\n")
	for _, f := range fs {
		p("_Static_assert(offsetof(struct %s, %s) == %d, \"%s.%s offset\");\n", name, f.name, f.off, name, f.name)
	}
	p("_Static_assert(sizeof(struct %s) == %d, \"%s size\");\n\n", name, size, name)
}

// Header renders uapi/dimmnet.h: the ABI in C11, every number from the
// same tables as the datasheet.
func Header() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("/* dimmnet.h: the dimmnet device ABI in C11, version %d.\n", uapi.ABIVersion)
	p(" *\n * Generated from package uapi by `go generate ./uapi` (with docs/datasheet.md,\n")
	p(" * which explains every rule); do not edit.\n *\n")
	p(" * All fields are little-endian. Registers, descriptor SEQ words, status\n")
	p(" * words and AMT words are 64-bit and must be accessed with single atomic\n")
	p(" * 64-bit loads and stores (__atomic_load_n / __atomic_store_n, or C11\n")
	p(" * atomic_load_explicit on _Atomic uint64_t): see the datasheet's Memory\n")
	p(" * ordering. The structs below give the layouts; the DIMMNET_REG_* offsets\n")
	p(" * are the same register page as struct dimmnet_regs. */\n")
	p("#ifndef DIMMNET_UAPI_H\n#define DIMMNET_UAPI_H\n\n#include <stddef.h>\n#include <stdint.h>\n\n")

	p("/* Identity. */\n")
	p("#define DIMMNET_MAGIC 0x%XULL /* \"DIMMNET1\" read as a little-endian u64 */\n", uapi.Magic)
	p("#define DIMMNET_ABI_VERSION %dULL /* refuse any other */\n", uapi.ABIVersion)
	p("#define DIMMNET_REGS_SIZE %d\n", uapi.RegPageSize)
	p("#define DIMMNET_MIN_REGION_SIZE %d /* the region is a power of two at least this big */\n", uapi.MinRegionSize)
	p("#define DIMMNET_PROCS_PER_NODE %d /* read the PROCS_PER_NODE register rather than assume it */\n", uapi.ProcsPerNode)
	p("#define DIMMNET_MAX_XFER %dU /* largest LENGTH of one command */\n", uapi.MaxXfer)
	p("#define DIMMNET_ADDR_ALIGN %d /* PUSH, PULL, IPUSH, FADD8, CAS8 addresses */\n", uapi.AddrAlign)
	p("#define DIMMNET_RING_ALIGN %d /* IPUSH packets start on this boundary in a ring */\n\n", uapi.RingAlign)

	p("/* Geometry rules (Starting up): a driver refuses a device unless\n")
	p(" *  - REGION_SIZE equals the bytes it mapped, a power of two >= DIMMNET_MIN_REGION_SIZE;\n")
	p(" *  - CMDQ_OFF + CMDQ_ENTRIES*%d, STATQ_OFF + STATQ_ENTRIES*%d, AMT_OFF + AMT_ENTRIES*%d,\n", uapi.DescSize, uapi.StatusSize, uapi.AMTSize)
	p(" *    LLCM_OFF + LLCM_SIZE, SCRATCH_OFF + SCRATCH_SIZE, LINKMEM_OFF + LINKMEM_SIZE,\n")
	p(" *    AMTAT_MIRROR_OFF + AMTAT_ENTRIES*4 and FRAME_TAG_OFF + (LINKMEM_SIZE/PAGE_SIZE)*4\n")
	p(" *    all lie inside REGION_SIZE, each offset 64-byte aligned;\n")
	p(" *  - CMDQ_ENTRIES and STATQ_ENTRIES are powers of two (slot = index mod entries);\n")
	p(" *  - MTU is at least 64. */\n\n")

	p("/* Register offsets in the register page (64-bit words). */\n")
	for _, r := range uapi.Registers {
		p("%s", comment("", fmt.Sprintf("%s: %s", r.Access, r.Doc)))
		p("#define DIMMNET_REG_%s 0x%03X\n", cIdent(r.Name), r.Off)
	}
	p("/* Counter i is the word at DIMMNET_REG_COUNTERS + 8*i; trace stamp i at DIMMNET_REG_TRACE + 8*i. */\n")
	p("#define DIMMNET_REG_COUNTERS 0x%03X\n#define DIMMNET_REG_TRACE 0x%03X\n", uapi.RegCounters, uapi.RegTrace)
	p("#define DIMMNET_REG_VIOL_LOG 0x%03X /* checked devices: the violation log */\n\n", uapi.RegViolLog)

	regsStruct(p)

	p("/* Device states (STATE). */\n")
	p("#define DIMMNET_STATE_RESET %d\n#define DIMMNET_STATE_RUNNING %d\n#define DIMMNET_STATE_STOPPED %d\n\n", uapi.StateReset, uapi.StateRunning, uapi.StateStopped)
	p("/* Ring-full modes (RINGFULL_MODE). */\n")
	p("#define DIMMNET_RINGFULL_HOLD %d\n#define DIMMNET_RINGFULL_NACK %d\n\n", uapi.RingFullHold, uapi.RingFullNACK)

	p("/* Feature bits (FEATURES). */\n")
	for _, f := range uapi.FeatureNames {
		p("#define DIMMNET_FEAT_%s (1ULL << %d)\n", f.Name, bit(f.Bit))
	}
	p("\n/* Counters: indexes (the word is at DIMMNET_REG_COUNTERS + 8*index). */\n")
	for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
		p("%s", comment("", counterDocs[c]))
		p("#define DIMMNET_CTR_%s %d\n", c, c)
	}
	p("#define DIMMNET_NUM_COUNTERS %d\n\n", uapi.NumCounters)
	p("/* Trace stamps: indexes (CLOCK_MONOTONIC ns of the last data packet while TRACE_CTRL = 1). */\n")
	for i, n := range uapi.TraceNames {
		p("#define DIMMNET_%s %d\n", n, i)
	}
	p("#define DIMMNET_NUM_TRACE %d\n\n", uapi.NumTrace)

	p("/* AMT Address Table access (AMTAT_CTRL = seq<<8 | op; AMTAT_DONE = seq<<8 | result). */\n")
	p("#define DIMMNET_AMTAT_OP_READ %d\n#define DIMMNET_AMTAT_OP_WRITE %d\n", uapi.AMTATOpRead, uapi.AMTATOpWrite)
	p("#define DIMMNET_AMTAT_RESULT_OK %d\n#define DIMMNET_AMTAT_RESULT_ERR %d\n", uapi.AMTATResultOK, uapi.AMTATResultErr)
	p("#define DIMMNET_AMTAT_VALID 0x%XU /* | AMT index (low 16 bits) */\n\n", uapi.AMTATValid)

	p("/* Opcodes (OPCODE). 0 is invalid, so a zeroed descriptor is refused. */\n")
	for _, o := range uapi.OpcodeDocs {
		p("%s", comment("", o.Doc))
		p("#define DIMMNET_OP_%s %d\n", o.Op, o.Op)
	}
	p("#define DIMMNET_NUM_OPCODES %d\n\n", uapi.NumOpcodes)
	p("/* Command flags (FLAGS). */\n")
	for _, f := range uapi.FlagNames {
		p("%s", comment("", f.Doc))
		p("#define DIMMNET_FLAG_%s 0x%02X\n", f.Name, f.Bit)
	}
	p("#define DIMMNET_FLAGS_VALID 0x%02X\n\n", uapi.FlagsValid)

	p("#define DIMMNET_DESC_SIZE %d\n#define DIMMNET_DESC_SEQ_OFF %d /* SEQ = index + 1, stored last: publishes the slot */\n\n", uapi.DescSize, uapi.DescSeqOff)
	cStruct(p, "dimmnet_desc", "A command descriptor, slot index mod CMDQ_ENTRIES at CMDQ_OFF + slot*64. Write words 0 to 6, then store seq atomically (release) last.", cFields(uapi.DescFields), uapi.DescSize)

	p("/* Status types (TYPE). */\n")
	for _, t := range uapi.StatusTypeDocs {
		p("%s", comment("", t.Doc))
		p("#define DIMMNET_ST_%s %d\n", t.T, t.T)
	}
	p("#define DIMMNET_NUM_STATUS_TYPES %d\n\n", uapi.NumStatusTypes)
	p("/* Status flags (FLAGS of a status). */\n")
	p("#define DIMMNET_ST_FLAG_LAST 0x%02X\n#define DIMMNET_ST_FLAG_FIRST 0x%02X\n#define DIMMNET_ST_FLAG_INTERLEAVED 0x%02X\n#define DIMMNET_ST_FLAG_WRAPPED 0x%02X\n\n",
		uapi.StFlagLast, uapi.StFlagFirst, uapi.StFlagInterleaved, uapi.StFlagWrapped)
	p("#define DIMMNET_STATUS_SIZE %d\n\n", uapi.StatusSize)
	cStruct(p, "dimmnet_status", "A receive status entry, head mod STATQ_ENTRIES at STATQ_OFF + slot*64, published by STATQ_TAIL (load it with acquire first).", cFields(uapi.StatusFields), uapi.StatusSize)

	p("#define DIMMNET_AMT_SIZE %d\n", uapi.AMTSize)
	p("#define DIMMNET_AMT_BASE %d\n#define DIMMNET_AMT_CFG %d /* SIZE | FLAGS<<32, one 64-bit word, stored last */\n#define DIMMNET_AMT_HEAD %d\n#define DIMMNET_AMT_TAIL %d\n",
		uapi.AMTBase, uapi.AMTCfg, uapi.AMTHead, uapi.AMTTail)
	p("#define DIMMNET_AMT_FLAG_VALID 0x%X\n#define DIMMNET_AMT_FLAG_DEV_HEAD 0x%X\n\n", uapi.AMTFlagValid, uapi.AMTFlagDevHead)
	cStruct(p, "dimmnet_amt", "An AMT entry, i at AMT_OFF + i*32: one IPUSH ring. Set up: cfg word = 0, then base, head, tail, then the cfg word (size | flags<<32) last with a release store.", cFields(uapi.AMTFields), uapi.AMTSize)

	p("/* Error codes (ERR of an ERROR status; low 16 bits of the ERROR register). */\n")
	for e := uapi.Errno(0); e < uapi.NumErrnos; e++ {
		p("%s", comment("", uapi.ErrnoDocs[e]))
		p("#define DIMMNET_E_%s %d\n", e.String(), e)
	}
	p("#define DIMMNET_NUM_ERRNOS %d\n\n", uapi.NumErrnos)

	p("/* Checked devices: the violation log, %d entries of %d B at DIMMNET_REG_VIOL_LOG;\n", uapi.ViolLogEntries, uapi.ViolEntrySize)
	p(" * violation n (from 1) is entry (n-1) mod %d, at most %d logged a second. */\n", uapi.ViolLogEntries, uapi.ViolLogPerSecond)
	p("#define DIMMNET_VIOL_LOG_ENTRIES %d\n#define DIMMNET_VIOL_ENTRY_SIZE %d\n#define DIMMNET_VIOL_LOG_PER_SECOND %d\n\n", uapi.ViolLogEntries, uapi.ViolEntrySize, uapi.ViolLogPerSecond)
	for _, v := range uapi.ViolationDocs {
		p("%s", comment("", fmt.Sprintf("%s (datasheet: %s)", v.What, v.Section)))
		p("#define DIMMNET_VIO_%s %d\n", v.Name, v.Kind)
	}
	p("#define DIMMNET_NUM_VIOLATION_KINDS %d\n\n", uapi.NumViolationKinds)
	cStruct(p, "dimmnet_violation", "One violation log entry. seq is stored last: read it, the other words, then seq again (changed: the entry was rewritten meanwhile).", violFields(), uapi.ViolEntrySize)

	names(p, "dimmnet_opcode_name", opNames())
	names(p, "dimmnet_status_name", statusNames())
	names(p, "dimmnet_errno_name", errnoNames())
	names(p, "dimmnet_counter_name", counterNames())
	names(p, "dimmnet_violation_name", violationNames())
	p("#endif /* DIMMNET_UAPI_H */\n")
	return b.String()
}

// violFields is the violation log entry as a layout.
func violFields() []cField {
	return []cField{
		{name: "seq", typ: "uint64_t", off: uapi.ViolSeq, size: 8, doc: "the violation's number, from 1 (0: unused); stored last"},
		{name: "kind", typ: "uint64_t", off: uapi.ViolKind, size: 8, doc: "DIMMNET_VIO_*"},
		{name: "index", typ: "uint64_t", off: uapi.ViolIndex, size: 8, doc: "the command index, AMT entry or status count concerned"},
		{name: "where", typ: "uint64_t", off: uapi.ViolWhere, size: 8, doc: "region offset of the word found wrong"},
		{name: "expected", typ: "uint64_t", off: uapi.ViolExpected, size: 8, doc: "what the rule says it should hold"},
		{name: "got", typ: "uint64_t", off: uapi.ViolGot, size: 8, doc: "what it held"},
		{name: "time", typ: "uint64_t", off: uapi.ViolTime, size: 8, doc: "CLOCK_MONOTONIC ns on the device's host"},
		{name: "reserved56", typ: "uint64_t", off: uapi.ViolTime + 8, size: 8, doc: "zero"},
	}
}

// regsStruct renders the register page as a struct of 64-bit words with
// padding between, the counters, trace stamps and violation log as arrays.
func regsStruct(p printer) {
	regs := append([]uapi.Reg(nil), uapi.Registers...)
	sort.Slice(regs, func(i, j int) bool { return regs[i].Off < regs[j].Off })
	p("/* The register page: every member is a 64-bit word accessed atomically. */\n")
	p("struct dimmnet_regs {\n")
	at, pad := uint32(0), 0
	gap := func(to uint32) {
		if to > at {
			p("\tuint64_t pad%d[%d];\n", pad, (to-at)/8)
			pad++
		}
	}
	for _, r := range regs {
		gap(r.Off)
		p("\tuint64_t %s;\n", strings.ToLower(cIdent(r.Name)))
		at = r.Off + 8
	}
	gap(uapi.RegCounters)
	p("\tuint64_t counters[%d]; /* DIMMNET_CTR_* */\n", uapi.NumCounters)
	at = uapi.RegCounters + 8*uint32(uapi.NumCounters)
	gap(uapi.RegTrace)
	p("\tuint64_t trace[%d]; /* DIMMNET_TRACE_* */\n", uapi.NumTrace)
	at = uapi.RegTrace + 8*uint32(uapi.NumTrace)
	gap(uapi.RegViolLog)
	p("\tuint64_t viol_log[%d][%d]; /* struct dimmnet_violation */\n", uapi.ViolLogEntries, uapi.ViolEntrySize/8)
	at = uapi.RegViolLog + uapi.ViolLogEntries*uapi.ViolEntrySize
	gap(uapi.RegPageSize)
	p("};\n")
	for _, r := range regs {
		p("_Static_assert(offsetof(struct dimmnet_regs, %s) == DIMMNET_REG_%s, \"%s offset\");\n", strings.ToLower(cIdent(r.Name)), cIdent(r.Name), r.Name)
	}
	p("_Static_assert(offsetof(struct dimmnet_regs, counters) == DIMMNET_REG_COUNTERS, \"counters offset\");\n")
	p("_Static_assert(offsetof(struct dimmnet_regs, trace) == DIMMNET_REG_TRACE, \"trace offset\");\n")
	p("_Static_assert(offsetof(struct dimmnet_regs, viol_log) == DIMMNET_REG_VIOL_LOG, \"violation log offset\");\n")
	p("_Static_assert(sizeof(struct dimmnet_regs) == DIMMNET_REGS_SIZE, \"register page size\");\n\n")
}

// named is one code and its name, for the name functions.
type named struct {
	v int
	n string
}

func opNames() (ns []named) {
	for o := uapi.Opcode(0); o < uapi.NumOpcodes; o++ {
		ns = append(ns, named{int(o), o.String()})
	}
	return ns
}

func statusNames() (ns []named) {
	for t := uapi.StatusType(0); t < uapi.NumStatusTypes; t++ {
		ns = append(ns, named{int(t), t.String()})
	}
	return ns
}

func errnoNames() (ns []named) {
	for e := uapi.Errno(0); e < uapi.NumErrnos; e++ {
		ns = append(ns, named{int(e), e.String()})
	}
	return ns
}

func counterNames() (ns []named) {
	for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
		ns = append(ns, named{int(c), c.String()})
	}
	return ns
}

func violationNames() (ns []named) {
	for _, v := range uapi.ViolationDocs {
		ns = append(ns, named{int(v.Kind), v.Name})
	}
	return ns
}

// names renders a static inline function from code to name (static
// inline, not a table: an unused function draws no warning).
func names(p printer, fn string, ns []named) {
	p("static inline const char *%s(uint64_t v)\n{\n\tswitch (v) {\n", fn)
	for _, n := range ns {
		p("\tcase %d: return \"%s\";\n", n.v, n.n)
	}
	p("\tdefault: return \"?\";\n\t}\n}\n\n")
}
