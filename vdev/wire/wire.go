// Package wire defines the on-the-wire format shared by every dimmnet
// device, so that two devices (and any capture tool) agree on the meaning
// of each byte without sharing code beyond this package.
//
// A dimmnet frame is an Ethernet II frame with EtherType 0x88B5 (IEEE
// "local experimental"), followed by a fixed 64-byte little-endian
// [Header] and PayloadLen bytes of payload:
//
//	| dst MAC (6) | src MAC (6) | 0x88B5 (2) | Header (64) | payload |
//
// The package offers two views of the same bytes. [Header] is a gopacket
// layer, registered for EtherType 0x88B5 at init time, so captures and
// tests can use gopacket.NewPacket, gopacket.SerializeLayers and
// gopacket.DecodingLayerParser as with any built-in protocol. [AppendFrame]
// and [Parser] are the allocation-free fast path the device runs on every
// packet; tests pin them to produce and accept exactly what the gopacket
// path does. The tables [Fields], [TypeDocs], [FlagDocs] and [NackDocs]
// describe the format for humans; go generate renders them into
// docs/wire.md and the Wireshark dissector tools/wireshark/dimmnet.lua.
package wire

//go:generate go run ./genwire -md ../../docs/wire.md -lua ../../tools/wireshark/dimmnet.lua

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// EtherType identifies dimmnet frames. 0x88B5 is the IEEE 802 "local
// experimental EtherType 1", reserved for exactly this kind of private
// protocol, so it cannot collide with anything a real network carries.
const EtherType = layers.EthernetType(0x88B5)

// Sizes used to budget buffers and MTUs without hard-coding numbers at
// call sites.
const (
	// HeaderLen is the fixed size of the dimmnet header; it is fixed so
	// that the payload always starts at a known offset.
	HeaderLen = 64
	// EthHeaderLen is the untagged Ethernet II header (two MACs and the
	// EtherType); dimmnet never sends VLAN tags.
	EthHeaderLen = 14
	// FrameOverhead is the number of bytes a frame carries besides its
	// payload; subtract it from the link MTU to size packets.
	FrameOverhead = EthHeaderLen + HeaderLen
)

// Version1 is the only header layout defined so far. Receivers reject
// other versions because the field offsets may differ.
const Version1 uint8 = 1

// Byte offsets of header fields, for code that patches a header in place
// (tests pin them to Fields).
const (
	offChecksum = 60
	offTag      = 58
)

// LayerTypeDimmnet is the gopacket layer type of [Header]. 1885 lies in
// the 1000-1999 range gopacket sets aside for fast application-specific
// layer types.
var LayerTypeDimmnet = gopacket.RegisterLayerType(1885, gopacket.LayerTypeMetadata{
	Name:    "Dimmnet",
	Decoder: gopacket.DecodeFunc(decodeDimmnet),
})

func init() {
	// Both fields matter: DecodeWith is what gopacket.NewPacket follows
	// from the Ethernet layer, LayerType is what DecodingLayerParser uses
	// to find our DecodingLayer.
	layers.EthernetTypeMetadata[EtherType] = layers.EnumMetadata{
		DecodeWith: gopacket.DecodeFunc(decodeDimmnet),
		Name:       "Dimmnet",
		LayerType:  LayerTypeDimmnet,
	}
}

// Type says what a packet asks of its receiver; it selects how Addr, Imm
// and the payload are interpreted.
type Type uint8

// Packet types; [TypeDocs] says what each one asks of its receiver. Zero
// is deliberately unused so that an all-zero header never looks valid.
const (
	TypePush     Type = 1
	TypeIPush    Type = 2
	TypePullReq  Type = 3
	TypePullResp Type = 4
	TypeAck      Type = 5
	TypeNack     Type = 6
	// TypePage is sequenced like the data it orders: a PUSH sent after it
	// must not land before the receiver has paged the port in.
	TypePage Type = 7
	// TypeHello is the keyed link's handshake; it never reaches a device,
	// the link's authenticator consumes it.
	TypeHello Type = 8
	// TypeFAdd8 and TypeCAS8 are remote atomics: sequenced, so a resend
	// is dropped as a duplicate and the word is changed once.
	TypeFAdd8 Type = 9
	TypeCAS8  Type = 10
	// TypePushBatch carries several small PUSH messages in one frame
	// (batch.go): one sequence number, one frame and one ring slot for
	// them all.
	TypePushBatch Type = 11
)

