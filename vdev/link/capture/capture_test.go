package capture

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// closeBuffer is a bytes.Buffer that records being closed.
type closeBuffer struct {
	bytes.Buffer
	closed int
}

func (c *closeBuffer) Close() error { c.closed++; return nil }

// hubPair attaches nodes 1 and 2 to a fresh hub.
func hubPair(t *testing.T) (a, b link.Port) {
	t.Helper()
	h := link.NewHub(1514, 64)
	a, err := h.Attach(wire.NodeMAC(1))
	if err != nil {
		t.Fatal(err)
	}
	b, err = h.Attach(wire.NodeMAC(2))
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// readPcap decodes every packet of a pcap stream.
func readPcap(t *testing.T, r io.Reader) []gopacket.Packet {
	t.Helper()
	pr, err := NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	if pr.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type %v", pr.LinkType())
	}
	var pkts []gopacket.Packet
	for {
		data, ci, err := pr.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return pkts
		}
		if err != nil {
			t.Fatal(err)
		}
		if ci.CaptureLength != len(data) || ci.Length != len(data) {
			t.Fatalf("capture info %+v for %d bytes", ci, len(data))
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		p.Metadata().CaptureInfo = ci
		pkts = append(pkts, p)
	}
}

func TestCaptureBothDirections(t *testing.T) {
	a, b := hubPair(t)
	var out closeBuffer
	start := time.Now()
	ca, finish, err := Wrap(a, &out)
	if err != nil {
		t.Fatal(err)
	}
	// a sends three frames, b answers one; the capture is on a only.
	for i := range 3 {
		h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagCRC,
			SrcNode: 1, DstNode: 2, Seq: uint32(10 + i), MsgID: 7, Offset: uint32(4 * i), MsgLen: 12, Addr: 0x1000}
		if err := ca.Send(wire.AppendFrame(ca.Buffer(), wire.NodeMAC(2), ca.MAC(), &h, []byte{byte(i), 1, 2, 3})); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		f := b.Recv()
		if f == nil {
			t.Fatal("frame missing at b")
		}
		f[len(f)-1] = 0xee // the receiver owns it now; the capture must hold its own copy
		b.Release(f)
	}
	ack := wire.Header{Version: wire.Version1, Type: wire.TypeAck, Flags: wire.FlagAckValid | wire.FlagHold, SrcNode: 2, DstNode: 1, Ack: 12}
	if err := b.Send(wire.AppendFrame(b.Buffer(), wire.NodeMAC(1), b.MAC(), &ack, nil)); err != nil {
		t.Fatal(err)
	}
	if !ca.(interface{ Pending() bool }).Pending() {
		t.Fatal("Pending not passed through")
	}
	f := ca.Recv()
	if f == nil {
		t.Fatal("ACK missing at a")
	}
	ca.Release(f)
	// A refused send is not recorded.
	h := wire.Header{Version: wire.Version1, Type: wire.TypePush}
	nf := wire.AppendFrame(ca.Buffer(), wire.NodeMAC(9), ca.MAC(), &h, nil)
	if err := ca.Send(nf); !errors.Is(err, link.ErrNoRoute) {
		t.Fatalf("send to nobody: %v", err)
	}
	ca.Release(nf)
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil || out.closed != 1 {
		t.Fatalf("second finish: %v, closed %d times", err, out.closed)
	}
	// Recording has stopped.
	if err := b.Send(wire.AppendFrame(b.Buffer(), wire.NodeMAC(1), b.MAC(), &ack, nil)); err != nil {
		t.Fatal(err)
	}
	ca.Release(ca.Recv())

	pkts := readPcap(t, &out.Buffer)
	if len(pkts) != 4 {
		t.Fatalf("%d packets captured, want 4", len(pkts))
	}
	for i, p := range pkts {
		ts := p.Metadata().Timestamp
		if ts.Before(start) || ts.After(time.Now()) {
			t.Errorf("packet %d timestamp %v not now", i, ts)
		}
		eth, _ := p.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
		hd, ok := p.Layer(wire.LayerTypeDimmnet).(*wire.Header)
		if eth == nil || !ok {
			t.Fatalf("packet %d: no dimmnet layer: %v", i, p)
		}
		if i < 3 {
			if hd.Type != wire.TypePush || hd.Seq != uint32(10+i) || hd.Offset != uint32(4*i) || hd.MsgLen != 12 ||
				hd.Addr != 0x1000 || hd.Flags != wire.FlagSeq|wire.FlagCRC || hd.PayloadLen != 4 ||
				!bytes.Equal(hd.Payload, []byte{byte(i), 1, 2, 3}) || !hd.VerifyChecksum() ||
				!bytes.Equal(eth.SrcMAC, wire.NodeMAC(1)) || !bytes.Equal(eth.DstMAC, wire.NodeMAC(2)) {
				t.Errorf("packet %d: %+v", i, hd)
			}
		} else if hd.Type != wire.TypeAck || hd.Ack != 12 || hd.Flags != wire.FlagAckValid|wire.FlagHold || hd.SrcNode != 2 {
			t.Errorf("ACK: %+v", hd)
		}
	}
}

