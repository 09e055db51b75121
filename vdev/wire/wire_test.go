package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net"
	"reflect"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

var (
	macA = NodeMAC(0x0102)
	macB = NodeMAC(0x0304)
)

// sampleHeader has every field set to a distinct non-zero value so that a
// swapped or misplaced field shows up in comparisons.
func sampleHeader(flags Flags) Header {
	return Header{
		Version:    Version1,
		Type:       TypePullResp,
		Flags:      flags,
		SrcNode:    0x0102,
		DstNode:    0x0304,
		SrcProc:    0x05060708,
		DstProc:    0x090a0b0c,
		Seq:        0x0d0e0f10,
		Ack:        0x11121314,
		MsgID:      0x15161718,
		Offset:     0x191a1b1c,
		MsgLen:     0x1d1e1f20,
		PayloadLen: 0, // set by serialisation
		Addr:       0x2122232425262728,
		Imm:        0x292a2b2c2d2e2f30,
		Code:       0x3132,
		Tag:        0x3738,
		Checksum:   0x33343536,
	}
}

func payloadOf(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + 3)
	}
	return p
}

// hdrFields is Header without its BaseLayer slices, so headers compare
// with == by field value.
type hdrFields struct {
	Version                                                       uint8
	Type                                                          Type
	Flags                                                         Flags
	SrcNode, DstNode                                              uint16
	SrcProc, DstProc, Seq, Ack, MsgID, Offset, MsgLen, PayloadLen uint32
	Addr, Imm                                                     uint64
	Code, Tag                                                     uint16
	Checksum                                                      uint32
}

func fieldsOf(h *Header) hdrFields {
	return hdrFields{h.Version, h.Type, h.Flags, h.SrcNode, h.DstNode,
		h.SrcProc, h.DstProc, h.Seq, h.Ack, h.MsgID, h.Offset, h.MsgLen, h.PayloadLen,
		h.Addr, h.Imm, h.Code, h.Tag, h.Checksum}
}

func serializeGopacket(t testing.TB, h Header, payload []byte) ([]byte, Header) {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	eth := &layers.Ethernet{DstMAC: macB, SrcMAC: macA, EthernetType: EtherType}
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, eth, &h, gopacket.Payload(payload)); err != nil {
		t.Fatalf("SerializeLayers: %v", err)
	}
	return buf.Bytes(), h
}

var payloadSizes = []int{0, 1, 7, 63, 64, 100, 1500, 4096}

func TestGopacketRoundTrip(t *testing.T) {
	for _, flags := range []Flags{0, FlagFirst | FlagLast | FlagSignal, 0xffff} {
		for _, n := range payloadSizes {
			payload := payloadOf(n)
			frame, sent := serializeGopacket(t, sampleHeader(flags), payload)
			if len(frame) != FrameOverhead+n {
				t.Fatalf("frame length %d, want %d", len(frame), FrameOverhead+n)
			}
			if sent.PayloadLen != uint32(n) {
				t.Fatalf("FixLengths set PayloadLen %d, want %d", sent.PayloadLen, n)
			}
			pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
			if el := pkt.ErrorLayer(); el != nil {
				t.Fatalf("flags %v n %d: decode error %v", flags, n, el.Error())
			}
			eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
			if eth == nil || eth.EthernetType != EtherType || eth.EthernetType.String() != "Dimmnet" {
				t.Fatalf("ethernet layer %+v", eth)
			}
			got, _ := pkt.Layer(LayerTypeDimmnet).(*Header)
			if got == nil {
				t.Fatalf("flags %v n %d: no Dimmnet layer in %v", flags, n, pkt)
			}
			if fieldsOf(got) != fieldsOf(&sent) {
				t.Fatalf("header mismatch\n got %+v\nwant %+v", fieldsOf(got), fieldsOf(&sent))
			}
			if !bytes.Equal(got.LayerPayload(), payload) {
				t.Fatalf("payload mismatch")
			}
			if !bytes.Equal(got.LayerContents(), frame[EthHeaderLen:FrameOverhead]) {
				t.Fatalf("contents are not the header bytes")
			}
			if n > 0 {
				app := pkt.ApplicationLayer()
				if app == nil || !bytes.Equal(app.Payload(), payload) {
					t.Fatalf("application layer %v", app)
				}
			}
			if !got.VerifyChecksum() {
				t.Fatalf("VerifyChecksum false for freshly serialised frame")
			}
		}
	}
}

