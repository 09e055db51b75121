// Package capture records the frames link.Ports send and receive in a
// pcapng stream (Ethernet link type, nanosecond timestamps), one port's or
// many ports' into one stream, written with gopacket's pure-Go pcapgo, so
// the traffic of a device or of a whole set of devices can be read back
// by gopacket programs, tcpdump, or tshark and Wireshark with the dimmnet
// dissector in tools/wireshark. Each device's port is an interface of its
// own in the file (named node<K>), so a capture of several stations says
// which device recorded each frame. It backs the --pcap flags.
package capture

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// minSnaplen is the snapshot length written in the file header when the
// largest frame is smaller: every frame is recorded whole anyway.
const minSnaplen = 65535

// Writer is one pcap stream that any number of ports record into, from
// any goroutine, so the traffic of a whole set of devices lands in one
// file in the order it happened. NewWriter makes one; Wrap and WrapSent
// attach ports.
type Writer struct {
	mu      sync.Mutex // guards everything below: every port's both directions write
	bw      *bufio.Writer
	nw      *pcapgo.NgWriter
	w       io.Writer
	snaplen uint32
	ifaces  map[string]int // interface index by name
	frames  int            // frames recorded
	err     error          // first write error; recording stops after it
	closed  bool           // the capture was flushed and closed
}

// OtherInterface names the interface of frames recorded by no port of a
// device (Record): interface 0 of every capture.
const OtherInterface = "dimmnet"

// NewWriter writes a pcapng section header and its first interface
// (OtherInterface) to w at once and returns the Writer that records into
// it. snaplen is the largest frame any port will carry (at least
// minSnaplen is declared), so no frame is cut.
func NewWriter(w io.Writer, snaplen int) (*Writer, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	cw := &Writer{bw: bw, w: w, snaplen: uint32(max(snaplen, minSnaplen)), ifaces: map[string]int{}}
	nw, err := pcapgo.NewNgWriterInterface(bw, cw.iface(OtherInterface, "frames recorded outside any device's port"),
		pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "dimmnet", OS: runtime.GOOS, Hardware: runtime.GOARCH}})
	if err != nil {
		return nil, fmt.Errorf("capture: pcapng header: %w", err)
	}
	cw.nw, cw.ifaces[OtherInterface] = nw, 0
	if err := cw.flush(); err != nil {
		return nil, err
	}
	return cw, nil
}

func (cw *Writer) iface(name, desc string) pcapgo.NgInterface {
	return pcapgo.NgInterface{Name: name, Description: desc, OS: runtime.GOOS, LinkType: layers.LinkTypeEthernet,
		SnapLength: cw.snaplen, TimestampResolution: 9}
}

// interfaceOf returns the index of the interface port p records on: one
// per device, named node<K> after the node its MAC belongs to.
func (cw *Writer) interfaceOf(p link.Port) int {
	name, desc := OtherInterface, ""
	if mac := p.MAC(); mac != nil {
		name, desc = mac.String(), "a port with MAC "+mac.String()
		if n, ok := wire.MACNode(mac); ok {
			name, desc = fmt.Sprintf("node%d", n), fmt.Sprintf("dimmnet device node %d (MAC %v)", n, mac)
		}
	}
	return cw.named(name, desc)
}

// named returns the index of the interface called name, added with desc
// if the capture has none yet.
func (cw *Writer) named(name, desc string) int {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if i, ok := cw.ifaces[name]; ok {
		return i
	}
	i, err := cw.nw.AddInterface(cw.iface(name, desc))
	if err != nil {
		if cw.err == nil {
			cw.err = fmt.Errorf("capture: interface %s: %w", name, err)
		}
		return 0
	}
	cw.ifaces[name] = i
	return i
}

// flush writes out both buffers: the NgWriter's own and ours.
func (cw *Writer) flush() error {
	if err := cw.nw.Flush(); err != nil {
		return fmt.Errorf("capture: flush: %w", err)
	}
	if err := cw.bw.Flush(); err != nil {
		return fmt.Errorf("capture: flush: %w", err)
	}
	return nil
}

// Wrap returns p recording every frame successfully sent through it and
// every frame received from it. The result passes everything else through
// to p: the optional Pending, NeedsCRC, Lossless, Dropped and TxErrors
// methods and link.Backlogger when p has it, since a device tunes its
// retransmission to them, and Unwrap() reaches p. It is a *Port, or one
// embedding it. link.VectorSender is not passed through: the capture must
// see each frame whole, so the device sends it with Send.
func (cw *Writer) Wrap(p link.Port) link.Port {
	return wrap(&Port{inner: p, cw: cw, rx: true, iface: cw.interfaceOf(p)})
}

