package tests

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/gopacket/layers"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// serve --pcap on one of two daemons joined by UDP: a PUSH from its device
// to the other daemon's is in the capture frame by frame, its payload
// whole once reassembled, and so are the frames the peer sent back (the
// daemon records what it receives, not only what it sends).
func TestServePcapOverUDP(t *testing.T) {
	peers := udpPeersFile(t)
	pcap := filepath.Join(t.TempDir(), "a.pcap")
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

	got, fromPeer := readPushCapture(t, pcap, len(data))
	if !bytes.Equal(got, data) {
		t.Fatal("the PUSH frames in the capture do not reassemble into the message")
	}
	if fromPeer == 0 {
		t.Fatal("no frame from node 1 (received frames) in the capture")
	}
}

// serve --pcap with both devices in one daemon (the in-memory hub): the
// frames of both devices are recorded, as their senders sent them.
func TestServePcapInMemory(t *testing.T) {
	pcap := filepath.Join(t.TempDir(), "mem.pcap")
	d := startDaemon(t, 2, "--mtu", "4096", "--pcap", pcap)
	a, b := attach(t, d.sock(0)), attach(t, d.sock(1))
	data := pattern(20000, 5)
	a.CopyIn(0, data)
	if _, err := a.Push(1, 0, 1<<20, uint32(len(data)), uapi.FlagSignal, 4); err != nil {
		t.Fatal(err)
	}
	if s := wait(t, b); s.Type != uapi.StPUSH || !bytes.Equal(b.LinkMem()[1<<20:1<<20+len(data)], data) {
		t.Fatalf("receiver %v", s)
	}
	if s := wait(t, a); s.Type != uapi.StDone || s.Cookie != 4 {
		t.Fatalf("sender %v", s)
	}
	d.stop(t)
	got, fromPeer := readPushCapture(t, pcap, len(data))
	if !bytes.Equal(got, data) || fromPeer == 0 {
		t.Fatalf("capture: message reassembled %v, %d frames from node 1", bytes.Equal(got, data), fromPeer)
	}
}

// readPushCapture reads a daemon's pcap file: it reassembles the n-byte
// message node 0 pushed to node 1 from the PUSH frames, and counts the
// frames node 1 sent to node 0. Every dimmnet frame must parse.
func readPushCapture(t *testing.T, pcap string, n int) (msg []byte, fromPeer int) {
	t.Helper()
	f, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := capture.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if r.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type %v", r.LinkType())
	}
	got := make([]byte, n)
	covered := 0
	p := wire.NewParser()
	for {
		frame, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			if covered < n {
				t.Fatalf("captured PUSH frames cover %d of %d bytes", covered, n)
			}
			return got, fromPeer
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
}