// A receiver may hand us frames with bytes after the payload (padding up
// to a minimum frame size, an FCS trailer); they must not leak into the
// payload, neither through gopacket nor through Parser.
func TestPaddingTrimmed(t *testing.T) {
	for _, n := range []int{0, 1, 5} {
		payload := payloadOf(n)
		frame, sent := serializeGopacket(t, sampleHeader(FlagCRC), payload)
		padded := append(append([]byte(nil), frame...), make([]byte, 64)...)

		pkt := gopacket.NewPacket(padded, layers.LayerTypeEthernet, gopacket.Default)
		got, _ := pkt.Layer(LayerTypeDimmnet).(*Header)
		if got == nil || pkt.ErrorLayer() != nil {
			t.Fatalf("n %d: decode failed: %v", n, pkt)
		}
		if !bytes.Equal(got.Payload, payload) || fieldsOf(got) != fieldsOf(&sent) {
			t.Fatalf("n %d: payload %x not trimmed to %x", n, got.Payload, payload)
		}
		if !got.VerifyChecksum() {
			t.Fatalf("n %d: padding entered the checksum", n)
		}

		h, p, err := NewParser().Parse(padded)
		if err != nil || !bytes.Equal(p, payload) || fieldsOf(h) != fieldsOf(&sent) {
			t.Fatalf("n %d: Parse = %v, %x", n, err, p)
		}
	}
}

// The same frame through a user-built DecodingLayerParser proves the
// EthernetTypeMetadata LayerType is registered (not only DecodeWith).
func TestDecodingLayerParser(t *testing.T) {
	frame, sent := serializeGopacket(t, sampleHeader(0), payloadOf(10))
	var eth layers.Ethernet
	var h Header
	var pl gopacket.Payload
	dlp := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &h, &pl)
	var decoded []gopacket.LayerType
	if err := dlp.DecodeLayers(frame, &decoded); err != nil {
		t.Fatal(err)
	}
	want := []gopacket.LayerType{layers.LayerTypeEthernet, LayerTypeDimmnet, gopacket.LayerTypePayload}
	if !reflect.DeepEqual(decoded, want) {
		t.Fatalf("decoded %v, want %v", decoded, want)
	}
	if fieldsOf(&h) != fieldsOf(&sent) || !bytes.Equal(pl, payloadOf(10)) {
		t.Fatalf("mismatch")
	}
}

// TestGolden pins the byte layout by hand, independently of Fields, so a
// change to Put or DecodeFromBytes cannot silently move a field.
func TestGolden(t *testing.T) {
	h := sampleHeader(FlagFirst | FlagLast)
	h.PayloadLen = 0x0203
	b := bytes.Repeat([]byte{0xaa}, HeaderLen+4)
	h.Put(b)
	want, _ := hex.DecodeString("" +
		"01" + "04" + "0600" + // Version, Type, Flags
		"0201" + "0403" + // SrcNode, DstNode
		"08070605" + "0c0b0a09" + // SrcProc, DstProc
		"100f0e0d" + "14131211" + // Seq, Ack
		"18171615" + "1c1b1a19" + // MsgID, Offset
		"201f1e1d" + "03020000" + // MsgLen, PayloadLen
		"2827262524232221" + // Addr
		"302f2e2d2c2b2a29" + // Imm
		"3231" + "3837" + // Code, Tag
		"36353433" + // Checksum
		"aaaaaaaa") // Put must not write past 64 bytes
	if !bytes.Equal(b, want) {
		t.Fatalf("layout\n got %x\nwant %x", b, want)
	}
	var d Header
	if err := d.DecodeFromBytes(append(b[:HeaderLen:HeaderLen], make([]byte, h.PayloadLen)...), gopacket.NilDecodeFeedback); err != nil {
		t.Fatal(err)
	}
	if fieldsOf(&d) != fieldsOf(&h) {
		t.Fatalf("decode of golden bytes\n got %+v\nwant %+v", fieldsOf(&d), fieldsOf(&h))
	}
}