// WrapSent is Wrap recording only the frames p sends. When every port on
// a medium is recorded into one Writer, each frame is then recorded once,
// not once by its sender and again by its receiver.
func (cw *Writer) WrapSent(p link.Port) link.Port {
	return wrap(&Port{inner: p, cw: cw, iface: cw.interfaceOf(p)})
}

// wrap adds the optional interfaces that a method cannot answer for an
// inner port without them.
func wrap(c *Port) link.Port {
	if b, ok := c.inner.(link.Backlogger); ok {
		return &backlogPort{c, b}
	}
	return c
}

// backlogPort is a Port around a link.Backlogger: recording queues
// nothing, so the inner port's backlog is the whole backlog.
type backlogPort struct {
	*Port
	b link.Backlogger
}

// Backlog is the wrapped port's.
func (c *backlogPort) Backlog(dst [6]byte) (int, int64) { return c.b.Backlog(dst) }

// Record writes one frame that did not pass a wrapped port (a trace's
// frame, received from a daemon), stamped now.
func (cw *Writer) Record(f []byte) { cw.record(0, f) }

// RecordOn writes one frame that did not pass a wrapped port on the
// interface called name (node<K> for a device whose frames arrive some
// other way, such as its trace socket), stamped now.
func (cw *Writer) RecordOn(name string, f []byte) {
	cw.record(cw.named(name, "dimmnet device "+name), f)
}

// record writes one frame on interface iface, stamped now: taking the
// time under the lock keeps timestamps in file order whichever port
// records.
func (cw *Writer) record(iface int, f []byte) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.closed || cw.err != nil {
		return
	}
	ci := gopacket.CaptureInfo{Timestamp: time.Now(), CaptureLength: len(f), Length: len(f), InterfaceIndex: iface}
	if err := cw.nw.WritePacket(ci, f); err != nil {
		cw.err = fmt.Errorf("capture: %w", err)
		return
	}
	cw.frames++
}

// Close flushes the capture and closes the underlying writer if it is an
// io.Closer; recording stops then. Later calls return the same result
// without doing anything.
func (cw *Writer) Close() error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.closed {
		return cw.err
	}
	cw.closed = true
	if err := cw.flush(); err != nil && cw.err == nil {
		cw.err = err
	}
	if cl, ok := cw.w.(io.Closer); ok {
		if err := cl.Close(); err != nil && cw.err == nil {
			cw.err = fmt.Errorf("capture: close: %w", err)
		}
	}
	return cw.err
}

// Flush writes buffered records to the underlying writer, so a capture can
// be inspected while the ports run.
func (cw *Writer) Flush() error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.closed {
		return cw.err
	}
	if err := cw.flush(); err != nil && cw.err == nil {
		cw.err = err
	}
	return cw.err
}

// Err returns the first error met while recording, if any.
func (cw *Writer) Err() error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.err
}

// Frames returns how many frames have been recorded, so a caller can tell
// an empty capture from a busy one without reading it back.
func (cw *Writer) Frames() int {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.frames
}

// Port is a link.Port that records its traffic into a Writer; Wrap and
// Writer.Wrap make one.
type Port struct {
	inner link.Port
	cw    *Writer
	rx    bool // received frames are recorded too
	iface int  // the capture interface of the port's device

	scratch sync.Pool // copies of sent frames, taken before Send gives them away
}

// Wrap returns p recording every frame successfully sent through it and
// every frame received from it to w as a pcap stream of its own (passing
// everything else through, as Writer.Wrap does), and a function that flushes the stream and closes w if it is an io.Closer
// (call it once the traffic is over; recording stops then). The pcap file
// header is written at once. To record several ports into one stream,
// use NewWriter and Writer.Wrap instead.
func Wrap(p link.Port, w io.Writer) (link.Port, func() error, error) {
	cw, err := NewWriter(w, p.MTU())
	if err != nil {
		return nil, nil, err
	}
	return cw.Wrap(p), cw.Close, nil
}

// Flush flushes the Writer the port records into.
func (c *Port) Flush() error { return c.cw.Flush() }

// Err returns the first error the port's Writer met, if any.
func (c *Port) Err() error { return c.cw.Err() }

// Send records the frame if the wrapped port accepts it. The frame is
// copied first, because once sent it belongs to the medium (the in-memory
// hub hands it straight to the receiver).
func (c *Port) Send(frame []byte) error {
	bp, _ := c.scratch.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	cp := append((*bp)[:0], frame...)
	err := c.inner.Send(frame)
	if err == nil {
		c.cw.record(c.iface, cp)
	}
	*bp = cp
	c.scratch.Put(bp)
	return err
}

