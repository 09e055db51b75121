package wire_test

import (
	"errors"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dimmnet/dimmnet/vdev/wire"
)

// The device's per-packet path: build into a reused buffer, parse with a
// per-goroutine Parser, and sort errors with errors.Is.
func ExampleParser() {
	hdr := wire.Header{
		Version: wire.Version1,
		Type:    wire.TypePush,
		Flags:   wire.FlagFirst | wire.FlagLast | wire.FlagCRC,
		SrcNode: 1, DstNode: 2,
		Seq: 7, MsgLen: 5, Addr: 0x1000,
	}
	buf := make([]byte, 0, 1500)
	buf = wire.AppendFrame(buf[:0], wire.NodeMAC(2), wire.NodeMAC(1), &hdr, []byte("hello"))

	p := wire.NewParser()
	h, payload, err := p.Parse(buf)
	switch {
	case errors.Is(err, wire.ErrNotDimmnet):
		// not ours: ignore silently
	case err != nil:
		fmt.Println("malformed:", err)
	default:
		from, _ := wire.MACNode(p.SrcMAC())
		fmt.Printf("%v %v from node %d seq %d: %q\n", h.Type, h.Flags, from, h.Seq, payload)
	}
	// Output: PUSH Last|First|CRC from node 1 seq 7: "hello"
}

// Decoding a captured frame with plain gopacket: importing the package is
// enough for Ethernet to hand EtherType 0x88B5 to the Dimmnet layer.
func Example_gopacket() {
	hdr := wire.Header{Version: wire.Version1, Type: wire.TypeAck, Flags: wire.FlagAckValid, Ack: 41}
	frame := wire.AppendFrame(nil, wire.NodeMAC(1), wire.NodeMAC(2), &hdr, nil)

	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if d, ok := pkt.Layer(wire.LayerTypeDimmnet).(*wire.Header); ok {
		fmt.Println(d.Type, d.Flags, d.Ack, d.VerifyChecksum())
	}
	// Output: ACK AckValid 41 true
}