func TestSerializeWithoutOptionsKeepsFields(t *testing.T) {
	h := sampleHeader(FlagCRC)
	h.PayloadLen = 3
	buf := gopacket.NewSerializeBuffer()
	// Pre-fill so stale memory from PrependBytes would show.
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &h, gopacket.Payload(bytes.Repeat([]byte{0xee}, 200))); err != nil {
		t.Fatal(err)
	}
	buf.Clear()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, &h, gopacket.Payload{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	var want [HeaderLen]byte
	h.Put(want[:])
	if !bytes.Equal(buf.Bytes()[:HeaderLen], want[:]) || h.Checksum != 0x33343536 {
		t.Fatalf("SerializeTo without options changed fields or left stale bytes")
	}
	// Asking for a checksum over more payload than exists is an error.
	h.PayloadLen = 10
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, &h, gopacket.Payload{1, 2, 3})
	if err == nil {
		t.Fatal("checksum over missing payload accepted")
	}
}

func TestFastPathEqualsGopacket(t *testing.T) {
	for _, flags := range []Flags{0, FlagCRC, FlagCRC | FlagAckValid | FlagLast, 0xffff} {
		for _, n := range payloadSizes {
			payload := payloadOf(n)
			tmpl := sampleHeader(flags)
			tmpl.PayloadLen = 999 // must be overwritten in the frame
			want, _ := serializeGopacket(t, tmpl, payload)

			before := tmpl
			prefix := []byte("prefix")
			got := AppendFrame(prefix, macB, macA, &tmpl, payload)
			if !bytes.Equal(got[:len(prefix)], prefix) {
				t.Fatalf("AppendFrame clobbered dst")
			}
			if !bytes.Equal(got[len(prefix):], want) {
				t.Fatalf("flags %v n %d:\nfast     %x\ngopacket %x", flags, n, got[len(prefix):], want)
			}
			if fieldsOf(&tmpl) != fieldsOf(&before) {
				t.Fatalf("AppendFrame modified the template header")
			}

			h, p, err := NewParser().Parse(want)
			if err != nil {
				t.Fatalf("Parse of gopacket frame: %v", err)
			}
			_, sent := serializeGopacket(t, tmpl, payload)
			if fieldsOf(h) != fieldsOf(&sent) || !bytes.Equal(p, payload) {
				t.Fatalf("Parse mismatch\n got %+v\nwant %+v", fieldsOf(h), fieldsOf(&sent))
			}
		}
	}
}

func TestParserMACs(t *testing.T) {
	p := NewParser()
	h := sampleHeader(0)
	if _, _, err := p.Parse(AppendFrame(nil, macB, macA, &h, nil)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.SrcMAC(), macA) || !bytes.Equal(p.DstMAC(), macB) {
		t.Fatalf("SrcMAC %v DstMAC %v", p.SrcMAC(), p.DstMAC())
	}
}

func TestChecksumCorruption(t *testing.T) {
	h := sampleHeader(FlagCRC)
	h.Type = TypePush
	frame := AppendFrame(nil, macB, macA, &h, payloadOf(40))
	p := NewParser()
	if _, _, err := p.Parse(frame); err != nil {
		t.Fatalf("clean frame: %v", err)
	}
	for i := EthHeaderLen; i < len(frame); i++ {
		for _, bit := range []byte{0x01, 0x80} {
			c := append([]byte(nil), frame...)
			c[i] ^= bit
			_, _, err := p.Parse(c)
			off := i - EthHeaderLen
			switch {
			case off == 0 || off == 1 || (off >= 36 && off < 40):
				// Version, Type, PayloadLen: rejected before the CRC.
				if err == nil {
					t.Fatalf("flip %#x at header offset %d accepted", bit, off)
				}
			default:
				if !errors.Is(err, ErrChecksum) {
					t.Fatalf("flip %#x at frame offset %d: err %v, want ErrChecksum", bit, i, err)
				}
			}
		}
	}
	// Without FlagCRC corruption goes unnoticed by design.
	h.Flags = 0
	frame = AppendFrame(nil, macB, macA, &h, payloadOf(40))
	frame[len(frame)-1] ^= 0xff
	if _, _, err := p.Parse(frame); err != nil {
		t.Fatalf("no-CRC frame rejected: %v", err)
	}
}

