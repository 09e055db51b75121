/* dimmnet.h: the dimmnet device ABI in C11, version 7.
 *
 * Generated from package uapi by `go generate ./uapi` (with docs/datasheet.md,
 * which explains every rule); do not edit.
 *
 * All fields are little-endian. Registers, descriptor SEQ words, status
 * words and AMT words are 64-bit and must be accessed with single atomic
 * 64-bit loads and stores (__atomic_load_n / __atomic_store_n, or C11
 * atomic_load_explicit on _Atomic uint64_t): see the datasheet's Memory
 * ordering. The structs below give the layouts; the DIMMNET_REG_* offsets
 * are the same register page as struct dimmnet_regs. */
#ifndef DIMMNET_UAPI_H
#define DIMMNET_UAPI_H

#include <stddef.h>
#include <stdint.h>

/* Identity. */
#define DIMMNET_MAGIC 0x3154454E4D4D4944ULL /* "DIMMNET1" read as a little-endian u64 */
#define DIMMNET_ABI_VERSION 7ULL /* refuse any other */
#define DIMMNET_REGS_SIZE 4096
#define DIMMNET_MIN_REGION_SIZE 1048576 /* the region is a power of two at least this big */
#define DIMMNET_PROCS_PER_NODE 16 /* read the PROCS_PER_NODE register rather than assume it */
#define DIMMNET_MAX_XFER 1073741824U /* largest LENGTH of one command */
#define DIMMNET_ADDR_ALIGN 8 /* PUSH, PULL, IPUSH, FADD8, CAS8 addresses */
#define DIMMNET_RING_ALIGN 8 /* IPUSH packets start on this boundary in a ring */

/* Geometry rules (Starting up): a driver refuses a device unless
 *  - REGION_SIZE equals the bytes it mapped, a power of two >= DIMMNET_MIN_REGION_SIZE;
 *  - CMDQ_OFF + CMDQ_ENTRIES*64, STATQ_OFF + STATQ_ENTRIES*64, AMT_OFF + AMT_ENTRIES*32,
 *    LLCM_OFF + LLCM_SIZE, SCRATCH_OFF + SCRATCH_SIZE, LINKMEM_OFF + LINKMEM_SIZE,
 *    AMTAT_MIRROR_OFF + AMTAT_ENTRIES*4 and FRAME_TAG_OFF + (LINKMEM_SIZE/PAGE_SIZE)*4
 *    all lie inside REGION_SIZE, each offset 64-byte aligned;
 *  - CMDQ_ENTRIES and STATQ_ENTRIES are powers of two (slot = index mod entries);
 *  - MTU is at least 64. */

/* Register offsets in the register page (64-bit words). */
/* RO: 0x3154454E4D4D4944 ("DIMMNET1") */
#define DIMMNET_REG_MAGIC 0x000
/* RO: layout version of this ABI */
#define DIMMNET_REG_ABI_VERSION 0x008
/* RO: feature bits (FEAT_*) */
#define DIMMNET_REG_FEATURES 0x010
/* RO: this device's node id */
#define DIMMNET_REG_NODE_ID 0x018
/* RO: bytes in the whole region (a power of two) */
#define DIMMNET_REG_REGION_SIZE 0x020
/* RO: 0 reset (no link yet), 1 running, 2 stopped (gone for good) */
#define DIMMNET_REG_STATE 0x028
/* RO: heartbeat: the device host's CLOCK_MONOTONIC in ns, stored by the
 * engine every 10 ms while it works, at least every 100 ms asleep (see
 * Liveness) */
#define DIMMNET_REG_ALIVE 0x030
/* RO: largest payload of one packet on the device's link */
#define DIMMNET_REG_MTU 0x038
/* RO: offset of the command queue */
#define DIMMNET_REG_CMDQ_OFF 0x040
/* RO: command queue entries (power of two, 64 B each) */
#define DIMMNET_REG_CMDQ_ENTRIES 0x048
/* RO: offset of the receive status ring (in LLCM) */
#define DIMMNET_REG_STATQ_OFF 0x050
/* RO: status ring entries (power of two, 64 B each) */
#define DIMMNET_REG_STATQ_ENTRIES 0x058
/* RO: offset of the AMT (in LLCM) */
#define DIMMNET_REG_AMT_OFF 0x060
/* RO: AMT entries (32 B each) */
#define DIMMNET_REG_AMT_ENTRIES 0x068
/* RO: AMT Address Table entries (GPIDs 0..n-1) */
#define DIMMNET_REG_AMTAT_ENTRIES 0x070
/* RO: offset of the low latency common memory */
#define DIMMNET_REG_LLCM_OFF 0x078
/* RO: bytes of LLCM */
#define DIMMNET_REG_LLCM_SIZE 0x080
/* RO: offset of the LLCM scratch area free for drivers */
#define DIMMNET_REG_SCRATCH_OFF 0x088
/* RO: bytes of scratch */
#define DIMMNET_REG_SCRATCH_SIZE 0x090
/* RO: offset of link memory; link addresses count from here */
#define DIMMNET_REG_LINKMEM_OFF 0x098
/* RO: bytes of link memory */
#define DIMMNET_REG_LINKMEM_SIZE 0x0A0
/* RO: link page frame size (LMMC) */
#define DIMMNET_REG_PAGE_SIZE 0x0A8
/* RO: GPID = node*PROCS_PER_NODE + process (read it: do not assume a number) */
#define DIMMNET_REG_PROCS_PER_NODE 0x0B0
/* RO: offset of the read-only mirror of the AMT Address Table (LLCM, 4 B per
 * GPID, same encoding as AMTAT_DATA), for inspection */
#define DIMMNET_REG_AMTAT_MIRROR_OFF 0x0B8
/* RO: doorbell/interrupt vectors per peer (ivshmem vectors); 1 in-process */
#define DIMMNET_REG_VECTORS 0x0C0
/* RO: offset of the frame tag table (LLCM; 4 B per link page frame, written
 * by the driver): the LMMC port a TAGGED PUSH into that frame must name */
#define DIMMNET_REG_FRAME_TAG_OFF 0x0C8
/* RO: commands the device keeps in flight (taken, not completed) before it
 * takes no more: see Command processing */
#define DIMMNET_REG_MAX_INFLIGHT 0x0D0
/* RW: the driver stores its next command index here after publishing, for
 * inspectors only: the device never reads it (a descriptor is published by
 * its SEQ word) */
#define DIMMNET_REG_CMDQ_TAIL 0x100
/* RO: free-running index of the next descriptor the device takes: it has
 * taken every one below (their slots are free again; completion is reported
 * by status) */
#define DIMMNET_REG_CMDQ_HEAD 0x140
/* RO: free-running count of status entries the device published */
#define DIMMNET_REG_STATQ_TAIL 0x180
/* RW: free-running count of status entries the driver consumed: the device
 * writes no further than STATQ_ENTRIES past it */
#define DIMMNET_REG_STATQ_HEAD 0x1C0
/* RO: 1 while the device's engine sleeps: after publishing a descriptor (its
 * SEQ) or storing AMTAT_CTRL, load it and ring the doorbell if 1 (see
 * Publishing a command) */