func TestCapturePassThrough(t *testing.T) {
	a, _ := hubPair(t)
	fp := impair.Wrap(a, impair.Config{Loss: 0.5})
	var out bytes.Buffer
	c, finish, err := Wrap(fp, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !c.(interface{ NeedsCRC() bool }).NeedsCRC() {
		t.Fatal("NeedsCRC of a faulty port not passed through")
	}
	if _, ok := impair.StatsOf(c); !ok {
		t.Fatal("impair.StatsOf cannot see through the capture")
	}
	if c.MTU() != 1514 || !bytes.Equal(c.MAC(), wire.NodeMAC(1)) {
		t.Fatal("MTU/MAC")
	}
	n := 0
	c.SetNotify(func() { n++ })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := finish(); err != nil {
		t.Fatal(err)
	}
	if len(readPcap(t, &out)) != 0 {
		t.Fatal("packets in an idle capture")
	}
}

// failWriter fails after the file header.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n > 0 {
		return 0, errors.New("disk full")
	}
	w.n++
	return len(p), nil
}

func TestCaptureWriteErrorReported(t *testing.T) {
	a, b := hubPair(t)
	c, finish, err := Wrap(b, &failWriter{})
	if err != nil {
		t.Fatal(err)
	}
	// Fill more than the bufio buffer so a write reaches failWriter.
	h := wire.Header{Version: wire.Version1, Type: wire.TypePush}
	for range 200 {
		if err := a.Send(wire.AppendFrame(a.Buffer(), wire.NodeMAC(2), a.MAC(), &h, make([]byte, 1000))); err != nil {
			t.Fatal(err)
		}
		f := c.Recv()
		if f == nil {
			t.Fatal("frame missing")
		}
		c.Release(f)
	}
	if err := finish(); err == nil {
		t.Fatal("write error not reported")
	}
}