// Steps of a HELLO handshake (its Code), see docs/wire.md "Authenticated
// links".
const (
	HelloOffer   uint16 = 0 // the sender's fresh nonce; it answers nothing
	HelloAnswer  uint16 = 1 // the sender's fresh nonce, answering the receiver's
	HelloConfirm uint16 = 2 // the sender has taken the session both nonces make
)

// HelloNonceLen is the size of each nonce of a HELLO's payload, which is
// the sender's nonce followed by the receiver's nonce it answers (zero in
// an offer).
const HelloNonceLen = 32

// AuthTrailerLen is what flag Auth adds after the payload: an 8-byte frame
// counter (little-endian) and a 16-byte authentication tag. The header is
// full, so authentication is a trailer, which a receiver without a key
// ignores like any bytes after PayloadLen.
const AuthTrailerLen = 8 + 16

// TypeDoc names and explains one packet type.
type TypeDoc struct {
	Type Type
	Name string // as Type.String, docs/wire.md and the dissector print it
	Doc  string // what the packet asks of its receiver, and how it uses the fields
}

// TypeDocs is the one list of packet types, in numeric order. Type.Valid
// and Type.String read it, and go generate renders it into docs/wire.md
// and the Wireshark dissector, so a type added here is known everywhere
// and a type missing here is rejected everywhere.
var TypeDocs = []TypeDoc{
	{TypePush, "PUSH", "write the payload into the receiver's link memory at Addr (with flag Tagged: only into link page frames of LMMC port Tag)"},
	{TypeIPush, "IPUSH", "deliver the payload to process DstProc (with flag DirectAMT: to AMT entry DstProc)"},
	{TypePullReq, "PULLREQ", "ask for MsgLen bytes at the receiver's address Addr, to be returned to the requester's address Imm"},
	{TypePullResp, "PULLRESP", "data answering a PULLREQ, to be placed at the requester's address Addr"},
	{TypeAck, "ACK", "acknowledge: Ack (with flag AckValid) is cumulative; with flag Hold the receiver holds packet Seq; with flag Sack, Imm lists packets placed beyond Ack+1; all of the receiver's session Tag"},
	{TypeNack, "NACK", "report that packet Seq of the receiver's session Tag was not placed; Code says why (see NACK codes)"},
	{TypePage, "PAGE", "LMMC remote paging request: page LMMC port Imm into the receiver's link page frame Addr"},
	{TypeHello, "HELLO", "keyed links: a handshake step (Code: 0 offer, 1 answer, 2 confirm); the payload is the sender's 32-byte nonce, then the receiver's nonce it answers (zero in an offer); consumed by the link's authenticator, never by a device"},
	{TypeFAdd8, "FADD8", "add the payload's first 8 bytes (little-endian) to the receiver's aligned 8-byte word at Addr atomically; return the old value in a PULLRESP to the requester's address Imm (MsgLen 8)"},
	{TypeCAS8, "CAS8", "if the receiver's aligned 8-byte word at Addr equals the payload's first 8 bytes, store its second 8, atomically; return the old value in a PULLRESP to the requester's address Imm (MsgLen 8)"},
	{TypePushBatch, "PUSHB", "several whole PUSH messages: MsgLen sub-messages, each a 32-byte sub-header (see PUSHB sub-messages) and its data padded to 8 bytes; each is placed and given its status as a one-packet PUSH would be; a refusal NACK's Imm has bit i set for each refused sub-message i"},
}

// typeNames is TypeDocs indexed by type, so Valid and String cost one load.
var typeNames = func() (n [256]string) {
	for _, d := range TypeDocs {
		n[d.Type] = d.Name
	}
	return n
}()

// Valid reports whether t is a defined type, so receivers can drop
// packets from incompatible peers before acting on them.
func (t Type) Valid() bool { return typeNames[t] != "" }