#define DIMMNET_REG_DEV_SLEEP 0x200
/* RW: count of doorbells the driver rang, for inspectors only: writing it
 * wakes nothing, the device never reads it (the doorbell itself is the
 * transport's: see Transports) */
#define DIMMNET_REG_DOORBELL 0x208
/* RW: the driver stores 1 before it blocks on its interrupt and 0 after:
 * while it is 1 the device signals the interrupt after publishing statuses
 * (see Waiting for statuses) */
#define DIMMNET_REG_DRV_WAIT 0x240
/* RO: count of interrupts the device sent */
#define DIMMNET_REG_INTERRUPTS 0x248
/* RW: GPID selected for AMT Address Table access */
#define DIMMNET_REG_AMTAT_SEL 0x280
/* RW: entry value: AMTAT_VALID (0x80000000) | AMT index (low 16 bits); 0: no
 * entry (read result or write value) */
#define DIMMNET_REG_AMTAT_DATA 0x288
/* RW: seq<<8 | op (1 read, 2 write): starts an access when its value changes
 * (use the last seq + 1) */
#define DIMMNET_REG_AMTAT_CTRL 0x290
/* RO: seq<<8 | result (0 ok, 1 error) of the last access */
#define DIMMNET_REG_AMTAT_DONE 0x298
/* RW: 0 hold, 1 NACK: what the receive engine does when an IPUSH ring is full */
#define DIMMNET_REG_RINGFULL_MODE 0x300
/* RW: link address (bytes from LINKMEM_OFF) where the window remote PUSH and
 * PULL may touch starts; default 0 */
#define DIMMNET_REG_WIN_BASE 0x308
/* RW: bytes in that window; default LINKMEM_SIZE (all of link memory). See
 * Remote access window */
#define DIMMNET_REG_WIN_SIZE 0x310
/* RW: 1: take stage timestamps (TRACE_*) of data packets */
#define DIMMNET_REG_TRACE_CTRL 0x318
/* RO: last command error: code | opcode<<16 | (command index &
 * 0xffffffff)<<32 (the ERROR status's END holds the whole index) */
#define DIMMNET_REG_ERROR 0x380
/* RO: commands that completed with an error */
#define DIMMNET_REG_ERROR_COUNT 0x388
/* Counter i is the word at DIMMNET_REG_COUNTERS + 8*i; trace stamp i at DIMMNET_REG_TRACE + 8*i. */
#define DIMMNET_REG_COUNTERS 0x400
#define DIMMNET_REG_TRACE 0x800
#define DIMMNET_REG_VIOL_LOG 0xC00 /* checked devices: the violation log */

