// Package datasheet renders docs/datasheet.md, the C header uapi/dimmnet.h
// and the Python module uapi/dimmnet_uapi.py from the uapi tables, so the
// numbers a driver developer reads or includes are the numbers the code uses.
package datasheet

import (
	"fmt"
	"strings"

	"github.com/dimmnet/dimmnet/uapi"
)

// Render returns the datasheet in Markdown.
func Render() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# dimmnet device datasheet\n\n")
	p("Generated from package `uapi` by `go generate ./uapi`; do not edit. ABI version %d.\n\n", uapi.ABIVersion)
	p("All multi-byte fields are little-endian. Every register is a 64-bit word, 8-byte aligned, read and written only with single atomic 64-bit accesses (see Memory ordering); the words of the AMT Address Table mirror and of the frame tag table are 32-bit.\n")
	p("Ring pointers are free-running 64-bit counters (slot = counter mod entries), so full and empty are never ambiguous.\n")
	p("Link addresses are byte offsets from LINKMEM_OFF.\n\n")
	steps(p)

	p("## Region layout\n\n")
	p("| part | where | size |\n|---|---|---|\n")
	p("| register page | 0 | %d B |\n", uapi.RegPageSize)
	p("| command queue | CMDQ_OFF | CMDQ_ENTRIES x %d B descriptors |\n", uapi.DescSize)
	p("| LLCM: receive status ring | STATQ_OFF | STATQ_ENTRIES x %d B entries |\n", uapi.StatusSize)
	p("| LLCM: AMT | AMT_OFF | AMT_ENTRIES x %d B entries |\n", uapi.AMTSize)
	p("| LLCM: AMT Address Table mirror | AMTAT_MIRROR_OFF | AMTAT_ENTRIES x 4 B, read-only |\n")
	p("| LLCM: frame tag table | FRAME_TAG_OFF | LINKMEM_SIZE / PAGE_SIZE x 4 B: the LMMC port of each link page frame (0: untagged) |\n")
	p("| LLCM: scratch | SCRATCH_OFF | SCRATCH_SIZE (free for drivers) |\n")
	p("| link memory | LINKMEM_OFF | LINKMEM_SIZE: the rest of the region |\n\n")
	p("The region is a power of two in size, at least %d bytes (QEMU maps the whole file as BAR2).\n\n", uapi.MinRegionSize)

	p("## Registers\n\n| offset | name | access | meaning |\n|---|---|---|---|\n")
	for _, r := range uapi.Registers {
		p("| 0x%03X | %s | %s | %s |\n", r.Off, r.Name, r.Access, r.Doc)
	}
	p("\n### Counters (RO)\n\n| offset | name | counts |\n|---|---|---|\n")
	for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
		p("| 0x%03X | %s | %s |\n", c.Off(), c, counterDocs[c])
	}
	p("\n### Trace stamps (RO, CLOCK_MONOTONIC ns of the last data packet while TRACE_CTRL=1)\n\n| offset | name |\n|---|---|\n")
	for i, n := range uapi.TraceNames {
		p("| 0x%03X | %s |\n", uapi.RegTrace+8*i, n)
	}
	p("\n### Feature bits (FEATURES)\n\n| bit | name |\n|---|---|\n")
	for _, f := range uapi.FeatureNames {
		p("| %d | %s |\n", bit(f.Bit), f.Name)
	}

	p("\n## Command descriptor (%d B)\n\n", uapi.DescSize)
	fields(p, uapi.DescFields)
	p("\n### Opcodes\n\n| code | name | meaning |\n|---|---|---|\n")
	for _, o := range uapi.OpcodeDocs {
		p("| %d | %s | %s |\n", o.Op, o.Op, o.Doc)
	}
	p("\n### Command flags\n\n| bit | name | meaning |\n|---|---|---|\n")
	for _, f := range uapi.FlagNames {
		p("| %d | %s | %s |\n", bit(uint64(f.Bit)), f.Name, f.Doc)
	}
	p("\nAddresses of PUSH, PULL and IPUSH are %d-byte aligned; LENGTH is 1..%d.\n", uapi.AddrAlign, uapi.MaxXfer)

	p("\n## Receive status entry (%d B)\n\n", uapi.StatusSize)
	fields(p, uapi.StatusFields)
	p("\n### Status types\n\n| code | name | meaning |\n|---|---|---|\n")
	for _, t := range uapi.StatusTypeDocs {
		p("| %d | %s | %s |\n", t.T, t.T, t.Doc)
	}
	p("\nStatus flags: LAST = %d, FIRST = %d, INTERLEAVED = %d, WRAPPED = %d.\n", uapi.StFlagLast, uapi.StFlagFirst, uapi.StFlagInterleaved, uapi.StFlagWrapped)
	completions(p)

	p("\n## AMT entry (%d B)\n\n", uapi.AMTSize)
	fields(p, uapi.AMTFields)
	p("\nAMT flags: VALID = %d, DEV_HEAD = %d. Packets are placed on %d-byte boundaries.\n", uapi.AMTFlagValid, uapi.AMTFlagDevHead, uapi.RingAlign)

	transports(p)
	startUp(p)
	publishing(p)
	waiting(p)
	consuming(p)
	ordering(p)
	liveness(p)

	p("\n## Command processing and completion order\n\n")
	p("- The device takes descriptors in queue order. CMDQ_HEAD counts the descriptors it has taken: their slots may be reused at once (the device keeps its own copy).\n")
	p("- Local commands (NOP, READ_DONE, PAGE_DONE) run when taken. PUSH, IPUSH, PULL and PAGE join a queue per destination node; destinations progress independently, as queue pairs do on an RDMA NIC, so a destination that is slow or dead does not hold back the others.\n")
	p("- At most MAX_INFLIGHT commands are in flight (taken and not completed). When that many are, the device takes no more until one completes: only then does a slow destination block the queue (head-of-line). READ_DONE and PAGE_DONE are still taken behind a full bound or a waiting FENCE: they are local and may be what unblocks it.\n")
	p("- A FENCE completes once every command posted before it has completed; the device takes nothing after it (but READ_DONE and PAGE_DONE) until then.\n")
	p("- Every command completes exactly once: one DONE (when SIGNAL), PULL_DONE or ERROR status, whose END is the command's index. Completions of commands to one destination come in posting order, except that a PULL completes when its data has landed; completions of different destinations come in any order. Match statuses to commands by END or COOKIE, not by position.\n")
	p("- The device reads a PUSH's or IPUSH's data from LOCAL_ADDR while it sends, until the command completes: leave those bytes alone until then. A command without SIGNAL completes silently: learn that it has from a later signalled FENCE (it completes after every earlier command) or a later signalled PUSH or IPUSH to the same node.\n")
	p("- A PULL's statuses: the node that posted it gets PULL_DONE once every byte landed at LOCAL_ADDR (SIGNAL makes no difference), or ERROR (REMOTE_ADDR when the range lies outside the other node's window, UNREACHABLE, ...). The node read from writes no status and its driver takes no part: its device serves the read from its window and counts it in RX_PULL.\n")
	p("- A command that fails stops: nothing more of it is sent. A destination that stops acknowledging, or that its link reports gone, fails every command queued to it with UNREACHABLE, in posting order; its next command starts a new session with it.\n")
	p("- A receiver reports a message complete (a PUSH status with LAST, an IPUSH_MSG status, PULL_DONE) only when every packet of it was placed; a message cut short (its sender failed it, or restarted) gets no status, and is counted in MSG_CUT.\n")

	p("\n## IPUSH rings\n\n")
	p("Setting up AMT entry i (at AMT_OFF + i*%d), in this order, each word with one atomic 64-bit store:\n\n", uapi.AMTSize)
	p("1. the SIZE|FLAGS word (+%d) = 0: the entry is not VALID while it changes (the device reads the entry at every packet and never uses an entry without VALID);\n", uapi.AMTCfg)
	p("2. BASE (+%d) = the ring's link address; HEAD (+%d) = 0; TAIL (+%d) = 0;\n", uapi.AMTBase, uapi.AMTHead, uapi.AMTTail)
	p("3. last, the SIZE|FLAGS word (+%d) = SIZE | (VALID [| DEV_HEAD]) << 32, a release store.\n\n", uapi.AMTCfg)
	p("Then route senders to it through the AMT Address Table (below), or have them name it with DIRECT_AMT. Reconfigure an entry only while no sender can reach it.\n\n")
	p("- The device never reassembles: each packet is written at its ring's tail in arrival order, and published in this order: data, AMT TAIL, status entry, STATQ_TAIL.\n")
	p("- An IPUSH status's ADDR is an absolute link address (BASE + position mod SIZE), not an offset in the ring; its data is LENGTH bytes there (WRAPPED: OFFSET bytes there, the rest at BASE).\n")
	p("- A packet is never split across the ring's end: if it does not fit before the end, the device skips to the ring start and the skipped bytes are consumed by the same TAIL advance. A message sent without PKT_STATUS is kept contiguous as a whole: its first packet skips to the ring start when the message would cross the end and fits there; when it cannot (larger than the space before its start position) it wraps, and its IPUSH_MSG status has WRAPPED with OFFSET = bytes before the wrap. A message without PKT_STATUS that could not be placed whole from every ring position (its length plus one of its packets exceeds the ring) is refused with TOO_BIG.\n")
	p("- Every IPUSH status carries END, the ring position after its data: storing END as HEAD (a release store, after reading the data) or, in DEV_HEAD mode, posting READ_DONE with IMM=END frees the ring up to there, pads included.\n")
	p("- Ring full: in hold mode (RINGFULL_MODE=0) the device keeps the packet, writes one RING_FULL status per stall and takes no more frames from that link until HEAD moves; in NACK mode (1) it drops and NACKs the packet and the sender sends it again after a backoff (100 µs doubling to 100 ms).\n")
	p("- A full status ring is handled like a full data ring; statuses are never overwritten.\n")

	p("\n## AMT Address Table access\n\n")
	p("The table maps a sender's GPID (node*PROCS_PER_NODE + process; read the PROCS_PER_NODE register, %d today) to an AMT entry; it lives inside the device, so it is reached through registers:\n\n", uapi.ProcsPerNode)
	p("1. store AMTAT_SEL = the GPID (below AMTAT_ENTRIES) and, for a write, AMTAT_DATA = AMTAT_VALID (0x%X) | AMT index, or 0 to remove the entry (the device refuses other bits, or an index not below AMT_ENTRIES);\n", uapi.AMTATValid)
	p("2. store AMTAT_CTRL = seq<<8 | op (read %d, write %d), last, with seq one more than the seq now in AMTAT_CTRL: the device acts when the value changes. Then load DEV_SLEEP and ring the doorbell if 1, as after a command;\n", uapi.AMTATOpRead, uapi.AMTATOpWrite)
	p("3. poll AMTAT_DONE until it reads seq<<8 | result (ok %d, error %d); for a read, AMTAT_DATA then holds the entry.\n\n", uapi.AMTATResultOK, uapi.AMTATResultErr)
	p("AMTAT_MIRROR_OFF shows the table read-only (4 B per GPID, the AMTAT_DATA encoding), for inspectors.\n")

	p("\n## Remote access window\n\n")
	p("WIN_BASE and WIN_SIZE are in bytes of link memory: the window is [WIN_BASE, WIN_BASE + WIN_SIZE), by default [0, LINKMEM_SIZE), all of link memory. Every PUSH packet that arrives and every PULL this device serves must lie wholly inside it; anything else is refused (counted RX_BAD_ADDR here; the sender's command fails with REMOTE_ADDR). The device reads both registers for every packet, so a change applies to the next one; a window that does not fit in link memory exposes nothing. IPUSH is not bound by the window: its data goes only to the rings the AMT describes.\n")

	p("\n## Violations (checked devices)\n\n")
	p("A device made with --check (FEATURES bit CHECK) validates the driver's side of this datasheet. Each violation adds 1 to VIOLATIONS and, at most %d a second, is written into the violation log: %d entries of %d B at offset 0x%03X of the register page; violation n (from 1) is entry (n-1) mod %d. A checked device otherwise behaves exactly as an unchecked one.\n\n", uapi.ViolLogPerSecond, uapi.ViolLogEntries, uapi.ViolEntrySize, uapi.RegViolLog, uapi.ViolLogEntries)
	p("How often a checked device looks, and so how briefly a wrong value can go unseen: it checks the driver's words (read-only registers, STATQ_HEAD, the AMT entries) at the start of every pass of its engine, continuously while it works. While it sleeps (DEV_SLEEP = 1) it looks only when it wakes: on a doorbell or a frame, at the latest when its timer fires, at least every 100 ms (every 50 µs while it waits for ring or status space; within about 2 ms while a missing doorbell is suspected). A wrong value put right again before the next look goes unseen. AMT entries that are not valid are looked at every 64th pass; a descriptor's words are compared when its command completes; a skipped index is looked for when the device falls asleep and at each timed wake-up.\n\n")
	p("| off | field | meaning |\n|---|---|---|\n")
	for _, f := range []struct {
		off  int
		n, d string
	}{{uapi.ViolSeq, "SEQ", "the violation's number, from 1; stored last (0: unused). Read it again after the other words: if it changed, the entry was rewritten meanwhile"},
		{uapi.ViolKind, "KIND", "which rule (below)"}, {uapi.ViolIndex, "INDEX", "the command index, AMT entry or status count concerned"},
		{uapi.ViolWhere, "WHERE", "region offset of the word found wrong"}, {uapi.ViolExpected, "EXPECTED", "what the rule says it should hold"},
		{uapi.ViolGot, "GOT", "what it held"}, {uapi.ViolTime, "TIME", "CLOCK_MONOTONIC ns on the device's host"}} {
		p("| %d | %s | %s |\n", f.off, f.n, f.d)
	}
	p("\n| kind | name | what the device saw | rule in |\n|---|---|---|---|\n")
	for _, v := range uapi.ViolationDocs {
		p("| %d | %s | %s | %s |\n", v.Kind, v.Name, v.What, v.Section)
	}
	p("\n## Error codes\n\n| code | name | meaning |\n|---|---|---|\n")
	for e := uapi.Errno(0); e < uapi.NumErrnos; e++ {
		p("| %d | %s | %s |\n", uint16(e), e.String(), uapi.ErrnoDocs[e])
	}
	p("\n## Device states (STATE)\n\nreset %d, running %d, stopped %d. Ring-full modes (RINGFULL_MODE): hold %d, NACK %d.\n",
		uapi.StateReset, uapi.StateRunning, uapi.StateStopped, uapi.RingFullHold, uapi.RingFullNACK)
	p("\n## Differences from DIMMnet-2\n\n")
	p("- Link memory (DIMMnet-2's SO-DIMM) is mapped directly into the driver's address space here; DIMMnet-2 reaches it only through its Write Window and Prefetch Window. So there is no prefetch request, no Prefetch Window read and no completion poll (Table 7 steps H-J); a driver copies straight out of link memory.\n")
	p("- DIMMnet-2 advances an AMT head when its own SO-DIMM to Prefetch Window read finishes. Here a ring in DEV_HEAD mode is advanced by the READ_DONE command, which stands in for that read.\n")
	p("- Registers are words in shared memory, not MMIO: the device notices writes by polling (and a doorbell when it sleeps), so register side effects (AMT Address Table access) use a CTRL/DONE handshake.\n")
	return b.String()
}