// String names the type the way the protocol documentation does, for logs
// and packet dumps.
func (t Type) String() string {
	if t.Valid() {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Flags qualifies a packet; bits not defined below are carried unchanged
// so that newer peers can add flags without breaking older ones.
type Flags uint16

// Flag bits; [FlagDocs] says what each one means. The comments here say
// why a flag exists.
const (
	// FlagPktStatus serves senders that need to know about each packet
	// rather than only the message.
	FlagPktStatus Flags = 1 << 0
	// FlagLast lets the receiver know a message is complete without
	// counting bytes.
	FlagLast Flags = 1 << 1
	// FlagFirst marks where a message starts.
	FlagFirst Flags = 1 << 2
	// FlagDirectAMT is the IPUSH variant that bypasses the AMT Address
	// Table lookup.
	FlagDirectAMT Flags = 1 << 3
	// FlagCRC is optional so that links that already guarantee integrity
	// can skip the cost.
	FlagCRC Flags = 1 << 4
	// FlagHold lets the sender tell a holding receiver from a plain ACK,
	// so it keeps its packet and does not count the peer unreachable.
	FlagHold Flags = 1 << 5
	// FlagAckValid lets any packet piggyback an acknowledgement (of the
	// session its Tag names, so a late one of an ended session cannot
	// acknowledge the numbers its successor uses again).
	FlagAckValid Flags = 1 << 6
	// FlagSignal asks for a completion, which not every message needs.
	FlagSignal Flags = 1 << 7
	// FlagSeq is a flag rather than a reserved Seq value, so every 32-bit
	// number is a usable sequence number and the count may wrap.
	FlagSeq Flags = 1 << 8
	// FlagTagged lets LMMC check that a PUSH lands only in link page
	// frames of the port it was written for.
	FlagTagged Flags = 1 << 9
	// FlagUnordered enables selective repeat, as IRN does for RDMA
	// writes: the sender sets it only on a PUSH or PULLRESP packet that is
	// not its message's last, asks for no per-packet status, and whose
	// range no earlier operation still in flight to that peer touches;
	// then arrival order cannot change what memory holds once the
	// messages complete.
	FlagUnordered Flags = 1 << 10
	// FlagSack tells the sender which packets need no resend while the
	// receiver holds packets placed out of order.
	FlagSack Flags = 1 << 11
	// FlagRefused confirms a refusal: a receiver holds its cumulative ACK
	// below every packet it refused until the sender says it has the
	// refusal, so a lost refusal NACK cannot let a later ACK complete the
	// refused command as if its data had been placed.
	FlagRefused Flags = 1 << 12
	// FlagAuth marks a frame of a keyed link: it carries the
	// authentication trailer, and a keyed receiver takes no frame without.
	FlagAuth Flags = 1 << 13
)

// FlagDoc names and explains one flag bit.
type FlagDoc struct {
	Flag Flags  // exactly one bit
	Name string // as Flags.String, docs/wire.md and the dissector print it
	Doc  string // what the bit says about the packet
}

// FlagDocs is the one list of flag bits, lowest bit first. Flags.String
// reads it, and go generate renders it into docs/wire.md and the
// Wireshark dissector, so a flag added here is named everywhere.
var FlagDocs = []FlagDoc{
	{FlagPktStatus, "PktStatus", "per-packet receive status requested"},
	{FlagLast, "Last", "last packet of the message"},
	{FlagFirst, "First", "first packet of the message"},
	{FlagDirectAMT, "DirectAMT", "DstProc is an AMT entry index (the IPUSH variant without the AMT Address Table)"},
	{FlagCRC, "CRC", "Checksum is valid and must be verified"},
	{FlagHold, "Hold", "ACK: the receiver holds packet Seq (it is not lost); NACK RETRY: the hold has ended, send everything from Seq now"},
	{FlagAckValid, "AckValid", "Ack carries a cumulative ack of the receiver's session Tag (any packet but a Tagged PUSH can piggyback one)"},
	{FlagSignal, "Signal", "the sender wants a completion for this message"},
	{FlagSeq, "Seq", "Seq is a sequence number to check (every data packet); without it (ACK, NACK) Seq is only a reference"},
	{FlagTagged, "Tagged", "PUSH: Tag names the LMMC port whose link page frames the data must land in; the receiver refuses it elsewhere (BAD_TAG)"},
	{FlagUnordered, "Unordered", "the receiver may place this packet before the packets ahead of it in sequence have arrived (selective repeat)"},
	{FlagSack, "Sack", "ACK, NACK: Imm is a selective-ack bitmap: bit i set means sequence number Ack+2+i was received and placed (Ack+1 is missing)"},
	{FlagRefused, "Refused", "ACK: the sender of this ACK has taken the refusal NACK of its packet Seq, of its session Code; the receiver stops repeating that refusal and holding its cumulative ACK below it"},
	{FlagAuth, "Auth", "keyed links: AuthTrailerLen (24) bytes follow the payload: a frame counter and an authentication tag over the whole frame (see Authenticated links)"},
}

// knownFlags is the union of FlagDocs, for Flags.String.
var knownFlags = func() (all Flags) {
	for _, d := range FlagDocs {
		all |= d.Flag
	}
	return all
}()

// String lists the set flags separated by "|" (unknown bits as hex), so a
// packet dump shows intent rather than a number.
func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	var b strings.Builder
	for _, d := range FlagDocs {
		if f&d.Flag != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(d.Name)
		}
	}
	if rest := f &^ knownFlags; rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "0x%x", uint16(rest))
	}
	return b.String()
}