/* The register page: every member is a 64-bit word accessed atomically. */
struct dimmnet_regs {
	uint64_t magic;
	uint64_t abi_version;
	uint64_t features;
	uint64_t node_id;
	uint64_t region_size;
	uint64_t state;
	uint64_t alive;
	uint64_t mtu;
	uint64_t cmdq_off;
	uint64_t cmdq_entries;
	uint64_t statq_off;
	uint64_t statq_entries;
	uint64_t amt_off;
	uint64_t amt_entries;
	uint64_t amtat_entries;
	uint64_t llcm_off;
	uint64_t llcm_size;
	uint64_t scratch_off;
	uint64_t scratch_size;
	uint64_t linkmem_off;
	uint64_t linkmem_size;
	uint64_t page_size;
	uint64_t procs_per_node;
	uint64_t amtat_mirror_off;
	uint64_t vectors;
	uint64_t frame_tag_off;
	uint64_t max_inflight;
	uint64_t pad0[5];
	uint64_t cmdq_tail;
	uint64_t pad1[7];
	uint64_t cmdq_head;
	uint64_t pad2[7];
	uint64_t statq_tail;
	uint64_t pad3[7];
	uint64_t statq_head;
	uint64_t pad4[7];
	uint64_t dev_sleep;
	uint64_t doorbell;
	uint64_t pad5[6];
	uint64_t drv_wait;
	uint64_t interrupts;
	uint64_t pad6[6];
	uint64_t amtat_sel;
	uint64_t amtat_data;
	uint64_t amtat_ctrl;
	uint64_t amtat_done;
	uint64_t pad7[12];
	uint64_t ringfull_mode;
	uint64_t win_base;
	uint64_t win_size;
	uint64_t trace_ctrl;
	uint64_t pad8[12];
	uint64_t error;
	uint64_t error_count;
	uint64_t pad9[14];
	uint64_t counters[50]; /* DIMMNET_CTR_* */
	uint64_t pad10[78];
	uint64_t trace[5]; /* DIMMNET_TRACE_* */
	uint64_t pad11[123];
	uint64_t viol_log[16][8]; /* struct dimmnet_violation */
};
_Static_assert(offsetof(struct dimmnet_regs, magic) == DIMMNET_REG_MAGIC, "MAGIC offset");
_Static_assert(offsetof(struct dimmnet_regs, abi_version) == DIMMNET_REG_ABI_VERSION, "ABI_VERSION offset");
_Static_assert(offsetof(struct dimmnet_regs, features) == DIMMNET_REG_FEATURES, "FEATURES offset");
_Static_assert(offsetof(struct dimmnet_regs, node_id) == DIMMNET_REG_NODE_ID, "NODE_ID offset");
_Static_assert(offsetof(struct dimmnet_regs, region_size) == DIMMNET_REG_REGION_SIZE, "REGION_SIZE offset");
_Static_assert(offsetof(struct dimmnet_regs, state) == DIMMNET_REG_STATE, "STATE offset");
_Static_assert(offsetof(struct dimmnet_regs, alive) == DIMMNET_REG_ALIVE, "ALIVE offset");
_Static_assert(offsetof(struct dimmnet_regs, mtu) == DIMMNET_REG_MTU, "MTU offset");
_Static_assert(offsetof(struct dimmnet_regs, cmdq_off) == DIMMNET_REG_CMDQ_OFF, "CMDQ_OFF offset");
_Static_assert(offsetof(struct dimmnet_regs, cmdq_entries) == DIMMNET_REG_CMDQ_ENTRIES, "CMDQ_ENTRIES offset");
_Static_assert(offsetof(struct dimmnet_regs, statq_off) == DIMMNET_REG_STATQ_OFF, "STATQ_OFF offset");
_Static_assert(offsetof(struct dimmnet_regs, statq_entries) == DIMMNET_REG_STATQ_ENTRIES, "STATQ_ENTRIES offset");
_Static_assert(offsetof(struct dimmnet_regs, amt_off) == DIMMNET_REG_AMT_OFF, "AMT_OFF offset");
_Static_assert(offsetof(struct dimmnet_regs, amt_entries) == DIMMNET_REG_AMT_ENTRIES, "AMT_ENTRIES offset");
_Static_assert(offsetof(struct dimmnet_regs, amtat_entries) == DIMMNET_REG_AMTAT_ENTRIES, "AMTAT_ENTRIES offset");
_Static_assert(offsetof(struct dimmnet_regs, llcm_off) == DIMMNET_REG_LLCM_OFF, "LLCM_OFF offset");
_Static_assert(offsetof(struct dimmnet_regs, llcm_size) == DIMMNET_REG_LLCM_SIZE, "LLCM_SIZE offset");
_Static_assert(offsetof(struct dimmnet_regs, scratch_off) == DIMMNET_REG_SCRATCH_OFF, "SCRATCH_OFF offset");
_Static_assert(offsetof(struct dimmnet_regs, scratch_size) == DIMMNET_REG_SCRATCH_SIZE, "SCRATCH_SIZE offset");
_Static_assert(offsetof(struct dimmnet_regs, linkmem_off) == DIMMNET_REG_LINKMEM_OFF, "LINKMEM_OFF offset");
_Static_assert(offsetof(struct dimmnet_regs, linkmem_size) == DIMMNET_REG_LINKMEM_SIZE, "LINKMEM_SIZE offset");
_Static_assert(offsetof(struct dimmnet_regs, page_size) == DIMMNET_REG_PAGE_SIZE, "PAGE_SIZE offset");
_Static_assert(offsetof(struct dimmnet_regs, procs_per_node) == DIMMNET_REG_PROCS_PER_NODE, "PROCS_PER_NODE offset");
_Static_assert(offsetof(struct dimmnet_regs, amtat_mirror_off) == DIMMNET_REG_AMTAT_MIRROR_OFF, "AMTAT_MIRROR_OFF offset");
_Static_assert(offsetof(struct dimmnet_regs, vectors) == DIMMNET_REG_VECTORS, "VECTORS offset");
_Static_assert(offsetof(struct dimmnet_regs, frame_tag_off) == DIMMNET_REG_FRAME_TAG_OFF, "FRAME_TAG_OFF offset");
_Static_assert(offsetof(struct dimmnet_regs, max_inflight) == DIMMNET_REG_MAX_INFLIGHT, "MAX_INFLIGHT offset");
_Static_assert(offsetof(struct dimmnet_regs, cmdq_tail) == DIMMNET_REG_CMDQ_TAIL, "CMDQ_TAIL offset");
_Static_assert(offsetof(struct dimmnet_regs, cmdq_head) == DIMMNET_REG_CMDQ_HEAD, "CMDQ_HEAD offset");
_Static_assert(offsetof(struct dimmnet_regs, statq_tail) == DIMMNET_REG_STATQ_TAIL, "STATQ_TAIL offset");
_Static_assert(offsetof(struct dimmnet_regs, statq_head) == DIMMNET_REG_STATQ_HEAD, "STATQ_HEAD offset");
_Static_assert(offsetof(struct dimmnet_regs, dev_sleep) == DIMMNET_REG_DEV_SLEEP, "DEV_SLEEP offset");
_Static_assert(offsetof(struct dimmnet_regs, doorbell) == DIMMNET_REG_DOORBELL, "DOORBELL offset");
_Static_assert(offsetof(struct dimmnet_regs, drv_wait) == DIMMNET_REG_DRV_WAIT, "DRV_WAIT offset");
_Static_assert(offsetof(struct dimmnet_regs, interrupts) == DIMMNET_REG_INTERRUPTS, "INTERRUPTS offset");
_Static_assert(offsetof(struct dimmnet_regs, amtat_sel) == DIMMNET_REG_AMTAT_SEL, "AMTAT_SEL offset");
_Static_assert(offsetof(struct dimmnet_regs, amtat_data) == DIMMNET_REG_AMTAT_DATA, "AMTAT_DATA offset");
_Static_assert(offsetof(struct dimmnet_regs, amtat_ctrl) == DIMMNET_REG_AMTAT_CTRL, "AMTAT_CTRL offset");
_Static_assert(offsetof(struct dimmnet_regs, amtat_done) == DIMMNET_REG_AMTAT_DONE, "AMTAT_DONE offset");
_Static_assert(offsetof(struct dimmnet_regs, ringfull_mode) == DIMMNET_REG_RINGFULL_MODE, "RINGFULL_MODE offset");
_Static_assert(offsetof(struct dimmnet_regs, win_base) == DIMMNET_REG_WIN_BASE, "WIN_BASE offset");
_Static_assert(offsetof(struct dimmnet_regs, win_size) == DIMMNET_REG_WIN_SIZE, "WIN_SIZE offset");
_Static_assert(offsetof(struct dimmnet_regs, trace_ctrl) == DIMMNET_REG_TRACE_CTRL, "TRACE_CTRL offset");
_Static_assert(offsetof(struct dimmnet_regs, error) == DIMMNET_REG_ERROR, "ERROR offset");
_Static_assert(offsetof(struct dimmnet_regs, error_count) == DIMMNET_REG_ERROR_COUNT, "ERROR_COUNT offset");
_Static_assert(offsetof(struct dimmnet_regs, counters) == DIMMNET_REG_COUNTERS, "counters offset");
_Static_assert(offsetof(struct dimmnet_regs, trace) == DIMMNET_REG_TRACE, "trace offset");
_Static_assert(offsetof(struct dimmnet_regs, viol_log) == DIMMNET_REG_VIOL_LOG, "violation log offset");
_Static_assert(sizeof(struct dimmnet_regs) == DIMMNET_REGS_SIZE, "register page size");

/* Device states (STATE). */
#define DIMMNET_STATE_RESET 0
#define DIMMNET_STATE_RUNNING 1
#define DIMMNET_STATE_STOPPED 2

/* Ring-full modes (RINGFULL_MODE). */
#define DIMMNET_RINGFULL_HOLD 0
#define DIMMNET_RINGFULL_NACK 1

/* Feature bits (FEATURES). */
#define DIMMNET_FEAT_IPUSH (1ULL << 0)
#define DIMMNET_FEAT_AMTAT (1ULL << 1)
#define DIMMNET_FEAT_DIRECT_AMT (1ULL << 2)
#define DIMMNET_FEAT_PULL (1ULL << 3)
#define DIMMNET_FEAT_PKT_STATUS (1ULL << 4)
#define DIMMNET_FEAT_DEV_HEAD (1ULL << 5)
#define DIMMNET_FEAT_HOLD (1ULL << 6)
#define DIMMNET_FEAT_NACK (1ULL << 7)
#define DIMMNET_FEAT_TRACE (1ULL << 8)
#define DIMMNET_FEAT_RELIABLE (1ULL << 9)
#define DIMMNET_FEAT_CHECK (1ULL << 10)

