package tests

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// serve --pcap on one of two daemons joined by UDP: a PUSH from its device
// to the other daemon's is in the capture frame by frame, its payload
// whole once reassembled, and so are the frames the peer sent back (the
// daemon records what it receives, not only what it sends).
func TestServePcapOverUDP(t *testing.T) {
	var ports [2]string
	for i := range ports {
		l, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.LocalAddr().String()
		l.Close()
	}
	tmp := t.TempDir()
	peers := filepath.Join(tmp, "peers")
	if err := os.WriteFile(peers, []byte(fmt.Sprintf("node 0 %s\nnode 1 %s\n", ports[0], ports[1])), 0o644); err != nil {
		t.Fatal(err)
	}
	pcap := filepath.Join(tmp, "a.pcap")
	a := startDaemon(t, 1, "--link", "udp", "--peers", peers, "--node-base", "0", "--mtu", "4096", "--pcap", pcap)
	b := startDaemon(t, 1, "--link", "udp", "--peers", peers, "--node-base", "1", "--mtu", "4096")
	da, db := attach(t, a.sock(0)), attach(t, filepath.Join(b.dir, "node1.sock"))
	data := pattern(20000, 3) // five frames of 4096 bytes
	da.CopyIn(0, data)
	if _, err := da.Push(1, 0, 1<<20, uint32(len(data)), uapi.FlagSignal, 9); err != nil {
		t.Fatal(err)
	}
	if s := wait(t, db); s.Type != uapi.StPUSH || !bytes.Equal(db.LinkMem()[1<<20:1<<20+len(data)], data) {
		t.Fatalf("receiver %v", s)
	}
	if s := wait(t, da); s.Type != uapi.StDone || s.Cookie != 9 {
		t.Fatalf("sender %v", s)
	}
	a.stop(t) // flushes and closes the capture
	if !strings.Contains(a.stderr.String(), "frames captured to "+pcap) {
		t.Fatalf("no capture summary:\n%s", a.stderr)
	}

	f, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type %v", r.LinkType())
	}
	got := make([]byte, len(data))
	covered, fromPeer := 0, 0
	p := wire.NewParser()
	for {
		frame, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		h, payload, err := p.Parse(frame)
		if err != nil {
			t.Fatalf("captured frame does not parse: %v", err)
		}
		switch {
		case h.SrcNode == 1 && h.DstNode == 0:
			fromPeer++
		case h.Type == wire.TypePush && h.SrcNode == 0 && h.DstNode == 1:
			if int(h.Offset)+len(payload) > len(got) {
				t.Fatalf("PUSH frame at offset %d with %d bytes beyond the message", h.Offset, len(payload))
			}
			covered += copy(got[h.Offset:], payload)
		}
	}
	if covered < len(data) || !bytes.Equal(got, data) {
		t.Fatalf("captured PUSH frames cover %d of %d bytes, equal %v", covered, len(data), bytes.Equal(got, data))
	}
	if fromPeer == 0 {
		t.Fatal("no frame from node 1 (received frames) in the capture")
	}
}