// NACK codes (the Code field of a TypeNack); [NackDocs] says what the
// named ones mean. Codes 1..NackRefusalMax are refusals
// ([NackRefusalDoc]): the code is the device error (uapi.Errno) the
// sender's command fails with, which is why the range is left to uapi
// and not named here.
const (
	// NackRetry is zero, so a NACK that names no reason asks for a retry,
	// the harmless answer.
	NackRetry uint16 = 0
	// NackRefusalMax is the highest refusal code.
	NackRefusalMax uint16 = 0xFF
	// NackSeqErr answers a gap at once, as RoCE's PSN sequence error NAK
	// does, so the sender need not wait for its retransmission timer.
	NackSeqErr uint16 = 0x100
)

// NackDoc names and explains one NACK code.
type NackDoc struct {
	Code uint16
	Name string // as NackCodeName, docs/wire.md and the dissector print it
	Doc  string // what the receiver reports and what the sender does
}

// NackDocs is the one list of the NACK codes that are not refusals.
// NackCodeName reads it, and go generate renders it (with the refusal
// codes, named after uapi's errors) into docs/wire.md and the Wireshark
// dissector.
var NackDocs = []NackDoc{
	{NackRetry, "RETRY", "the receiver could not place Seq now (an IPUSH ring or the status ring was full, in NACK mode): send it again after a backoff; with flag Hold: the receiver's hold has ended, send everything from Seq now"},
	{NackSeqErr, "SEQ_ERR", "the receiver saw a gap: Seq is the next sequence number it expects, Addr the highest one it has received, and with flag Sack Imm tells which in between it placed; the sender resends the missing ones at once"},
}

// NackRefusalDoc explains NACK codes 1..NackRefusalMax.
const NackRefusalDoc = "the receiver consumed Seq and will never place it; the code is the device error (uapi.Errno) the sender's command fails with"

// NackCodeName names a NACK code for dumps: its NackDocs name,
// "REFUSED(n)" for a refusal (package uapi names those), or "NACK(0x...)".
func NackCodeName(c uint16) string {
	for _, d := range NackDocs {
		if d.Code == c {
			return d.Name
		}
	}
	if c >= 1 && c <= NackRefusalMax {
		return fmt.Sprintf("REFUSED(%d)", c)
	}
	return fmt.Sprintf("NACK(%#x)", c)
}

// Errors returned by [Parser.Parse] and [Header.DecodeFromBytes]. They are
// sentinels (test with errors.Is) so that the receive path can count each
// kind of bad frame without allocating.
var (
	// ErrNotDimmnet means the frame has another EtherType. It is not a
	// malformed dimmnet frame; the device simply ignores such traffic.
	ErrNotDimmnet = errors.New("wire: not a dimmnet frame")
	// ErrTruncated means the frame ends before the 64-byte header does.
	ErrTruncated = errors.New("wire: truncated dimmnet header")
	// ErrVersion means the header version is not Version1, so the rest
	// of the header cannot be interpreted.
	ErrVersion = errors.New("wire: unsupported dimmnet version")
	// ErrBadType means the packet type is not one of the defined types.
	ErrBadType = errors.New("wire: unknown dimmnet packet type")
	// ErrLength means PayloadLen claims more bytes than the frame holds.
	ErrLength = errors.New("wire: dimmnet payload length exceeds frame")
	// ErrChecksum means FlagCRC is set and the CRC32C does not match,
	// i.e. the frame was corrupted in flight.
	ErrChecksum = errors.New("wire: dimmnet checksum mismatch")
)