/* Counters: indexes (the word is at DIMMNET_REG_COUNTERS + 8*index). */
/* descriptors consumed */
#define DIMMNET_CTR_CMDS 0
/* commands completed with an error status */
#define DIMMNET_CTR_CMD_ERRORS 1
/* data packets sent, retransmits included */
#define DIMMNET_CTR_TX_PKTS 2
/* payload bytes sent */
#define DIMMNET_CTR_TX_BYTES 3
/* data packets accepted and placed */
#define DIMMNET_CTR_RX_PKTS 4
/* payload bytes placed */
#define DIMMNET_CTR_RX_BYTES 5
/* PUSH packets placed */
#define DIMMNET_CTR_RX_PUSH 6
/* IPUSH packets placed */
#define DIMMNET_CTR_RX_IPUSH 7
/* PULL requests served */
#define DIMMNET_CTR_RX_PULL 8
/* status entries published */
#define DIMMNET_CTR_STATUS_WRITTEN 9
/* IPUSH refused: no AMT Address Table entry for the sender */
#define DIMMNET_CTR_IPUSH_NOENTRY 10
/* remote accesses outside the exposed window, refused */
#define DIMMNET_CTR_RX_BAD_ADDR 11
/* frames that failed to decode, dropped */
#define DIMMNET_CTR_RX_MALFORMED 12
/* frames of other EtherTypes, ignored */
#define DIMMNET_CTR_RX_FOREIGN 13
/* ring-full stalls in hold mode (one per stall) */
#define DIMMNET_CTR_RINGFULL_HOLDS 14
/* packets dropped and NACKed because a ring was full */
#define DIMMNET_CTR_RINGFULL_NACKS 15
/* NACKs received */
#define DIMMNET_CTR_NACKS_RX 16
/* packets sent again */
#define DIMMNET_CTR_RETRANSMITS 17
/* duplicate packets dropped */
#define DIMMNET_CTR_DUPLICATES 18
/* packets ahead of sequence dropped */
#define DIMMNET_CTR_OUT_OF_ORDER 19
/* stalls because the status ring was full (one per stall) */
#define DIMMNET_CTR_STATUS_FULL_STALLS 20
/* per-message statuses whose message was interleaved with another */
#define DIMMNET_CTR_INTERLEAVED 21
/* standalone ACK frames sent */
#define DIMMNET_CTR_ACKS_TX 22
/* ACK frames received */
#define DIMMNET_CTR_ACKS_RX 23
/* times the engine slept on this device */
#define DIMMNET_CTR_SLEEPS 24
/* doorbell wake-ups */
#define DIMMNET_CTR_DOORBELLS 25
/* retransmission timeouts */
#define DIMMNET_CTR_TIMEOUTS 26
/* frames with a bad CRC32C, dropped */
#define DIMMNET_CTR_CRC_FAIL 27
/* frames held for a peer */
#define DIMMNET_CTR_HOLDS 28
/* TAGGED writes refused: the link page frame belongs to another port */
#define DIMMNET_CTR_MISPLACED 29
/* peers held while their paging request is handled */
#define DIMMNET_CTR_PAGING_HOLDS 30
/* frames the link port discarded before the device saw them: over its MTU,
 * unicast for another station, receive errors (mirrored from the port with
 * each ALIVE update) */
#define DIMMNET_CTR_LINK_RX_DROPPED 31
/* queued frames the kernel refused for good; the reliability layer resends
 * them (mirrored from the port with each ALIVE update) */
#define DIMMNET_CTR_LINK_TX_ERRORS 32
/* gap NACKs (SEQ_ERR) sent: a packet beyond the next expected one arrived */
#define DIMMNET_CTR_SEQ_NACKS_TX 33
/* packets resent because the receiver reported them missing (no timeout
 * involved) */
#define DIMMNET_CTR_RETX_GAP 34
/* packets resent after a retransmission timeout */
#define DIMMNET_CTR_RETX_TIMEOUT 35
/* packets placed before the packets ahead of them arrived (selective repeat
 * of UNORDERED packets) */
#define DIMMNET_CTR_RX_UNORDERED 36
/* messages cut before their last packet (a session change, a refused packet,
 * or the sender starting the next message): no completion is reported for
 * them */
#define DIMMNET_CTR_MSG_CUT 37
/* packets accepted in sequence but discarded, because their message was cut
 * or a packet of it refused */
#define DIMMNET_CTR_RX_DISCARDED 38
/* IPUSH refused: the AMT entry it names is out of range, invalid or malformed
 * (the sender's command fails BAD_AMT) */
#define DIMMNET_CTR_IPUSH_BAD_AMT 39
/* NACKs with a code this datasheet does not name: protocol errors, ignored
 * (no command fails with such a code) */
#define DIMMNET_CTR_RX_BAD_NACK 40
/* frames from node ids the link does not know (not in the peers file; with a
 * key, no session), dropped with no state kept (the port's share mirrored
 * with each ALIVE update) */
#define DIMMNET_CTR_RX_UNKNOWN_PEER 41
/* frames whose source is not the sending node's own (a UDP address other than
 * the peers file's, an Ethernet source other than the header's node), dropped
 * (the port's share mirrored with each ALIVE update) */
#define DIMMNET_CTR_RX_SPOOFED 42
/* keyed links: frames without a valid authentication tag (forged, corrupted,
 * or from a station without the key), dropped before the device saw them
 * (mirrored with each ALIVE update) */
#define DIMMNET_CTR_AUTH_FAIL 43
/* keyed links: authenticated frames seen before, or older than the replay
 * window, dropped (mirrored with each ALIVE update) */
#define DIMMNET_CTR_AUTH_REPLAY 44
/* keyed links: sessions established with peers, one per handshake (mirrored
 * with each ALIVE update) */
#define DIMMNET_CTR_AUTH_SESSIONS 45
/* ACKs and PULL responses owed to nodes the link cannot reach, dropped
 * instead of retried */
#define DIMMNET_CTR_OWED_DROPPED 46
/* sending sessions ended because the peer held our packets past the hold
 * limit (the commands failed HOLD_LIMIT) */
#define DIMMNET_CTR_HOLD_EXPIRED 47
/* checked devices (FEAT_CHECK): the driver's violations of this datasheet,
 * every one, including those the log's rate limit left out (see Violations) */
#define DIMMNET_CTR_VIOLATIONS 48
/* */
#define DIMMNET_CTR_TLPS 49
#define DIMMNET_NUM_COUNTERS 50

/* Trace stamps: indexes (CLOCK_MONOTONIC ns of the last data packet while TRACE_CTRL = 1). */
#define DIMMNET_TRACE_CMD_SEEN 0
#define DIMMNET_TRACE_TX 1
#define DIMMNET_TRACE_RX 2
#define DIMMNET_TRACE_PLACED 3
#define DIMMNET_TRACE_STATUS 4
#define DIMMNET_NUM_TRACE 5

/* AMT Address Table access (AMTAT_CTRL = seq<<8 | op; AMTAT_DONE = seq<<8 | result). */
#define DIMMNET_AMTAT_OP_READ 1
#define DIMMNET_AMTAT_OP_WRITE 2
#define DIMMNET_AMTAT_RESULT_OK 0
#define DIMMNET_AMTAT_RESULT_ERR 1
#define DIMMNET_AMTAT_VALID 0x80000000U /* | AMT index (low 16 bits) */

/* Opcodes (OPCODE). 0 is invalid, so a zeroed descriptor is refused. */
/* completes at once; a status only when SIGNAL is set */
#define DIMMNET_OP_NOP 1
/* completes (status when SIGNAL) once every earlier command has completed;
 * nothing after it is taken until then */