func TestNotDimmnet(t *testing.T) {
	p := NewParser()
	check := func(name string, frame []byte) {
		t.Helper()
		if h, pl, err := p.Parse(frame); !errors.Is(err, ErrNotDimmnet) || h != nil || pl != nil {
			t.Errorf("%s: got %v, want ErrNotDimmnet", name, err)
		}
	}

	buf := gopacket.NewSerializeBuffer()
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IPv4(10, 0, 0, 1), DstIP: net.IPv4(10, 0, 0, 2)}
	udp := &layers.UDP{SrcPort: 1, DstPort: 2}
	_ = udp.SetNetworkLayerForChecksum(ip)
	err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		&layers.Ethernet{DstMAC: macB, SrcMAC: macA, EthernetType: layers.EthernetTypeIPv4}, ip, udp, gopacket.Payload(make([]byte, 100)))
	if err != nil {
		t.Fatal(err)
	}
	check("IPv4/UDP", buf.Bytes())

	h := sampleHeader(0)
	valid := AppendFrame(nil, macB, macA, &h, payloadOf(8))
	for _, et := range []uint16{0x0806, 0x86dd, 0x1234, 0x88b6, 0x8100, 0x0040 /* 802.3 length */} {
		c := append([]byte(nil), valid...)
		c[12], c[13] = byte(et>>8), byte(et)
		check(layers.EthernetType(et).String(), c)
		check("short "+layers.EthernetType(et).String(), c[:EthHeaderLen])
	}
}

func TestTruncated(t *testing.T) {
	h := sampleHeader(FlagCRC)
	frame := AppendFrame(nil, macB, macA, &h, payloadOf(32))
	p := NewParser()
	for n := 0; n < len(frame); n++ {
		short := frame[:n:n] // no capacity beyond n: any overread panics
		hdr, pl, err := p.Parse(short)
		if err == nil || hdr != nil || pl != nil {
			t.Fatalf("len %d: accepted (err %v)", n, err)
		}
		want := ErrTruncated
		if n >= FrameOverhead {
			want = ErrLength
		}
		if !errors.Is(err, want) {
			t.Fatalf("len %d: err %v, want %v", n, err, want)
		}

		// gopacket must not panic either, and must flag the truncation.
		pkt := gopacket.NewPacket(short, layers.LayerTypeEthernet, gopacket.Default)
		if n > EthHeaderLen && pkt.ErrorLayer() == nil {
			t.Fatalf("len %d: gopacket found no error", n)
		}
		if n > EthHeaderLen && !pkt.Metadata().Truncated {
			t.Fatalf("len %d: gopacket did not mark truncated", n)
		}
		// With the whole header present the layer stays visible.
		if got := pkt.Layer(LayerTypeDimmnet) != nil; got != (n >= FrameOverhead) {
			t.Fatalf("len %d: Dimmnet layer present = %v", n, got)
		}
	}
}

func TestBadVersionAndType(t *testing.T) {
	p := NewParser()
	h := sampleHeader(FlagCRC)
	for _, v := range []uint8{0, 2, 255} {
		h.Version = v
		if _, _, err := p.Parse(AppendFrame(nil, macB, macA, &h, nil)); !errors.Is(err, ErrVersion) {
			t.Errorf("version %d: %v", v, err)
		}
	}
	h.Version = Version1
	// Zero, the value after the last type, and the highest.
	for _, ty := range []Type{0, TypeDocs[len(TypeDocs)-1].Type + 1, 255} {
		h.Type = ty
		if _, _, err := p.Parse(AppendFrame(nil, macB, macA, &h, nil)); !errors.Is(err, ErrBadType) {
			t.Errorf("type %d: %v", ty, err)
		}
	}
	for _, td := range TypeDocs {
		h.Type = td.Type
		if _, _, err := p.Parse(AppendFrame(nil, macB, macA, &h, nil)); err != nil {
			t.Errorf("type %v: %v", td.Type, err)
		}
	}
}

// The Tag survives the trip with and without a checksum over it.
func TestTagRoundTrip(t *testing.T) {
	for _, flags := range []Flags{FlagTagged, FlagTagged | FlagCRC} {
		h := sampleHeader(flags)
		h.Tag = 0x1234
		got, _, err := NewParser().Parse(AppendFrame(nil, macB, macA, &h, payloadOf(3)))
		if err != nil || got.Tag != 0x1234 {
			t.Fatalf("flags %v: tag %#x, %v", flags, got.Tag, err)
		}
	}
}