// Header is the 64-byte dimmnet header. As a gopacket layer its Contents
// are the 64 header bytes and its Payload is exactly PayloadLen bytes
// (Ethernet padding and trailers are dropped). [Fields] says where each
// field lies on the wire and what it means; it is the one description,
// so the fields are not explained again here.
type Header struct {
	layers.BaseLayer
	Version          uint8
	Type             Type
	Flags            Flags
	SrcNode, DstNode uint16
	SrcProc, DstProc uint32
	Seq              uint32
	Ack              uint32
	MsgID            uint32
	Offset           uint32
	MsgLen           uint32
	PayloadLen       uint32
	Addr             uint64
	Imm              uint64
	Code             uint16
	Tag              uint16
	Checksum         uint32
}

// Field places and explains one Header field on the wire.
type Field struct {
	Name  string // the Header field, as Go spells it
	Off   int    // byte offset from the start of the header
	Size  int    // bytes, little-endian
	Title string // short label, as the dissector shows it
	Hex   bool   // best read in hex: flag bits, an address, a bitmap or a checksum
	Doc   string // what the field means, by type and flag where that matters
}

// Fields is the one list of header fields, in wire order, covering all
// HeaderLen bytes. Tests pin it to Put and DecodeFromBytes, and go
// generate renders it into docs/wire.md and the Wireshark dissector, so
// the layout a human or Wireshark reads is the layout the code writes.
var Fields = []Field{
	{"Version", 0, 1, "Version", false, "must be 1 (Version1); other versions are rejected, since their field offsets may differ"},
	{"Type", 1, 1, "Type", false, "packet type (see Packet types); others are rejected"},
	{"Flags", 2, 2, "Flags", true, "flag bits (see Flags); undefined bits are sent as 0 and carried through unchanged"},
	{"SrcNode", 4, 2, "Source node", false, "sending node number"},
	{"DstNode", 6, 2, "Destination node", false, "target node number"},
	{"SrcProc", 8, 4, "Source process", false, "global process id of the sender"},
	{"DstProc", 12, 4, "Destination process", false, "global process id of the target; with flag DirectAMT an AMT entry index"},
	{"Seq", 16, 4, "Sequence number", false, "with flag Seq: the packet's per-peer sequence number, 1 for the first packet of a sending session, wrapping from 2^32-1 to 0; without it (ACK, NACK): a reference to the held, refused or expected packet, never acknowledged itself"},
	{"Ack", 20, 4, "Cumulative ack", false, "with flag AckValid: every sequence number up to Ack was received in order (compared modulo 2^32: the 2^31 numbers before Ack)"},
	{"MsgID", 24, 4, "Message id", false, "identifies the packet's message among the sender's"},
	{"Offset", 28, 4, "Offset in message", false, "byte offset of this packet's payload within its message"},
	{"MsgLen", 32, 4, "Message length", false, "total message length in bytes (PULLREQ: the bytes asked for)"},
	{"PayloadLen", 36, 4, "Payload length", false, "payload bytes after the header; a frame holding fewer is rejected"},
	{"Addr", 40, 8, "Address", true, "PUSH, PULLRESP: link-memory address of the payload's first byte; PULLREQ: the address to read; PAGE: the receiver's link page frame; NACK SEQ_ERR: the highest sequence number received"},
	{"Imm", 48, 8, "Immediate", true, "PULLREQ: the requester's address the data returns to; PAGE: the LMMC port; with flag Sack: the selective-ack bitmap; PUSH, IPUSH: an operand delivered in the receive status"},
	{"Code", 56, 2, "Code", false, "HELLO: the handshake step; NACK: why (see NACK codes); with flag Seq: the sender's session epoch, whose change restarts the expected sequence number at 1; ACK with flag Refused: the epoch of the session whose packet Seq was refused; otherwise 0"},
	{"Tag", 58, 2, "Tag", false, "with flag Tagged: the LMMC port whose link page frames a PUSH must land in (such a PUSH carries no Ack); otherwise, once the sender has received a packet of the receiver's sending session: that session's epoch (the Code of its packets), which Ack, and a NACK's or Hold ACK's Seq, Addr and Imm, refer to; the receiver ignores them when it is not its current session's, since a new session numbers from 1 again; otherwise 0"},
	{"Checksum", 60, 4, "Checksum", true, "with flag CRC: CRC32C of the header (this field as zero) and the payload; otherwise meaningless"},
}