var counterDocs = [uapi.NumCounters]string{
	"descriptors consumed", "commands completed with an error status",
	"data packets sent, retransmits included", "payload bytes sent",
	"data packets accepted and placed", "payload bytes placed",
	"PUSH packets placed", "IPUSH packets placed", "PULL requests served",
	"status entries published", "IPUSH refused: no AMT Address Table entry for the sender",
	"remote accesses outside the exposed window, refused", "frames that failed to decode, dropped",
	"frames of other EtherTypes, ignored", "ring-full stalls in hold mode (one per stall)",
	"packets dropped and NACKed because a ring was full", "NACKs received",
	"packets sent again", "duplicate packets dropped", "packets ahead of sequence dropped",
	"stalls because the status ring was full (one per stall)",
	"per-message statuses whose message was interleaved with another", "standalone ACK frames sent",
	"ACK frames received", "times the engine slept on this device", "doorbell wake-ups",
	"retransmission timeouts", "frames with a bad CRC32C, dropped", "frames held for a peer",
	"TAGGED writes refused: the link page frame belongs to another port", "peers held while their paging request is handled",
	"frames the link port discarded before the device saw them: over its MTU, unicast for another station, receive errors (mirrored from the port with each ALIVE update)",
	"queued frames the kernel refused for good; the reliability layer resends them (mirrored from the port with each ALIVE update)",
	"gap NACKs (SEQ_ERR) sent: a packet beyond the next expected one arrived",
	"packets resent because the receiver reported them missing (no timeout involved)",
	"packets resent after a retransmission timeout",
	"packets placed before the packets ahead of them arrived (selective repeat of UNORDERED packets)",
	"messages cut before their last packet (a session change, a refused packet, or the sender starting the next message): no completion is reported for them",
	"packets accepted in sequence but discarded, because their message was cut or a packet of it refused",
	"IPUSH refused: the AMT entry it names is out of range, invalid or malformed (the sender's command fails BAD_AMT)",
	"NACKs with a code this datasheet does not name: protocol errors, ignored (no command fails with such a code)",
	"frames from node ids the link does not know (not in the peers file; with a key, no session), dropped with no state kept (the port's share mirrored with each ALIVE update)",
	"frames whose source is not the sending node's own (a UDP address other than the peers file's, an Ethernet source other than the header's node), dropped (the port's share mirrored with each ALIVE update)",
	"keyed links: frames without a valid authentication tag (forged, corrupted, or from a station without the key), dropped before the device saw them (mirrored with each ALIVE update)",
	"keyed links: authenticated frames seen before, or older than the replay window, dropped (mirrored with each ALIVE update)",
	"keyed links: sessions established with peers, one per handshake (mirrored with each ALIVE update)",
	"ACKs and PULL responses owed to nodes the link cannot reach, dropped instead of retried",
	"sending sessions ended because the peer held our packets past the hold limit (the commands failed HOLD_LIMIT)",
	"checked devices (FEAT_CHECK): the driver's violations of this datasheet, every one, including those the log's rate limit left out (see Violations)",
}

func fields(p func(string, ...any), fs []uapi.Field) {
	p("| offset | size | name | meaning |\n|---|---|---|---|\n")
	for _, f := range fs {
		p("| %d | %d | %s | %s |\n", f.Off, f.Size, f.Name, f.Doc)
	}
}

func bit(v uint64) int {
	for i := 0; i < 64; i++ {
		if v == 1<<i {
			return i
		}
	}
	return -1
}