#define DIMMNET_OP_FENCE 2
/* RDMA write of Length bytes from LocalAddr to RemoteAddr on DstNode; the
 * receiver gets a PUSH status */
#define DIMMNET_OP_PUSH 3
/* RDMA read of Length bytes at RemoteAddr on DstNode into LocalAddr;
 * completes with a PULL_DONE status once all of it landed (SIGNAL or not), or
 * ERROR; the node read from writes no status */
#define DIMMNET_OP_PULL 4
/* indirect push of Length bytes from LocalAddr to DstNode: its device places
 * them at the tail of the ring its AMT Address Table names for SrcProc (with
 * DIRECT_AMT: ring RemoteAddr), whatever DstProc says */
#define DIMMNET_OP_IPUSH 5
/* for an AMT ring in device-head mode: the driver has read up to ring
 * position Imm of ring RemoteAddr; the device advances the head (DIMMnet-2's
 * Prefetch Window read done) */
#define DIMMNET_OP_READ_DONE 6
/* LMMC remote paging request to DstNode: page port Imm into its link page
 * frame RemoteAddr; it travels in order with the data, the receiver gets a
 * PAGE_REQ status and its device then places nothing more from this node
 * until its driver posts PAGE_DONE */
#define DIMMNET_OP_PAGE 7
/* LMMC: the driver has paged for DstNode's request; the device places that
 * node's data again */
#define DIMMNET_OP_PAGE_DONE 8
/* remote fetch-and-add: DstNode's receive engine adds OPERAND to the 8-byte
 * word at RemoteAddr (8-byte aligned, inside its window) atomically and
 * returns the old value, which lands at LocalAddr; LENGTH must be 8.
 * Completes like a PULL: PULL_DONE (its IMM the old value) or ERROR
 * (REMOTE_ADDR outside the window). Executed at most once: the request is a
 * sequenced packet, so a resend is dropped as a duplicate; a command that
 * fails UNREACHABLE or HOLD_LIMIT may have changed the word (its answer was
 * lost), as on an RDMA NIC */
#define DIMMNET_OP_FADD8 9
/* remote compare-and-swap: DstNode's receive engine stores IMM into the
 * 8-byte word at RemoteAddr if it equals OPERAND, atomically, and returns the
 * old value (equal to OPERAND: it swapped), which lands at LocalAddr;
 * otherwise as FADD8 */
#define DIMMNET_OP_CAS8 10
#define DIMMNET_NUM_OPCODES 11

/* Command flags (FLAGS). */
/* write a DONE status when the command completes (errors always write one) */
#define DIMMNET_FLAG_SIGNAL 0x01
/* the receiver writes a status for every packet, not once per message */
#define DIMMNET_FLAG_PKT_STATUS 0x02
/* IPUSH: RemoteAddr names the receiver's AMT entry (the variant without the
 * AMT Address Table) */
#define DIMMNET_FLAG_DIRECT_AMT 0x04
/* PUSH: OPERAND's low 16 bits are an LMMC port; the receiver refuses (and
 * counts MISPLACED) a write to a link page frame whose tag differs; the
 * receiver writes no status for it (LMMC's plain remote write) unless
 * PKT_STATUS */
#define DIMMNET_FLAG_TAGGED 0x08
#define DIMMNET_FLAGS_VALID 0x0F

#define DIMMNET_DESC_SIZE 64
#define DIMMNET_DESC_SEQ_OFF 56 /* SEQ = index + 1, stored last: publishes the slot */

/* A command descriptor, slot index mod CMDQ_ENTRIES at CMDQ_OFF + slot*64.
 * Write words 0 to 6, then store seq atomically (release) last. */
struct dimmnet_desc {
	/* +0: Opcode */
	uint8_t opcode;
	/* +1: command flags */
	uint8_t flags;
	/* +2: destination node */
	uint16_t dst_node;
	/* +4: IPUSH: the receiving process's GPID. Carried in the packet header
	 * only: no device acts on it today (the ring is chosen by SRC_PROC, or by
	 * REMOTE_ADDR with DIRECT_AMT, which the header then carries in its place)
	 * and no status reports it. PULL, FADD8, CAS8: the GPID read from, carried
	 * in the request; the node read from answers as that GPID (the SRC_PROC of
	 * its response frames, seen only in a capture), acts on it no further, and
	 * no status reports it (PULL_DONE's SRC_PROC is the command's SRC_PROC).
	 * PUSH and the rest: carried, unused; 0 will do */
	uint32_t dst_proc;
	/* +8: the sender's GPID (node*PROCS_PER_NODE + process): indexes the
	 * receiver's AMT Address Table and is reported in the receiver's statuses */
	uint32_t src_proc;
	/* +12: bytes to move (PUSH, PULL, IPUSH): 1..MaxXfer, MaxXfer = 1073741824
	 * (1 GiB); a command moves at most MTU bytes per packet */
	uint32_t length;
	/* +16: local link address (8-byte aligned); FADD8, CAS8: where the old value
	 * lands */
	uint64_t local_addr;
	/* +24: PUSH, PULL, FADD8, CAS8: remote link address (8-byte aligned); IPUSH
	 * with DIRECT_AMT, READ_DONE: AMT index; PAGE: the remote link page frame;
	 * ignored by a plain IPUSH */
	uint64_t remote_addr;
	/* +32: any value: returned in this command's DONE, PULL_DONE or ERROR status */
	uint64_t cookie;
	/* +40: immediate delivered to the receiver's status; READ_DONE: new head
	 * position; CAS8: the value stored when the word equals OPERAND */
	uint64_t imm;
	/* +48: TAGGED PUSH: the LMMC port (low 16 bits); FADD8: the addend; CAS8:
	 * the value compared; otherwise reserved */
	uint64_t operand;
	/* +56: publishes the slot: its free-running index + 1, stored last and
	 * atomically (the device polls it) */
	uint64_t seq;
};
_Static_assert(offsetof(struct dimmnet_desc, opcode) == 0, "dimmnet_desc.opcode offset");
_Static_assert(offsetof(struct dimmnet_desc, flags) == 1, "dimmnet_desc.flags offset");
_Static_assert(offsetof(struct dimmnet_desc, dst_node) == 2, "dimmnet_desc.dst_node offset");
_Static_assert(offsetof(struct dimmnet_desc, dst_proc) == 4, "dimmnet_desc.dst_proc offset");
_Static_assert(offsetof(struct dimmnet_desc, src_proc) == 8, "dimmnet_desc.src_proc offset");
_Static_assert(offsetof(struct dimmnet_desc, length) == 12, "dimmnet_desc.length offset");
_Static_assert(offsetof(struct dimmnet_desc, local_addr) == 16, "dimmnet_desc.local_addr offset");
_Static_assert(offsetof(struct dimmnet_desc, remote_addr) == 24, "dimmnet_desc.remote_addr offset");
_Static_assert(offsetof(struct dimmnet_desc, cookie) == 32, "dimmnet_desc.cookie offset");
_Static_assert(offsetof(struct dimmnet_desc, imm) == 40, "dimmnet_desc.imm offset");
_Static_assert(offsetof(struct dimmnet_desc, operand) == 48, "dimmnet_desc.operand offset");
_Static_assert(offsetof(struct dimmnet_desc, seq) == 56, "dimmnet_desc.seq offset");
_Static_assert(sizeof(struct dimmnet_desc) == 64, "dimmnet_desc size");