// Ports of several devices record into one Writer from their own
// goroutines: with WrapSent every frame on the shared medium lands in the
// file exactly once, in timestamp order, and the file is written once.
func TestWriterSharedByPorts(t *testing.T) {
	const nodes, perNode = 4, 300
	h := link.NewHub(1514, 1024)
	var out closeBuffer
	cw, err := NewWriter(&out, 1514)
	if err != nil {
		t.Fatal(err)
	}
	ports := make([]link.Port, nodes)
	for i := range ports {
		p, err := h.Attach(wire.NodeMAC(uint16(i + 1)))
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = cw.WrapSent(p)
	}
	var wg sync.WaitGroup
	for i, p := range ports {
		wg.Go(func() {
			dst := uint16((i+1)%nodes + 1)
			for k := range perNode {
				hd := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq,
					SrcNode: uint16(i + 1), DstNode: dst, Seq: uint32(k)}
				f := wire.AppendFrame(p.Buffer(), wire.NodeMAC(dst), p.MAC(), &hd, []byte{byte(k)})
				for {
					err := p.Send(f)
					if err == nil {
						break
					}
					if !errors.Is(err, link.ErrFull) {
						t.Error(err)
						return
					}
					runtime.Gosched()
				}
			}
		})
		wg.Go(func() { // drain what the previous node sends this one
			for got := 0; got < perNode; {
				if f := p.Recv(); f != nil {
					p.Release(f)
					got++
				} else {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Wait()
	if n := cw.Frames(); n != nodes*perNode {
		t.Fatalf("Frames() = %d, want %d", n, nodes*perNode)
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cw.Close(); err != nil || out.closed != 1 {
		t.Fatalf("second Close: %v, closed %d times", err, out.closed)
	}
	pkts := readPcap(t, &out.Buffer)
	if len(pkts) != nodes*perNode {
		t.Fatalf("%d frames in the file, want %d", len(pkts), nodes*perNode)
	}
	seen := map[[2]uint32]bool{}
	var last time.Time
	for _, p := range pkts {
		hd, ok := p.Layer(wire.LayerTypeDimmnet).(*wire.Header)
		if !ok {
			t.Fatalf("frame without a dimmnet layer: %v", p)
		}
		k := [2]uint32{uint32(hd.SrcNode), hd.Seq}
		if seen[k] {
			t.Fatalf("node %d seq %d recorded twice", hd.SrcNode, hd.Seq)
		}
		seen[k] = true
		if ts := p.Metadata().Timestamp; ts.Before(last) {
			t.Fatalf("timestamps out of order: %v after %v", ts, last)
		} else {
			last = ts
		}
	}
}

// Wrap on a Writer records both directions, so a frame between two
// recorded ports appears twice (sent, then received); after Close nothing
// more is recorded.
func TestWriterWrapRecordsBothDirections(t *testing.T) {
	a, b := hubPair(t)
	var out bytes.Buffer
	cw, err := NewWriter(&out, 0)
	if err != nil {
		t.Fatal(err)
	}
	ca, cb := cw.Wrap(a), cw.Wrap(b)
	hd := wire.Header{Version: wire.Version1, Type: wire.TypeAck, SrcNode: 1, DstNode: 2}
	if err := ca.Send(wire.AppendFrame(ca.Buffer(), wire.NodeMAC(2), ca.MAC(), &hd, nil)); err != nil {
		t.Fatal(err)
	}
	f := cb.Recv()
	if f == nil {
		t.Fatal("frame missing")
	}
	cb.Release(f)
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ca.Send(wire.AppendFrame(ca.Buffer(), wire.NodeMAC(2), ca.MAC(), &hd, nil)); err != nil {
		t.Fatal(err)
	}
	if n := len(readPcap(t, &out)); n != 2 || cw.Frames() != 2 {
		t.Fatalf("%d frames in the file, Frames() %d, want 2", n, cw.Frames())
	}
}

// tunedPort is a port with the optional methods a device tunes its
// retransmission to.
type tunedPort struct {
	link.Port
}

func (tunedPort) Backlog(dst [6]byte) (int, int64) { return int(dst[5]), 42 }
func (tunedPort) Dropped() uint64                  { return 7 }
func (tunedPort) TxErrors() uint64                 { return 9 }
func (tunedPort) Lossless() bool                   { return false }

// A capture must not change how a device treats its port: whatever the
// port says about loss, drops and its transmit backlog, the wrapper says
// too, and it claims no backlog the port does not have.
func TestCapturePassesPortTuningThrough(t *testing.T) {
	a, b := hubPair(t)
	cw, err := NewWriter(io.Discard, 0)
	if err != nil {
		t.Fatal(err)
	}
	type tuning interface {
		Lossless() bool
		Dropped() uint64
		TxErrors() uint64
	}
	plain := cw.WrapSent(a)
	if l, ok := plain.(tuning); !ok || !l.Lossless() || l.Dropped() != 0 || l.TxErrors() != 0 {
		t.Fatalf("hub port through a capture: %+v", plain)
	}
	if _, ok := plain.(link.Backlogger); ok {
		t.Fatal("a capture of a port without a backlog claims one")
	}
	tuned := cw.Wrap(tunedPort{b})
	bl, ok := tuned.(link.Backlogger)
	if !ok {
		t.Fatal("Backlogger not passed through")
	}
	if q, last := bl.Backlog([6]byte{5: 3}); q != 3 || last != 42 {
		t.Fatalf("Backlog = %d, %d", q, last)
	}
	if l := tuned.(tuning); l.Lossless() || l.Dropped() != 7 || l.TxErrors() != 9 {
		t.Fatal("Lossless, Dropped or TxErrors not passed through")
	}
	if u, ok := tuned.(interface{ Unwrap() link.Port }); !ok || u.Unwrap() != (tunedPort{b}) {
		t.Fatal("Unwrap does not reach the port")
	}
}
