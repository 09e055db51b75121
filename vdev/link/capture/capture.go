// Package capture records the frames a link.Port sends and receives in a
// pcap stream (Ethernet link type, nanosecond timestamps), written with
// gopacket's pure-Go pcapgo, so a device's traffic can be read back by
// gopacket programs, tcpdump, or tshark and Wireshark with the dimmnet
// dissector in tools/wireshark. It backs the --pcap flag.
package capture

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/dimmnet/dimmnet/vdev/link"
)

// minSnaplen is the snapshot length written in the file header when the
// port's MTU is smaller: every frame is recorded whole anyway.
const minSnaplen = 65535

// Port is a link.Port that records its traffic; Wrap makes one.
type Port struct {
	inner link.Port

	mu     sync.Mutex // guards everything below: both directions write
	bw     *bufio.Writer
	pw     *pcapgo.Writer
	w      io.Writer
	err    error // first write error; recording stops after it
	closed bool  // the capture was flushed and closed

	scratch sync.Pool // copies of sent frames, taken before Send gives them away
}

// Wrap returns p recording every frame successfully sent through it and
// every frame received from it to w as a pcap stream, and a function that
// flushes the stream and closes w if it is an io.Closer (call it once the
// traffic is over; recording stops then). The pcap file header is written
// at once. The result passes everything else through to p, including the
// optional Pending and NeedsCRC methods, and has Unwrap() to reach p.
func Wrap(p link.Port, w io.Writer) (link.Port, func() error, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	pw := pcapgo.NewWriterNanos(bw)
	snap := max(p.MTU(), minSnaplen)
	if err := pw.WriteFileHeader(uint32(snap), layers.LinkTypeEthernet); err != nil {
		return nil, nil, err
	}
	c := &Port{inner: p, bw: bw, pw: pw, w: w}
	return c, c.finish, nil
}

// record writes one frame; it runs under no lock of the caller's.
func (c *Port) record(ts time.Time, f []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.err != nil {
		return
	}
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(f), Length: len(f)}
	if err := c.pw.WritePacket(ci, f); err != nil {
		c.err = err
	}
}

// finish flushes the capture and closes its writer; later calls return
// the same result without doing anything.
func (c *Port) finish() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.err
	}
	c.closed = true
	if err := c.bw.Flush(); err != nil && c.err == nil {
		c.err = err
	}
	if cl, ok := c.w.(io.Closer); ok {
		if err := cl.Close(); err != nil && c.err == nil {
			c.err = err
		}
	}
	return c.err
}

// Flush writes buffered records to the underlying writer, so a capture can
// be inspected while the port runs.
func (c *Port) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.err
	}
	if err := c.bw.Flush(); err != nil && c.err == nil {
		c.err = err
	}
	return c.err
}

// Err returns the first error met while recording, if any.
func (c *Port) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Send records the frame if the wrapped port accepts it. The frame is
// copied first, because once sent it belongs to the medium (the in-memory
// hub hands it straight to the receiver).
func (c *Port) Send(frame []byte) error {
	ts := time.Now()
	bp, _ := c.scratch.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	cp := append((*bp)[:0], frame...)
	err := c.inner.Send(frame)
	if err == nil {
		c.record(ts, cp)
	}
	*bp = cp
	c.scratch.Put(bp)
	return err
}

// Recv returns the wrapped port's next frame, recording it.
func (c *Port) Recv() []byte {
	f := c.inner.Recv()
	if f != nil {
		c.record(time.Now(), f)
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

// Close flushes the capture (without closing its writer; the function from
// Wrap does that) and closes the wrapped port.
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

// NeedsCRC is the wrapped port's, or false when it does not say.
func (c *Port) NeedsCRC() bool {
	if r, ok := c.inner.(interface{ NeedsCRC() bool }); ok {
		return r.NeedsCRC()
	}
	return false
}