/* Status types (TYPE). */
/* PUSH data placed at ADDR (once per message, on its last packet; per packet
 * with PKT_STATUS) */
#define DIMMNET_ST_PUSH 1
/* one IPUSH packet placed in ring AMT at ADDR; OFFSET in message MSG_ID; LAST
 * on the final packet; END is the ring position after it */
#define DIMMNET_ST_IPUSH_PKT 2
/* a whole IPUSH message placed in ring AMT starting at ADDR (INTERLEAVED:
 * another sender's packets came between, so the extent is not contiguous) */
#define DIMMNET_ST_IPUSH_MSG 3
/* a PULL, FADD8 or CAS8 completed (always, SIGNAL or not), OPCODE saying
 * which (4, 9 or 10: match on all three): LENGTH bytes are at ADDR (its
 * LOCAL_ADDR); END is the command's index, COOKIE its cookie, SRC_NODE the
 * node read from; FADD8, CAS8: IMM is the word's old value */
#define DIMMNET_ST_PULL_DONE 4
/* a signaled command completed (PUSH/IPUSH: acknowledged by the receiver);
 * END is its index, COOKIE its cookie, LENGTH its LENGTH */
#define DIMMNET_ST_DONE 5
/* a command failed: OPCODE and END (the command's free-running index; there
 * is no separate index field) name it, ERR says why, COOKIE is its cookie */
#define DIMMNET_ST_ERROR 6
/* hold mode: ring AMT is full; receiving on the link stops until its head
 * moves (one per stall) */
#define DIMMNET_ST_RING_FULL 7
/* LMMC remote paging request from SRC_NODE: page port IMM into link page
 * frame ADDR; nothing more from that node is placed until the driver posts
 * PAGE_DONE */
#define DIMMNET_ST_PAGE_REQ 8
#define DIMMNET_NUM_STATUS_TYPES 9

/* Status flags (FLAGS of a status). */
#define DIMMNET_ST_FLAG_LAST 0x01
#define DIMMNET_ST_FLAG_FIRST 0x02
#define DIMMNET_ST_FLAG_INTERLEAVED 0x04
#define DIMMNET_ST_FLAG_WRAPPED 0x08

#define DIMMNET_STATUS_SIZE 64

/* A receive status entry, head mod STATQ_ENTRIES at STATQ_OFF + slot*64,
 * published by STATQ_TAIL (load it with acquire first). */
struct dimmnet_status {
	/* +0: StatusType */
	uint8_t type;
	/* +1: LAST, FIRST, INTERLEAVED, WRAPPED */
	uint8_t flags;
	/* +2: sending node; DONE, ERROR: this device's own node; PULL_DONE: the node
	 * read from */
	uint16_t src_node;
	/* +4: sending GPID; DONE, ERROR, PULL_DONE: the command's SRC_PROC */
	uint32_t src_proc;
	/* +8: sender's message id */
	uint32_t msg_id;
	/* +12: bytes of this packet or message; DONE: the command's LENGTH; ERROR: 0 */
	uint32_t length;
	/* +16: offset of this packet in its message; IPUSH_MSG with WRAPPED: bytes
	 * before the wrap */
	uint32_t offset;
	/* +20: command opcode (DONE, ERROR, PULL_DONE: PULL_DONE's is PULL, FADD8 or
	 * CAS8) */
	uint8_t opcode;
	/* +21: zero */
	uint8_t reserved21;
	/* +22: AMT index (IPUSH, RING_FULL) */
	uint16_t amt;
	/* +24: error code (ERROR) */
	uint16_t err;
	/* +26: zero */
	uint8_t reserved26[6];
	/* +32: link address (from LINKMEM_OFF, absolute: for IPUSH, BASE + position
	 * mod SIZE, not an offset in the ring) of the data; PULL_DONE: the command's
	 * LOCAL_ADDR; PAGE_REQ: the frame; DONE, ERROR: 0 */
	uint64_t addr;
	/* +40: IPUSH_PKT, IPUSH_MSG: ring position after the data; DONE (a PUSH's
	 * DONE too: an index, not a position in memory), ERROR, PULL_DONE: the
	 * command's free-running index (all 64 bits); PUSH, RING_FULL, PAGE_REQ: 0 */
	uint64_t end;
	/* +48: the command's cookie (DONE, ERROR, PULL_DONE) */
	uint64_t cookie;
	/* +56: sender's immediate (PUSH, IPUSH); PULL_DONE of FADD8 or CAS8: the
	 * word's old value */
	uint64_t imm;
};
_Static_assert(offsetof(struct dimmnet_status, type) == 0, "dimmnet_status.type offset");
_Static_assert(offsetof(struct dimmnet_status, flags) == 1, "dimmnet_status.flags offset");
_Static_assert(offsetof(struct dimmnet_status, src_node) == 2, "dimmnet_status.src_node offset");
_Static_assert(offsetof(struct dimmnet_status, src_proc) == 4, "dimmnet_status.src_proc offset");
_Static_assert(offsetof(struct dimmnet_status, msg_id) == 8, "dimmnet_status.msg_id offset");
_Static_assert(offsetof(struct dimmnet_status, length) == 12, "dimmnet_status.length offset");
_Static_assert(offsetof(struct dimmnet_status, offset) == 16, "dimmnet_status.offset offset");
_Static_assert(offsetof(struct dimmnet_status, opcode) == 20, "dimmnet_status.opcode offset");
_Static_assert(offsetof(struct dimmnet_status, reserved21) == 21, "dimmnet_status.reserved21 offset");
_Static_assert(offsetof(struct dimmnet_status, amt) == 22, "dimmnet_status.amt offset");
_Static_assert(offsetof(struct dimmnet_status, err) == 24, "dimmnet_status.err offset");
_Static_assert(offsetof(struct dimmnet_status, reserved26) == 26, "dimmnet_status.reserved26 offset");
_Static_assert(offsetof(struct dimmnet_status, addr) == 32, "dimmnet_status.addr offset");
_Static_assert(offsetof(struct dimmnet_status, end) == 40, "dimmnet_status.end offset");
_Static_assert(offsetof(struct dimmnet_status, cookie) == 48, "dimmnet_status.cookie offset");
_Static_assert(offsetof(struct dimmnet_status, imm) == 56, "dimmnet_status.imm offset");
_Static_assert(sizeof(struct dimmnet_status) == 64, "dimmnet_status size");

#define DIMMNET_AMT_SIZE 32
#define DIMMNET_AMT_BASE 0
#define DIMMNET_AMT_CFG 8 /* SIZE | FLAGS<<32, one 64-bit word, stored last */
#define DIMMNET_AMT_HEAD 16
#define DIMMNET_AMT_TAIL 24
#define DIMMNET_AMT_FLAG_VALID 0x1
#define DIMMNET_AMT_FLAG_DEV_HEAD 0x2

