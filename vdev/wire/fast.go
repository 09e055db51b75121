package wire

import (
	"encoding/binary"
	"hash/crc32"
	"net"
	"slices"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// AppendFrame appends a complete frame (Ethernet header, dimmnet header,
// payload) to dst and returns the extended slice. It is the transmit fast
// path: it does not allocate when dst has room, and yields byte for byte
// what gopacket.SerializeLayers produces for the same layers with
// FixLengths and ComputeChecksums (dimmnet frames are always at least
// FrameOverhead bytes, so Ethernet never pads them).
//
// The frame carries PayloadLen = len(payload) and, when h.Flags has
// FlagCRC, a freshly computed Checksum; otherwise h.Checksum is copied.
// h itself is not modified, so one template header may be shared by
// concurrent senders. It panics if either MAC is not 6 bytes long, since
// that is a configuration bug no frame could survive.
func AppendFrame(dst []byte, dstMAC, srcMAC net.HardwareAddr, h *Header, payload []byte) []byte {
	dst = AppendHead(dst, dstMAC, srcMAC, h, payload)
	return append(dst, payload...)
}

// AppendHead appends the frame's first FrameOverhead bytes (Ethernet and
// dimmnet headers, PayloadLen and the CRC32C over header and payload set
// as AppendFrame sets them) without the payload, for a port that gathers
// the payload from where it lies (link memory) in the same system call:
// the bytes are copied once, into the kernel. The payload must not change
// until it is sent, or the frame leaves with a checksum of other bytes.
func AppendHead(dst []byte, dstMAC, srcMAC net.HardwareAddr, h *Header, payload []byte) []byte {
	if len(dstMAC) != 6 || len(srcMAC) != 6 {
		panic("wire: AppendFrame needs 6-byte MAC addresses")
	}
	start := len(dst)
	dst = slices.Grow(dst, FrameOverhead)[:start+FrameOverhead]
	f := dst[start:]

	copy(f[0:6], dstMAC)
	copy(f[6:12], srcMAC)
	binary.BigEndian.PutUint16(f[12:14], uint16(EtherType))

	hdr := f[EthHeaderLen : EthHeaderLen+HeaderLen]
	h.Put(hdr)
	binary.LittleEndian.PutUint32(hdr[36:], uint32(len(payload)))
	if h.Flags&FlagCRC != 0 {
		// Put left the old checksum there; the rule takes it as zero.
		binary.LittleEndian.PutUint32(hdr[offChecksum:], 0)
		crc := crc32.Update(0, castagnoli, hdr)
		crc = crc32.Update(crc, castagnoli, payload)
		binary.LittleEndian.PutUint32(hdr[offChecksum:], crc)
	}
	return dst
}

// Parser is the receive fast path. It owns the decoded layers so that
// parsing a frame allocates nothing; the price is that results alias the
// parser and the frame. A Parser is not safe for concurrent use: give
// each receive goroutine its own.
//
// It runs the two layers' own decoders (gopacket's Ethernet, then the
// dimmnet Header) one after the other, as a gopacket.DecodingLayerParser
// over them would, without that parser's generic loop, layer lookups
// and deferred recovery: those were a fifth of the parse of every frame
// an 8-byte ping-pong receives. FuzzParse holds it to the
// DecodingLayerParser's results.
type Parser struct {
	eth layers.Ethernet
	hdr Header
}

// NewParser returns a Parser ready for use. All allocation happens here.
func NewParser() *Parser { return &Parser{} }

// Parse decodes frame and checks it as the device must before acting on
// it: version, type, payload length and, with FlagCRC, the checksum. On
// success it returns the header and exactly PayloadLen bytes of payload
// (Ethernet padding dropped); both alias the parser and frame and are
// valid until the next Parse or until frame is reused. Errors are the
// package's sentinels (ErrNotDimmnet, ErrTruncated, ErrVersion,
// ErrBadType, ErrLength, ErrChecksum); the header is nil with any error.
func (p *Parser) Parse(frame []byte) (*Header, []byte, error) {
	if len(frame) < EthHeaderLen {
		// layers.Ethernet would allocate an error for this; answer first.
		p.eth = layers.Ethernet{}
		return nil, nil, ErrTruncated
	}
	// At EthHeaderLen bytes or more Ethernet's decoder cannot fail.
	_ = p.eth.DecodeFromBytes(frame, gopacket.NilDecodeFeedback)
	if p.eth.EthernetType != EtherType {
		return nil, nil, ErrNotDimmnet
	}
	if len(p.eth.Payload) == 0 {
		// EtherType matched but nothing followed the Ethernet header.
		return nil, nil, ErrTruncated
	}
	h := &p.hdr
	if err := h.DecodeFromBytes(p.eth.Payload, gopacket.NilDecodeFeedback); err != nil {
		return nil, nil, err
	}
	if h.Flags&FlagCRC != 0 && ComputeChecksum(h.Contents, h.Payload) != h.Checksum {
		return nil, nil, ErrChecksum
	}
	return h, h.Payload, nil
}

// SrcMAC returns the source MAC of the last frame given to Parse (aliasing
// it), so the device can learn or check the peer's address without
// re-slicing the frame itself.
func (p *Parser) SrcMAC() net.HardwareAddr { return p.eth.SrcMAC }

// DstMAC returns the destination MAC of the last frame given to Parse
// (aliasing it), so the device can tell unicast from broadcast.
func (p *Parser) DstMAC() net.HardwareAddr { return p.eth.DstMAC }