// Compile-time checks that Header plugs into every gopacket role.
var (
	_ gopacket.Layer             = (*Header)(nil)
	_ gopacket.DecodingLayer     = (*Header)(nil)
	_ gopacket.SerializableLayer = (*Header)(nil)
)

// LayerType returns LayerTypeDimmnet so gopacket can find the layer in a
// packet.
func (h *Header) LayerType() gopacket.LayerType { return LayerTypeDimmnet }

// CanDecode tells DecodingLayerParser which layer type this decoder
// handles.
func (h *Header) CanDecode() gopacket.LayerClass { return LayerTypeDimmnet }

// NextLayerType returns gopacket.LayerTypePayload: the payload is opaque
// memory contents, never another protocol.
func (h *Header) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

// DecodeFromBytes decodes data (the Ethernet payload) into h. It fills
// every field it can read before reporting ErrVersion, ErrBadType or
// ErrLength, so a caller inspecting a bad packet still sees what it said.
// Short input is flagged through df.SetTruncated. The checksum is not
// verified here (captures of corrupted frames stay decodable); Parser and
// VerifyChecksum do that.
func (h *Header) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < HeaderLen {
		df.SetTruncated()
		*h = Header{}
		return ErrTruncated
	}
	h.Version = data[0]
	h.Type = Type(data[1])
	h.Flags = Flags(binary.LittleEndian.Uint16(data[2:]))
	h.SrcNode = binary.LittleEndian.Uint16(data[4:])
	h.DstNode = binary.LittleEndian.Uint16(data[6:])
	h.SrcProc = binary.LittleEndian.Uint32(data[8:])
	h.DstProc = binary.LittleEndian.Uint32(data[12:])
	h.Seq = binary.LittleEndian.Uint32(data[16:])
	h.Ack = binary.LittleEndian.Uint32(data[20:])
	h.MsgID = binary.LittleEndian.Uint32(data[24:])
	h.Offset = binary.LittleEndian.Uint32(data[28:])
	h.MsgLen = binary.LittleEndian.Uint32(data[32:])
	h.PayloadLen = binary.LittleEndian.Uint32(data[36:])
	h.Addr = binary.LittleEndian.Uint64(data[40:])
	h.Imm = binary.LittleEndian.Uint64(data[48:])
	h.Code = binary.LittleEndian.Uint16(data[56:])
	h.Tag = binary.LittleEndian.Uint16(data[offTag:])
	h.Checksum = binary.LittleEndian.Uint32(data[offChecksum:])

	rest := data[HeaderLen:]
	short := uint64(h.PayloadLen) > uint64(len(rest))
	if !short {
		// Drop Ethernet padding / trailers beyond the declared payload.
		rest = rest[:h.PayloadLen]
	}
	h.BaseLayer = layers.BaseLayer{Contents: data[:HeaderLen], Payload: rest}
	switch {
	case h.Version != Version1:
		return ErrVersion
	case !h.Type.Valid():
		return ErrBadType
	case short:
		// Payload keeps what is there so a truncated capture shows it.
		df.SetTruncated()
		return ErrLength
	}
	return nil
}

// decodeDimmnet is the gopacket.Decoder used by gopacket.NewPacket. Unlike
// the strict fast path it keeps the layer in the packet when only the
// payload is short (a capture with a small snaplen), and reports the error
// alongside it.
func decodeDimmnet(data []byte, p gopacket.PacketBuilder) error {
	h := &Header{}
	err := h.DecodeFromBytes(data, p)
	if errors.Is(err, ErrLength) {
		p.AddLayer(h)
		return err
	}
	if err != nil {
		return err
	}
	p.AddLayer(h)
	return p.NextDecoder(h.NextLayerType())
}