/* An AMT entry, i at AMT_OFF + i*32: one IPUSH ring. Set up: cfg word = 0,
 * then base, head, tail, then the cfg word (size | flags<<32) last with a
 * release store. */
struct dimmnet_amt {
	/* +0: link address of the ring (8-byte aligned, inside link memory) */
	uint64_t base;
	/* +8: ring bytes (a multiple of 8, not necessarily a power of two; at least
	 * one MTU, up to MaxXfer); written with FLAGS as one 64-bit word, last */
	uint32_t size;
	/* +12: VALID (1), DEV_HEAD (2) */
	uint32_t flags;
	/* +16: free-running byte position freed by the consumer (the driver stores
	 * it; in DEV_HEAD mode the device, on READ_DONE); start 0 */
	uint64_t head;
	/* +24: free-running byte position written by the device; start 0. Position p
	 * is the byte at link address BASE + p mod SIZE; TAIL - HEAD bytes are in
	 * use */
	uint64_t tail;
};
_Static_assert(offsetof(struct dimmnet_amt, base) == 0, "dimmnet_amt.base offset");
_Static_assert(offsetof(struct dimmnet_amt, size) == 8, "dimmnet_amt.size offset");
_Static_assert(offsetof(struct dimmnet_amt, flags) == 12, "dimmnet_amt.flags offset");
_Static_assert(offsetof(struct dimmnet_amt, head) == 16, "dimmnet_amt.head offset");
_Static_assert(offsetof(struct dimmnet_amt, tail) == 24, "dimmnet_amt.tail offset");
_Static_assert(sizeof(struct dimmnet_amt) == 32, "dimmnet_amt size");

/* Error codes (ERR of an ERROR status; low 16 bits of the ERROR register). */
/* no error */
#define DIMMNET_E_OK 0
/* opcode unknown */
#define DIMMNET_E_BAD_OPCODE 1
/* flag bits unknown or not valid for the opcode */
#define DIMMNET_E_BAD_FLAGS 2
/* length 0 or above MaxXfer */
#define DIMMNET_E_BAD_LENGTH 3
/* an address is not 8-byte aligned */
#define DIMMNET_E_BAD_ALIGN 4
/* the local range lies outside link memory */
#define DIMMNET_E_BAD_ADDR 5
/* the remote range lies outside the window the remote node exposes (refused
 * there) */
#define DIMMNET_E_REMOTE_ADDR 6
/* IPUSH: the receiver's AMT Address Table has no entry for the sender
 * (refused there) */
#define DIMMNET_E_NO_AMT_ENTRY 7
/* AMT index out of range, or the entry is invalid or malformed */
#define DIMMNET_E_BAD_AMT 8
/* destination node unknown, or the device itself */
#define DIMMNET_E_BAD_NODE 9
/* the peer stopped acknowledging (on a link that reports gone peers itself,
 * only that report counts), or its link reported it gone (a process at the
 * other end of a shared-memory link exited) */
#define DIMMNET_E_UNREACHABLE 10
/* READ_DONE: new head outside [head, tail], or the ring is not in device-head
 * mode */
#define DIMMNET_E_BAD_HEAD 11
/* IPUSH: message larger than the ring can ever hold */
#define DIMMNET_E_TOO_BIG 12
/* TAGGED PUSH into a link page frame that belongs to another LMMC port
 * (refused there and counted MISPLACED) */
#define DIMMNET_E_BAD_TAG 13
/* the peer held the command's packets (its ring or status ring full) longer
 * than the sender's hold limit; the sending session to it ends, as for
 * UNREACHABLE (counted HOLD_EXPIRED) */
#define DIMMNET_E_HOLD_LIMIT 14
#define DIMMNET_NUM_ERRNOS 15

/* Checked devices: the violation log, 16 entries of 64 B at DIMMNET_REG_VIOL_LOG;
 * violation n (from 1) is entry (n-1) mod 16, at most 100 logged a second. */
#define DIMMNET_VIOL_LOG_ENTRIES 16
#define DIMMNET_VIOL_ENTRY_SIZE 64
#define DIMMNET_VIOL_LOG_PER_SECOND 100

/* a descriptor word, read again when its command completed, differs from what
 * the device took when the slot's SEQ word was published: SEQ was stored
 * before the body was complete (INDEX: the command; WHERE: the word;
 * EXPECTED: taken; GOT: now). Rewriting a slot CMDQ_HEAD has passed, for the
 * slot's next index, is allowed even while its previous command is in flight:
 * it is not reported once the driver has published the index before that next
 * one (INDEX + CMDQ_ENTRIES - 1), as a driver posting in order has; a driver
 * that writes several slots of the next lap before publishing the first of
 * them may be (datasheet: Publishing a command) */
#define DIMMNET_VIO_DESC_CHANGED 1
/* STATQ_HEAD moved backwards, or past STATQ_TAIL (EXPECTED: the bound it
 * broke; GOT: the head) (datasheet: Consuming statuses) */
#define DIMMNET_VIO_STATUS_HEAD 2
/* an AMT entry's HEAD moved backwards or past its TAIL while the entry was
 * valid (INDEX: the AMT entry; EXPECTED: the bound it broke; GOT: the head)
 * (datasheet: IPUSH rings) */
#define DIMMNET_VIO_AMT_HEAD 3
/* a read-only register, counter or trace stamp no longer holds the value the
 * device stored (WHERE: the register; EXPECTED: the device's value; GOT: what
 * it holds); the device goes on from the new value (datasheet: Registers) */
#define DIMMNET_VIO_READ_ONLY 4
/* a command was published while DEV_SLEEP was 1 and no doorbell was rung: the
 * device found it only when its sleep timed out, up to 100 ms later (INDEX:
 * the command; WHERE: its slot's SEQ word; EXPECTED: the DOORBELLS count a
 * ring would have made, the count when the device fell asleep + 1; GOT:
 * DOORBELLS as it was, unmoved). Reported once the driver has run on without
 * ringing, i.e. published the next command or moved STATQ_HEAD at least 2 ms
 * after the device found it; a doorbell rung before that is a late one, a
 * legitimate race, not reported (datasheet: Publishing a command) */
#define DIMMNET_VIO_NO_DOORBELL 5
/* a command slot was published for a later lap (SEQ = index + 1 +
 * k*CMDQ_ENTRIES) before the device took the command at its index: the driver
 * did not keep index - CMDQ_HEAD below CMDQ_ENTRIES (INDEX: the command lost;
 * EXPECTED and GOT: the SEQ values) (datasheet: Publishing a command) */
#define DIMMNET_VIO_SLOT_OVERRUN 6
/* an AMT entry's BASE or SIZE|FLAGS was rewritten, or its TAIL set back,
 * while it was valid and its ring held data (TAIL != HEAD) (INDEX: the AMT
 * entry; WHERE: the word; EXPECTED: the old value; GOT: the new) (datasheet:
 * IPUSH rings) */
