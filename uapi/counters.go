package uapi

// Counter indexes the device's counters; counter c is the 64-bit word at
// RegCounters + 8*c. Only the device writes them.
type Counter int

// Counters. New ones go at the end: the index is ABI.
const (
	CtrCmds             Counter = iota // descriptors consumed
	CtrCmdErrors                       // commands completed with an error status
	CtrTxPkts                          // data packets sent (PUSH, IPUSH, PULL request/response), retransmits included
	CtrTxBytes                         // payload bytes sent
	CtrRxPkts                          // data packets accepted and placed
	CtrRxBytes                         // payload bytes placed
	CtrRxPush                          // PUSH packets placed
	CtrRxIPush                         // IPUSH packets placed
	CtrRxPull                          // PULL requests served
	CtrStatusWritten                   // status entries published
	CtrIPushNoEntry                    // IPUSH refused: sender has no AMT Address Table entry
	CtrRxBadAddr                       // remote access outside the exposed window or link memory, refused
	CtrRxMalformed                     // frames that failed to decode, counted and dropped
	CtrRxForeign                       // frames of other EtherTypes, ignored
	CtrRingFullHolds                   // ring-full stalls in hold mode (one per stall)
	CtrRingFullNACKs                   // packets dropped and NACKed because a ring was full
	CtrNACKsRx                         // NACKs received
	CtrRetransmits                     // packets sent again
	CtrDuplicates                      // duplicate packets dropped
	CtrOutOfOrder                      // packets ahead of sequence dropped
	CtrStatusFullStalls                // stalls because the status ring was full (one per stall)
	CtrInterleaved                     // per-message statuses written while other senders' packets interleaved
	CtrAcksTx                          // standalone ACK frames sent
	CtrAcksRx                          // ACK frames received
	CtrSleeps                          // times the engine went to sleep on this device
	CtrDoorbells                       // doorbell wake-ups seen
	CtrTimeouts                        // retransmission timeouts
	CtrCRCFail                         // frames with a bad CRC32C, dropped
	CtrHolds                           // frames held for a peer (lossy links)
	CtrMisplaced                       // TAGGED writes refused: the frame belongs to another port
	CtrPagingHolds                     // peers held while their paging request is handled
	CtrLinkRxDropped                   // frames the link port discarded before the device saw them (over its MTU, for another station, receive errors)
	CtrLinkTxErrors                    // queued frames the kernel refused for good (the reliability layer resends them)
	CtrSeqNACKsTx                      // gap NACKs (SEQ_ERR) sent: a packet beyond the next expected arrived
	CtrRetxGap                         // packets resent because the receiver reported them missing (no timeout)
	CtrRetxTimeout                     // packets resent after a retransmission timeout
	CtrRxUnordered                     // packets placed before the packets ahead of them arrived (selective repeat)
	CtrMsgCut                          // messages cut before their last packet (session change, refusal, a new message first): no completion reported
	CtrRxDiscarded                     // packets accepted in sequence but discarded: their message was cut or a packet of it refused
	CtrIPushBadAMT                     // IPUSH refused: the AMT entry it names is out of range, invalid or malformed
	CtrRxBadNack                       // NACKs with a code the datasheet does not name: protocol errors, ignored
	CtrRxUnknownPeer                   // frames from node ids the link does not know (not in the peers file, no session), dropped with no state kept
	CtrRxSpoofed                       // frames whose source (UDP address, Ethernet source) is not the sending node's own, dropped
	CtrAuthFail                        // keyed links: frames without a valid message authentication code, dropped
	CtrAuthReplay                      // keyed links: authenticated frames seen before (or too old for the replay window), dropped
	CtrAuthSessions                    // keyed links: authenticated sessions established with peers (handshakes completed)
	CtrOwedDropped                     // ACKs and PULL responses owed to nodes the link cannot reach, dropped instead of retried
	CtrHoldExpired                     // sending sessions ended because the peer held our packets past the hold limit
	CtrViolations                      // checked devices: the driver's violations of this contract, all of them (the log keeps the latest)
	CtrTLPs                            // tail-loss probes: a peer's last unacknowledged packet sent again after a quiet time shorter than the retransmission timeout (in RETRANSMITS, not in TIMEOUTS)
	NumCounters
)

// CounterNames are the datasheet and inspector names of the counters.
var CounterNames = [NumCounters]string{
	"CMDS", "CMD_ERRORS", "TX_PKTS", "TX_BYTES", "RX_PKTS", "RX_BYTES",
	"RX_PUSH", "RX_IPUSH", "RX_PULL", "STATUS_WRITTEN", "IPUSH_NOENTRY",
	"RX_BAD_ADDR", "RX_MALFORMED", "RX_FOREIGN", "RINGFULL_HOLDS",
	"RINGFULL_NACKS", "NACKS_RX", "RETRANSMITS", "DUPLICATES", "OUT_OF_ORDER",
	"STATUS_FULL_STALLS", "INTERLEAVED", "ACKS_TX", "ACKS_RX", "SLEEPS",
	"DOORBELLS", "TIMEOUTS", "CRC_FAIL", "HOLDS", "MISPLACED", "PAGING_HOLDS",
	"LINK_RX_DROPPED", "LINK_TX_ERRORS", "SEQ_NACKS_TX", "RETX_GAP", "RETX_TIMEOUT",
	"RX_UNORDERED", "MSG_CUT", "RX_DISCARDED", "IPUSH_BAD_AMT", "RX_BAD_NACK",
	"RX_UNKNOWN_PEER", "RX_SPOOFED", "AUTH_FAIL", "AUTH_REPLAY", "AUTH_SESSIONS",
	"OWED_DROPPED", "HOLD_EXPIRED", "VIOLATIONS", "TLPS",
}

func (c Counter) String() string {
	if c >= 0 && c < NumCounters {
		return CounterNames[c]
	}
	return "COUNTER?"
}

// Off is the counter's offset in the region.
func (c Counter) Off() uint32 { return RegCounters + 8*uint32(c) }