// SerializeTo writes the header in front of whatever the buffer already
// holds (the payload). With opts.FixLengths, PayloadLen is set from that
// payload; with opts.ComputeChecksums and FlagCRC, Checksum is computed.
// Both update h, as gopacket's own layers do.
func (h *Header) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	payload := b.Bytes()
	if opts.FixLengths {
		if uint64(len(payload)) > 0xFFFFFFFF {
			return fmt.Errorf("wire: payload of %d bytes does not fit PayloadLen", len(payload))
		}
		h.PayloadLen = uint32(len(payload))
	}
	bytes, err := b.PrependBytes(HeaderLen)
	if err != nil {
		return err
	}
	if opts.ComputeChecksums && h.Flags&FlagCRC != 0 {
		if uint64(h.PayloadLen) > uint64(len(payload)) {
			return fmt.Errorf("wire: PayloadLen %d exceeds the %d payload bytes to checksum", h.PayloadLen, len(payload))
		}
		h.Checksum = 0
		h.Put(bytes)
		h.Checksum = crc32.Update(0, castagnoli, bytes)
		h.Checksum = crc32.Update(h.Checksum, castagnoli, payload[:h.PayloadLen])
	}
	h.Put(bytes)
	return nil
}

// Put writes exactly the 64 header bytes of h into b[:64], taking every
// field as is (PayloadLen and Checksum included); the fields cover every
// byte, so no stale memory from PrependBytes or a reused buffer survives.
// It panics if len(b) < HeaderLen.
func (h *Header) Put(b []byte) {
	_ = b[HeaderLen-1] // one bounds check
	b[0] = h.Version
	b[1] = uint8(h.Type)
	binary.LittleEndian.PutUint16(b[2:], uint16(h.Flags))
	binary.LittleEndian.PutUint16(b[4:], h.SrcNode)
	binary.LittleEndian.PutUint16(b[6:], h.DstNode)
	binary.LittleEndian.PutUint32(b[8:], h.SrcProc)
	binary.LittleEndian.PutUint32(b[12:], h.DstProc)
	binary.LittleEndian.PutUint32(b[16:], h.Seq)
	binary.LittleEndian.PutUint32(b[20:], h.Ack)
	binary.LittleEndian.PutUint32(b[24:], h.MsgID)
	binary.LittleEndian.PutUint32(b[28:], h.Offset)
	binary.LittleEndian.PutUint32(b[32:], h.MsgLen)
	binary.LittleEndian.PutUint32(b[36:], h.PayloadLen)
	binary.LittleEndian.PutUint64(b[40:], h.Addr)
	binary.LittleEndian.PutUint64(b[48:], h.Imm)
	binary.LittleEndian.PutUint16(b[56:], h.Code)
	binary.LittleEndian.PutUint16(b[offTag:], h.Tag)
	binary.LittleEndian.PutUint32(b[offChecksum:], h.Checksum)
}

// VerifyChecksum reports whether a decoded header's checksum matches,
// for capture tools (Parser checks on its own). It is true when FlagCRC
// is clear, since then there is nothing to verify. It uses the raw header
// bytes in Contents when present, because the checksum covers the bytes
// as they were sent; otherwise it re-encodes h.
func (h *Header) VerifyChecksum() bool {
	if h.Flags&FlagCRC == 0 {
		return true
	}
	if len(h.Contents) == HeaderLen {
		return ComputeChecksum(h.Contents, h.Payload) == h.Checksum
	}
	var b [HeaderLen]byte
	h.Put(b[:])
	return ComputeChecksum(b[:], h.Payload) == h.Checksum
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var zero4 [4]byte

// ComputeChecksum returns the CRC32C (Castagnoli) of the 64-byte header
// hdr with its Checksum field taken as zero, followed by payload, i.e. the
// value the Checksum field must hold when FlagCRC is set. hdr is not
// modified, so it can point into a received frame.
func ComputeChecksum(hdr, payload []byte) uint32 {
	crc := crc32.Update(0, castagnoli, hdr[:offChecksum])
	crc = crc32.Update(crc, castagnoli, zero4[:])
	return crc32.Update(crc, castagnoli, payload)
}