#define DIMMNET_VIO_AMT_CHANGED 7
/* a command was published ahead of the next index (its slot's SEQ is its
 * index + 1) while the slot at CMDQ_HEAD is not published, for a second: the
 * driver skipped an index or started at the wrong one, and the device waits
 * at CMDQ_HEAD for ever (INDEX: CMDQ_HEAD, the index never published; WHERE:
 * its SEQ word; EXPECTED: INDEX + 1; GOT: the first index published ahead of
 * it, plus 1). Looked for when the device falls asleep and at each timed
 * wake-up (datasheet: Starting up) */
#define DIMMNET_VIO_SKIPPED_INDEX 8
#define DIMMNET_NUM_VIOLATION_KINDS 9

/* One violation log entry. seq is stored last: read it, the other words, then
 * seq again (changed: the entry was rewritten meanwhile). */
struct dimmnet_violation {
	/* +0: the violation's number, from 1 (0: unused); stored last */
	uint64_t seq;
	/* +8: DIMMNET_VIO_* */
	uint64_t kind;
	/* +16: the command index, AMT entry or status count concerned */
	uint64_t index;
	/* +24: region offset of the word found wrong */
	uint64_t where;
	/* +32: what the rule says it should hold */
	uint64_t expected;
	/* +40: what it held */
	uint64_t got;
	/* +48: CLOCK_MONOTONIC ns on the device's host */
	uint64_t time;
	/* +56: zero */
	uint64_t reserved56;
};
_Static_assert(offsetof(struct dimmnet_violation, seq) == 0, "dimmnet_violation.seq offset");
_Static_assert(offsetof(struct dimmnet_violation, kind) == 8, "dimmnet_violation.kind offset");
_Static_assert(offsetof(struct dimmnet_violation, index) == 16, "dimmnet_violation.index offset");
_Static_assert(offsetof(struct dimmnet_violation, where) == 24, "dimmnet_violation.where offset");
_Static_assert(offsetof(struct dimmnet_violation, expected) == 32, "dimmnet_violation.expected offset");
_Static_assert(offsetof(struct dimmnet_violation, got) == 40, "dimmnet_violation.got offset");
_Static_assert(offsetof(struct dimmnet_violation, time) == 48, "dimmnet_violation.time offset");
_Static_assert(offsetof(struct dimmnet_violation, reserved56) == 56, "dimmnet_violation.reserved56 offset");
_Static_assert(sizeof(struct dimmnet_violation) == 64, "dimmnet_violation size");

static inline const char *dimmnet_opcode_name(uint64_t v)
{
	switch (v) {
	case 0: return "INVALID";
	case 1: return "NOP";
	case 2: return "FENCE";
	case 3: return "PUSH";
	case 4: return "PULL";
	case 5: return "IPUSH";
	case 6: return "READ_DONE";
	case 7: return "PAGE";
	case 8: return "PAGE_DONE";
	case 9: return "FADD8";
	case 10: return "CAS8";
	default: return "?";
	}
}

static inline const char *dimmnet_status_name(uint64_t v)
{
	switch (v) {
	case 0: return "INVALID";
	case 1: return "PUSH";
	case 2: return "IPUSH_PKT";
	case 3: return "IPUSH_MSG";
	case 4: return "PULL_DONE";
	case 5: return "DONE";
	case 6: return "ERROR";
	case 7: return "RING_FULL";
	case 8: return "PAGE_REQ";
	default: return "?";
	}
}

static inline const char *dimmnet_errno_name(uint64_t v)
{
	switch (v) {
	case 0: return "OK";
	case 1: return "BAD_OPCODE";
	case 2: return "BAD_FLAGS";
	case 3: return "BAD_LENGTH";
	case 4: return "BAD_ALIGN";
	case 5: return "BAD_ADDR";
	case 6: return "REMOTE_ADDR";
	case 7: return "NO_AMT_ENTRY";
	case 8: return "BAD_AMT";
	case 9: return "BAD_NODE";
	case 10: return "UNREACHABLE";
	case 11: return "BAD_HEAD";
	case 12: return "TOO_BIG";
	case 13: return "BAD_TAG";
	case 14: return "HOLD_LIMIT";
	default: return "?";
	}
}

static inline const char *dimmnet_counter_name(uint64_t v)
{
	switch (v) {
	case 0: return "CMDS";
	case 1: return "CMD_ERRORS";
	case 2: return "TX_PKTS";
	case 3: return "TX_BYTES";
	case 4: return "RX_PKTS";
	case 5: return "RX_BYTES";
	case 6: return "RX_PUSH";
	case 7: return "RX_IPUSH";
	case 8: return "RX_PULL";
	case 9: return "STATUS_WRITTEN";
	case 10: return "IPUSH_NOENTRY";
	case 11: return "RX_BAD_ADDR";
	case 12: return "RX_MALFORMED";
	case 13: return "RX_FOREIGN";
	case 14: return "RINGFULL_HOLDS";
	case 15: return "RINGFULL_NACKS";
	case 16: return "NACKS_RX";
	case 17: return "RETRANSMITS";
	case 18: return "DUPLICATES";
	case 19: return "OUT_OF_ORDER";
	case 20: return "STATUS_FULL_STALLS";
	case 21: return "INTERLEAVED";
	case 22: return "ACKS_TX";
	case 23: return "ACKS_RX";
	case 24: return "SLEEPS";
	case 25: return "DOORBELLS";
	case 26: return "TIMEOUTS";
	case 27: return "CRC_FAIL";
	case 28: return "HOLDS";
	case 29: return "MISPLACED";
	case 30: return "PAGING_HOLDS";
	case 31: return "LINK_RX_DROPPED";
	case 32: return "LINK_TX_ERRORS";
	case 33: return "SEQ_NACKS_TX";
	case 34: return "RETX_GAP";
	case 35: return "RETX_TIMEOUT";
	case 36: return "RX_UNORDERED";
	case 37: return "MSG_CUT";
	case 38: return "RX_DISCARDED";
	case 39: return "IPUSH_BAD_AMT";
	case 40: return "RX_BAD_NACK";
	case 41: return "RX_UNKNOWN_PEER";
	case 42: return "RX_SPOOFED";
	case 43: return "AUTH_FAIL";
	case 44: return "AUTH_REPLAY";
	case 45: return "AUTH_SESSIONS";
	case 46: return "OWED_DROPPED";
	case 47: return "HOLD_EXPIRED";
	case 48: return "VIOLATIONS";
	case 49: return "TLPS";
	default: return "?";
	}
}

static inline const char *dimmnet_violation_name(uint64_t v)
{
	switch (v) {
	case 1: return "DESC_CHANGED";
	case 2: return "STATUS_HEAD";
	case 3: return "AMT_HEAD";
	case 4: return "READ_ONLY";
	case 5: return "NO_DOORBELL";
	case 6: return "SLOT_OVERRUN";
	case 7: return "AMT_CHANGED";
	case 8: return "SKIPPED_INDEX";
	default: return "?";
	}
}

#endif /* DIMMNET_UAPI_H */
