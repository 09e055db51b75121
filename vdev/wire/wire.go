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
// path does. docs/wire.md describes the layout for humans.
package wire

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

// Byte offsets of header fields, for code that patches a header in place.
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

// Packet types. Zero is deliberately unused so that an all-zero header
// never looks valid.
const (
	// TypePush writes the payload into the receiver's link memory at Addr.
	TypePush Type = 1
	// TypeIPush delivers the payload to process DstProc, or with
	// FlagDirectAMT to the AMT entry DstProc names.
	TypeIPush Type = 2
	// TypePullReq asks the receiver for data at its address Addr, to be
	// returned to the requester's local address Imm.
	TypePullReq Type = 3
	// TypePullResp carries data answering a TypePullReq, destined for
	// Addr.
	TypePullResp Type = 4
	// TypeAck acknowledges sequenced packets up to Ack.
	TypeAck Type = 5
	// TypeNack reports a failure; Code says why.
	TypeNack Type = 6
	// TypePage is an LMMC remote paging request: page port Imm into the
	// receiver's link page frame Addr. Sequenced with the data it orders.
	TypePage Type = 7
)

var typeNames = [...]string{
	TypePush:     "PUSH",
	TypeIPush:    "IPUSH",
	TypePullReq:  "PULLREQ",
	TypePullResp: "PULLRESP",
	TypeAck:      "ACK",
	TypeNack:     "NACK",
	TypePage:     "PAGE",
}

// Valid reports whether t is a defined type, so receivers can drop
// packets from incompatible peers before acting on them.
func (t Type) Valid() bool { return t >= TypePush && t <= TypePage }

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

// Flag bits.
const (
	// FlagPktStatus requests a per-packet receive status, for senders
	// that need to know about each packet rather than only the message.
	FlagPktStatus Flags = 1 << 0
	// FlagLast marks the last packet of a message, so the receiver knows
	// when the message is complete without counting bytes.
	FlagLast Flags = 1 << 1
	// FlagFirst marks the first packet of a message.
	FlagFirst Flags = 1 << 2
	// FlagDirectAMT says DstProc is an AMT entry index: the IPUSH variant
	// that bypasses the AMT Address Table lookup.
	FlagDirectAMT Flags = 1 << 3
	// FlagCRC says the Checksum field is valid and must be verified;
	// links that already guarantee integrity can skip the cost.
	FlagCRC Flags = 1 << 4
	// FlagHold marks an ACK sent while the receiver holds, so the sender
	// can tell that state apart from a plain ACK.
	FlagHold Flags = 1 << 5
	// FlagAckValid says the Ack field carries a cumulative ack, which
	// lets any packet piggyback an acknowledgement.
	FlagAckValid Flags = 1 << 6
	// FlagSignal says the sender wants a completion for this message.
	FlagSignal Flags = 1 << 7
	// FlagSeq says Seq is a sequence number to check (every data frame);
	// without it (ACK, NACK) Seq is only a reference. A flag rather than a
	// reserved value, so every 32-bit number is a usable sequence number and
	// the count may wrap.
	FlagSeq Flags = 1 << 8
	// FlagTagged says Tag names the LMMC port whose link page frames the
	// PUSH must land in; the receiver refuses it elsewhere.
	FlagTagged Flags = 1 << 9
	// FlagUnordered says the receiver may place this packet before the
	// packets ahead of it in sequence have arrived (selective repeat, as
	// IRN does for RDMA writes). The sender sets it only on a PUSH or
	// PULLRESP packet that is not its message's last, asks for no
	// per-packet status, and whose range no earlier operation still in
	// flight to that peer touches: then arrival order cannot change what
	// memory holds once the messages complete.
	FlagUnordered Flags = 1 << 10
	// FlagSack says Imm is a selective-acknowledgement bitmap: bit i set
	// means sequence number Ack+2+i was received and placed (Ack+1, the
	// next one expected, is missing). Carried by ACKs and NACKs while the
	// receiver holds packets placed out of order.
	FlagSack Flags = 1 << 11
)

