package capture

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/dimmnet/dimmnet/vdev/wire"
)

// pushFrame is a real PUSH frame from node src to node dst.
func pushFrame(src, dst uint16, seq uint32, payload []byte) []byte {
	h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagLast,
		SrcNode: src, DstNode: dst, Seq: seq, MsgID: seq, MsgLen: uint32(len(payload)), Addr: 0x2000}
	return wire.AppendFrame(nil, wire.NodeMAC(dst), wire.NodeMAC(src), &h, payload)
}

// One Writer recording the sends of two devices' ports gives a pcapng
// file with an interface per device: each frame names the device that
// recorded it, read back here and by tshark.
func TestPcapngInterfacePerNode(t *testing.T) {
	a, b := hubPair(t)
	var out closeBuffer
	cw, err := NewWriter(&out, 1514)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := cw.WrapSent(a), cw.WrapSent(b)
	for i := range 3 {
		if err := ca.Send(pushFrame(1, 2, uint32(i), []byte{1, 2, 3, byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	if err := cb.Send(pushFrame(2, 1, 9, []byte{9})); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		b.Release(b.Recv())
	}
	a.Release(a.Recv())
	cw.Record(pushFrame(5, 6, 1, []byte{5}))
	cw.RecordOn("node2", pushFrame(2, 1, 10, []byte{10})) // the same interface as node 2's port
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	file := out.Bytes()
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	p := wire.NewParser()
	var got []string
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := p.Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r.InterfaceName(ci)+":"+string(rune('0'+h.SrcNode)))
	}
	if want := "node1:1 node1:1 node1:1 node2:2 dimmnet:5 node2:2"; strings.Join(got, " ") != want {
		t.Fatalf("frames by interface %q, want %q", strings.Join(got, " "), want)
	}

	tshark, err := lookTshark()
	if err != nil {
		t.Log("tshark not installed: the file's interfaces are checked by the Go reader only")
		return
	}
	path := filepath.Join(t.TempDir(), "nodes.pcapng")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	o := runTshark(t, tshark, dissector(t), "-r", path, "-T", "fields", "-e", "frame.interface_name", "-e", "dimmnet.src_node")
	if s := strings.Join(strings.Fields(string(o)), " "); s != "node1 1 node1 1 node1 1 node2 2 dimmnet 5 node2 2" {
		t.Fatalf("tshark: interface and source per frame %q", s)
	}
}

func lookTshark() (string, error) { return exec.LookPath("tshark") }

// udpCapture writes a classic pcap of Ethernet/IPv4/UDP datagrams with
// the given payloads, on ports no table knows.
func udpCapture(t *testing.T, payloads [][]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "udp.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Now()
	for i, pl := range payloads {
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.IP{127, 0, 0, 1}, DstIP: net.IP{127, 0, 0, 1}}
		udp := &layers.UDP{SrcPort: 41234, DstPort: layers.UDPPort(43210 + i)}
		udp.SetNetworkLayerForChecksum(ip)
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload(pl)); err != nil {
			t.Fatal(err)
		}
		d := buf.Bytes()
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(d), Length: len(d)}
		if err := w.WritePacket(ci, d); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// The dissector finds dimmnet frames inside UDP datagrams on any port by
// its heuristic, and leaves alone datagrams that only look like one:
// another EtherType, an unknown version, an unknown type, a payload
// longer than the datagram.
func TestTsharkDecodesUDPCarriedFrames(t *testing.T) {
	tshark, lua := needTshark(t)
	good := pushFrame(3, 4, 77, []byte("hello over udp"))
	withVersion := func(v byte) []byte { f := bytes.Clone(good); f[wire.EthHeaderLen] = v; return f }
	withType := func(ty byte) []byte { f := bytes.Clone(good); f[wire.EthHeaderLen+1] = ty; return f }
	otherEtherType := bytes.Clone(good)
	otherEtherType[12], otherEtherType[13] = 0x08, 0x00
	cases := []struct {
		payload []byte
		dimmnet bool
	}{
		{good, true},
		{pushFrame(4, 3, 78, nil), true},
		{otherEtherType, false},
		{withVersion(9), false},
		{withType(0xEE), false},
		{good[:len(good)-4], false}, // payload cut: PayloadLen says more than the datagram holds
		{[]byte("just some datagram, nothing to see"), false},
	}
	var pls [][]byte
	for _, c := range cases {
		pls = append(pls, c.payload)
	}
	path := udpCapture(t, pls)
	got := decode(t, tshark, lua, path)
	if len(got) != len(cases) {
		t.Fatalf("tshark decoded %d frames, wrote %d", len(got), len(cases))
	}
	for i, c := range cases {
		d := got[i]
		_, has := d.fields["dimmnet"]
		if has != c.dimmnet {
			t.Errorf("datagram %d: dimmnet layer %v, want %v (info %q)", i, has, c.dimmnet, d.info)
			continue
		}
		if !has {
			continue
		}
		if len(d.malformed) > 0 {
			t.Errorf("datagram %d: malformed %v", i, d.malformed)
		}
		if _, ok := d.fields["udp"]; !ok {
			t.Errorf("datagram %d: decoded as dimmnet without its UDP layer", i)
		}
	}
	// The first carries node 3's PUSH with its sequence number.
	f, ok := got[0].one("dimmnet.seq")
	if !ok || f.Show != "77" || !strings.Contains(got[0].info, "PUSH 3>4") {
		t.Errorf("first datagram: seq %q, info %q", f.Show, got[0].info)
	}
}