func TestChecksumIsCRC32C(t *testing.T) {
	// Independent bitwise CRC32C so the test does not trust hash/crc32
	// table selection.
	crc32c := func(data []byte) uint32 {
		crc := ^uint32(0)
		for _, b := range data {
			crc ^= uint32(b)
			for range 8 {
				if crc&1 != 0 {
					crc = crc>>1 ^ 0x82f63b78
				} else {
					crc >>= 1
				}
			}
		}
		return ^crc
	}
	if got := crc32c([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("reference CRC32C broken: %#x", got)
	}
	h := sampleHeader(FlagCRC)
	payload := payloadOf(77)
	frame := AppendFrame(nil, macB, macA, &h, payload)
	img := append([]byte(nil), frame[EthHeaderLen:]...)
	want := crc32c(append(append(img[:60:60], 0, 0, 0, 0), payload...))
	got := uint32(frame[EthHeaderLen+60]) | uint32(frame[EthHeaderLen+61])<<8 | uint32(frame[EthHeaderLen+62])<<16 | uint32(frame[EthHeaderLen+63])<<24
	if got != want {
		t.Fatalf("checksum %#x, want CRC32C %#x", got, want)
	}
}

func TestVerifyChecksumWithoutContents(t *testing.T) {
	h := sampleHeader(FlagCRC)
	frame := AppendFrame(nil, macB, macA, &h, payloadOf(9))
	parsed, _, err := NewParser().Parse(frame)
	if err != nil {
		t.Fatal(err)
	}
	c := *parsed
	c.Contents = nil
	if !c.VerifyChecksum() {
		t.Fatal("re-encoded verification failed")
	}
	c.Imm++
	if c.VerifyChecksum() {
		t.Fatal("changed header still verifies")
	}
}

func TestNodeMAC(t *testing.T) {
	for _, n := range []uint16{0, 1, 0x1234, 0xffff} {
		mac := NodeMAC(n)
		if len(mac) != 6 || mac[0] != 0x02 || mac[1] != 'D' || mac[2] != 'N' || mac[3] != 0 {
			t.Fatalf("NodeMAC(%d) = %v", n, mac)
		}
		if mac[0]&1 != 0 || mac[0]&2 == 0 {
			t.Fatalf("%v is not locally administered unicast", mac)
		}
		if got, ok := MACNode(mac); !ok || got != n {
			t.Fatalf("MACNode(%v) = %d, %v", mac, got, ok)
		}
	}
	if NodeMAC(0x1234).String() != "02:44:4e:00:12:34" {
		t.Fatalf("NodeMAC format %v", NodeMAC(0x1234))
	}
	for _, mac := range []net.HardwareAddr{BroadcastMAC, nil, {0x02, 0x44, 0x4e, 0x00, 0x01}, {0x02, 0x44, 0x4e, 0x01, 0, 1}, {0x00, 0x1b, 0x21, 0, 0, 1}} {
		if _, ok := MACNode(mac); ok {
			t.Fatalf("MACNode(%v) accepted", mac)
		}
	}
}

func TestStrings(t *testing.T) {
	for ty, want := range map[Type]string{TypePush: "PUSH", TypeIPush: "IPUSH", TypePullReq: "PULLREQ", TypePullResp: "PULLRESP", TypeAck: "ACK", TypeNack: "NACK", TypePage: "PAGE", 0: "Type(0)", 255: "Type(255)"} {
		if ty.String() != want {
			t.Errorf("Type(%d).String() = %q, want %q", uint8(ty), ty.String(), want)
		}
	}
	for f, want := range map[Flags]string{
		0:                       "0",
		FlagCRC:                 "CRC",
		FlagFirst | FlagLast:    "Last|First",
		0xff:                    "PktStatus|Last|First|DirectAMT|CRC|Hold|AckValid|Signal",
		FlagSignal | 0x8400:     "Signal|Unordered|0x8000",
		0x8000:                  "0x8000",
		FlagUnordered:           "Unordered",
		FlagSack:                "Sack",
		FlagTagged:              "Tagged",
		FlagHold | FlagAckValid: "Hold|AckValid",
	} {
		if f.String() != want {
			t.Errorf("Flags(%#x).String() = %q, want %q", uint16(f), f.String(), want)
		}
	}
}

func TestAppendFrameBadMAC(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a 5-byte MAC")
		}
	}()
	h := sampleHeader(0)
	AppendFrame(nil, macB[:5], macA, &h, nil)
}