// flagNames are the names of the flag bits, bit 0 first.
var flagNames = [...]string{
	"PktStatus", "Last", "First", "DirectAMT", "CRC", "Hold", "AckValid", "Signal", "Seq", "Tagged", "Unordered", "Sack",
}

// NACK codes (the Code field of a TypeNack). Codes 1..NackRefusalMax are
// refusals: the receiver consumed Seq and will never place it, and the code
// is the device error (uapi.Errno) the sender's command fails with.
const (
	// NackRetry says the receiver could not place Seq now (an IPUSH ring
	// or the status ring was full, in NACK mode): send it again after a
	// backoff. With FlagHold it says the receiver's hold has ended: send
	// everything from Seq now.
	NackRetry uint16 = 0
	// NackRefusalMax is the highest refusal code.
	NackRefusalMax uint16 = 0xFF
	// NackSeqErr says the receiver saw a gap, as RoCE's PSN sequence
	// error NAK does: Seq is the next sequence number it expects, Addr
	// the highest one it has received, and with FlagSack Imm tells which
	// in between it placed. The sender resends the missing ones at once,
	// without waiting for its retransmission timer.
	NackSeqErr uint16 = 0x100
)

// NackCodeName names a NACK code for dumps and the dissector: "RETRY",
// "SEQ_ERR", or "REFUSED(n)" for a refusal.
func NackCodeName(c uint16) string {
	switch {
	case c == NackRetry:
		return "RETRY"
	case c == NackSeqErr:
		return "SEQ_ERR"
	case c <= NackRefusalMax:
		return fmt.Sprintf("REFUSED(%d)", c)
	}
	return fmt.Sprintf("NACK(%#x)", c)
}

// String lists the set flags separated by "|" (unknown bits as hex), so a
// packet dump shows intent rather than a number.
func (f Flags) String() string {
	if f == 0 {
		return "0"
	}
	var b strings.Builder
	for i, name := range flagNames {
		if f&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('|')
			}
			b.WriteString(name)
		}
	}
	if rest := f &^ (1<<len(flagNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		fmt.Fprintf(&b, "0x%x", uint16(rest))
	}
	return b.String()
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
// (Ethernet padding and trailers are dropped).
type Header struct {
	layers.BaseLayer
	// Version must be Version1.
	Version uint8
	// Type selects the operation.
	Type Type
	// Flags qualifies the packet.
	Flags Flags
	// SrcNode and DstNode are node numbers; see NodeMAC.
	SrcNode, DstNode uint16
	// SrcProc is the sender's global process id. DstProc is the target's
	// global process id, or an AMT entry index with FlagDirectAMT.
	SrcProc, DstProc uint32
	// Seq is the per-peer sequence number of a data packet (FlagSeq);
	// on an ACK or NACK it is a reference (the refused or expected
	// packet), never acknowledged itself.
	Seq uint32
	// Ack is a cumulative ack (valid with FlagAckValid): every sequence
	// number <= Ack was received in order.
	Ack uint32
	// MsgID names the message this packet belongs to.
	MsgID uint32
	// Offset is the byte offset of this packet's payload in its message.
	Offset uint32
	// MsgLen is the total message length.
	MsgLen uint32
	// PayloadLen is the number of payload bytes after the header.
	PayloadLen uint32
	// Addr is the target link-memory address of this packet's first
	// byte (PUSH, PULLRESP) or the remote source address (PULLREQ).
	Addr uint64
	// Imm is a free operand; for PULLREQ it is the requester's local
	// target address.
	Imm uint64
	// Code is the NACK reason or error code.
	Code uint16
	// Tag is the LMMC port a tagged PUSH must land in (FlagTagged).
	Tag uint16
	// Checksum is the CRC32C of the header (this field as zero) and the
	// payload; meaningful only with FlagCRC.
	Checksum uint32
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
// field as is (PayloadLen and Checksum included) and zeroing the reserved
// bytes, because PrependBytes and reused buffers hand out stale memory.
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
// bytes in Contents when present, because the sender's reserved bytes
// are covered too; otherwise it re-encodes h.
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