// Recv returns the wrapped port's next frame, recording it unless the
// port records only what it sends.
func (c *Port) Recv() []byte {
	f := c.inner.Recv()
	if f != nil && c.rx {
		c.cw.record(c.iface, f)
	}
	return f
}

// MTU is the wrapped port's.
func (c *Port) MTU() int { return c.inner.MTU() }

// MAC is the wrapped port's.
func (c *Port) MAC() net.HardwareAddr { return c.inner.MAC() }

// Buffer is the wrapped port's.
func (c *Port) Buffer() []byte { return c.inner.Buffer() }

// Release is the wrapped port's.
func (c *Port) Release(frame []byte) { c.inner.Release(frame) }

// SetNotify installs f on the wrapped port.
func (c *Port) SetNotify(f func()) { c.inner.SetNotify(f) }

// Close flushes the capture (without closing its writer, which other
// ports may share; the function from Wrap or Writer.Close does that) and
// closes the wrapped port.
func (c *Port) Close() error {
	return errors.Join(c.inner.Close(), c.Flush())
}

// Unwrap returns the wrapped port.
func (c *Port) Unwrap() link.Port { return c.inner }

// Pending is the wrapped port's, or true when it cannot tell.
func (c *Port) Pending() bool {
	if r, ok := c.inner.(interface{ Pending() bool }); ok {
		return r.Pending()
	}
	return true
}

// WaitFrame is the wrapped port's (link.FrameWaiter); false at once over
// a port that cannot block.
func (c *Port) WaitFrame(timeoutNs int64) bool {
	if w := link.FrameWaiterOf(c.inner); w != nil {
		return w.WaitFrame(timeoutNs)
	}
	return false
}

// WaitsFrames is the wrapped port's.
func (c *Port) WaitsFrames() bool { return link.FrameWaiterOf(c.inner) != nil }

// NeedsCRC is the wrapped port's, or false when it does not say.
func (c *Port) NeedsCRC() bool {
	if r, ok := c.inner.(interface{ NeedsCRC() bool }); ok {
		return r.NeedsCRC()
	}
	return false
}

// Lossless is the wrapped port's, or false when it does not say.
func (c *Port) Lossless() bool {
	if r, ok := c.inner.(interface{ Lossless() bool }); ok {
		return r.Lossless()
	}
	return false
}

// Dropped is the wrapped port's count of frames it discarded, or 0 when
// it keeps none.
func (c *Port) Dropped() uint64 {
	if r, ok := c.inner.(interface{ Dropped() uint64 }); ok {
		return r.Dropped()
	}
	return 0
}

// TxErrors is the wrapped port's count of frames the kernel refused, or 0
// when it keeps none.
func (c *Port) TxErrors() uint64 {
	if r, ok := c.inner.(interface{ TxErrors() uint64 }); ok {
		return r.TxErrors()
	}
	return 0
}

// KnowsPeer is the wrapped port's answer (false when it cannot tell).
func (c *Port) KnowsPeer(mac [6]byte) bool {
	s := link.VouchesFor(c.inner)
	return s != nil && s.KnowsPeer(mac)
}

// Vouches is whether the wrapped port can tell its senders.
func (c *Port) Vouches() bool { return link.VouchesFor(c.inner) != nil }

// Reader reads a capture back: pcapng as Writer writes it, or a classic
// pcap file (older captures, other tools').
type Reader struct {
	ng *pcapgo.NgReader
	pc *pcapgo.Reader
}

// NewReader reads the file header of a pcapng or pcap stream.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("capture: read header: %w", err)
	}
	if string(magic) == "\x0a\x0d\x0d\x0a" { // a pcapng section header block
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, fmt.Errorf("capture: pcapng: %w", err)
		}
		return &Reader{ng: ng}, nil
	}
	pc, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("capture: pcap: %w", err)
	}
	return &Reader{pc: pc}, nil
}

// ReadPacketData returns the next frame and its capture info (io.EOF
// after the last).
func (r *Reader) ReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	if r.ng != nil {
		return r.ng.ReadPacketData()
	}
	return r.pc.ReadPacketData()
}

// LinkType is the first interface's link type.
func (r *Reader) LinkType() layers.LinkType {
	if r.ng != nil {
		return r.ng.LinkType()
	}
	return r.pc.LinkType()
}

// InterfaceName names the interface a frame was recorded on: node<K> for
// a device's port, OtherInterface for the rest ("" in a pcap file, which
// has no interfaces).
func (r *Reader) InterfaceName(ci gopacket.CaptureInfo) string {
	if r.ng == nil {
		return ""
	}
	in, err := r.ng.Interface(ci.InterfaceIndex)
	if err != nil {
		return ""
	}
	return in.Name
}
