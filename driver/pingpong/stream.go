package pingpong

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"

	"github.com/dimmnet/dimmnet/driver"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// StreamResult is one windowed stream (perftest's ib_write_bw, OSU's
// osu_bw with its window): how many messages crossed and how fast.
type StreamResult struct {
	Mode, Condition string
	Size, Window    int
	Bidir           bool
	// Windows and Msgs are the timed windows and the messages this side
	// sent in them; ElapsedNs is their time, from the first post to the
	// last window's end.
	Windows, Msgs int
	ElapsedNs     int64
	// MBps counts the bytes of both directions with Bidir.
	MBps, MsgsPerS float64
	// Checked counts received messages compared byte for byte with what
	// the peer's SetupSide wrote (StreamSpec.Check).
	Checked int
	Recovery
}

// StreamSpec is one windowed stream measurement.
type StreamSpec struct {
	Mode, Condition string
	Size            int
	// Window is the messages posted before the sender waits for the
	// receiver to say it took them all (OSU's window).
	Window int
	// Warm untimed windows, then Windows timed ones.
	Warm, Windows int
	// Bidir: both sides send a window and take the other's (osu_bibw);
	// then no window reply is needed.
	Bidir bool
	// Check makes each receiver compare every message (hostcopy
	// condition, where it copies them out) with the bytes SetupSide wrote
	// on the sending side: the stream's messages are the same source.
	Check bool
}

// ackBytes is the size of the receiver's end-of-window reply.
const ackBytes = 8

// InitiateStream is the sending side of a windowed stream: each window
// posts Window messages without waiting, then waits for the receiver's
// reply that it took them all (or, with Bidir, for the peer's window).
// The receiver runs RespondStream with the same spec.
func InitiateStream(a *Side, sp StreamSpec) (StreamResult, error) {
	if err := sp.valid(a); err != nil {
		return StreamResult{}, err
	}
	a.fillSource(sp.Size)
	before := snapRecovery(a.D)
	r := StreamResult{Mode: sp.Mode, Condition: sp.Condition, Size: sp.Size, Window: sp.Window, Bidir: sp.Bidir}
	var start int64
	var got int
	for w := 0; w < sp.Warm+sp.Windows; w++ {
		if w == sp.Warm {
			start = monotime.Now()
		}
		for i := 0; i < sp.Window; i++ {
			if err := a.sendMore(sp.Mode, sp.Size, a.l.src, i < sp.Window-1); err != nil {
				return r, err
			}
		}
		if sp.Bidir {
			if err := a.take(sp, &got, (w+1)*sp.Window, &r.Checked); err != nil {
				return r, err
			}
		} else if err := a.takeAck(); err != nil {
			return r, err
		}
	}
	r.ElapsedNs = monotime.Now() - start
	r.Windows = sp.Windows
	r.Msgs = sp.Windows * sp.Window
	bytes := float64(r.Msgs) * float64(sp.Size)
	if sp.Bidir {
		bytes *= 2
	}
	secs := float64(max(r.ElapsedNs, 1)) / 1e9
	r.MBps = bytes / secs / 1e6
	r.MsgsPerS = float64(r.Msgs) / secs
	r.Recovery = recoverySince(before, a.D)
	return r, nil
}

// RespondStream is the receiving side of InitiateStream's stream. It
// returns how many messages it compared (StreamSpec.Check).
func RespondStream(b *Side, sp StreamSpec) (checked int, err error) {
	if err := sp.valid(b); err != nil {
		return 0, err
	}
	if sp.Bidir {
		b.fillSource(sp.Size)
	}
	var got int
	for w := 0; w < sp.Warm+sp.Windows; w++ {
		if sp.Bidir {
			for i := 0; i < sp.Window; i++ {
				if err := b.sendMore(sp.Mode, sp.Size, b.l.src, i < sp.Window-1); err != nil {
					return checked, err
				}
			}
		}
		if err := b.take(sp, &got, (w+1)*sp.Window, &checked); err != nil {
			return checked, err
		}
		if !sp.Bidir {
			// The reply lands where the stream's PUSHes land on the
			// sender, which is not receiving any.
			if err := b.sendAt(ModePush, ackBytes, b.l.src); err != nil {
				return checked, err
			}
		}
	}
	return checked, nil
}

func (sp StreamSpec) valid(s *Side) error {
	switch {
	case sp.Mode != ModePush && sp.Mode != ModeIPush, sp.Condition != CondLinkMem && sp.Condition != CondHostCopy:
		return fmt.Errorf("stream %s %s: unknown mode or condition", sp.Mode, sp.Condition)
	case sp.Window < 1 || sp.Windows < 1 || sp.Warm < 0:
		return fmt.Errorf("stream: window %d, %d windows, %d warm: %w", sp.Window, sp.Windows, sp.Warm, ErrNoRoundTrips)
	case sp.Size < 1 || sp.Size > len(s.buf):
		return fmt.Errorf("stream of %d bytes: the side was set up for at most %d", sp.Size, len(s.buf))
	}
	return nil
}

// sendAt posts one n-byte message from link address src (see send). A
// message whose doorbell could not be rung (driver.ErrNotRung) is sent:
// it is posted, and leaves at the device's next look. Taken for a
// failure, the side stopped while its message still went to a peer that
// answered it.
func (s *Side) sendAt(mode string, n int, src uint64) error {
	for {
		if err := s.stoppedErr("sending", n); err != nil {
			return err
		}
		var err error
		if mode == ModePush {
			_, err = s.D.Push(s.Peer, src, s.l.dst, uint32(n), 0, 0)
		} else {
			_, err = s.D.IPush(s.Peer, uapi.GPID(s.Peer, 0), src, uint32(n), 0, 0, 0)
		}
		if driver.Posted(err) {
			if err != nil {
				s.NotRung++ // posted: the device sends it at its next look
			}
			return nil
		}
		if !isQueueFull(err) {
			return err
		}
		s.yieldFull()
	}
}

// sendMore is sendAt for a window's messages: each but the last is
// posted with more (driver.PostMore), so the last one's post sends the
// whole window in one pass, as a window of verbs' post list does. (The
// calls are direct: a method value would move the descriptor to the
// heap, an allocation per message.)
func (s *Side) sendMore(mode string, n int, src uint64, more bool) error {
	if !more {
		return s.sendAt(mode, n, src)
	}
	c := uapi.Desc{Opcode: uapi.OpPUSH, DstNode: s.Peer, SrcProc: s.D.GPID(), Length: uint32(n), LocalAddr: src, RemoteAddr: s.l.dst}
	if mode != ModePush {
		c = uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: s.Peer, DstProc: uapi.GPID(s.Peer, 0), SrcProc: s.D.GPID(), Length: uint32(n), LocalAddr: src}
	}
	for {
		if err := s.stoppedErr("sending", n); err != nil {
			return err
		}
		_, err := s.D.PostMore(&c)
		if err == nil || !isQueueFull(err) {
			return err
		}
		s.yieldFull()
	}
}

// takeAck waits for the receiver's end-of-window reply.
func (s *Side) takeAck() error {
	if err := s.wait("window reply", ackBytes); err != nil {
		return err
	}
	st, ok := s.D.Poll()
	if !ok {
		return fmt.Errorf("node %d: status vanished", s.D.Node())
	}
	if st.Type != uapi.StPUSH || st.Length != ackBytes {
		return fmt.Errorf("node %d: expected the %d-byte window reply, got %v", s.D.Node(), ackBytes, st)
	}
	return nil
}

// take consumes the stream's messages until *got reaches upto, in the
// spec's condition; with Check it compares each one copied out.
func (s *Side) take(sp StreamSpec, got *int, upto int, checked *int) error {
	n := sp.Size
	for *got < upto {
		if err := s.wait(sp.Mode, n); err != nil {
			return err
		}
		avail := int(min(s.D.StatusTail()-s.D.StatusHead(), uint64(upto-*got)))
		if sp.Condition == CondLinkMem && sp.Mode == ModePush {
			s.D.Skip(uint64(avail)) // a PUSH stream's only statuses are its messages
			*got += avail
			continue
		}
		// An IPUSH ring a window overruns stalls its link (hold mode)
		// and says so with a RING_FULL status, which is no message:
		// IPUSH streams read every status's type, even in linkmem.
		for range avail {
			st, ok := s.D.Poll() // on RING_FULL it publishes the ring's head
			if !ok {
				return fmt.Errorf("node %d: status vanished", s.D.Node())
			}
			if st.Type == uapi.StRingFull {
				continue
			}
			want := uapi.StPUSH
			if sp.Mode == ModeIPush {
				want = uapi.StIPUSHMsg
			}
			if st.Type != want || st.Length != uint32(n) {
				return fmt.Errorf("node %d: expected a %d-byte %s status, got %v", s.D.Node(), n, want, st)
			}
			*got++
			if sp.Condition == CondLinkMem {
				s.releaseLinkMem(n)
				continue
			}
			if sp.Mode == ModeIPush {
				s.ring.Copy(s.buf[:n], &st)
				s.ring.Release(st.End)
			} else {
				s.D.CopyOut(s.buf[:n], st.Addr)
			}
			if sp.Check {
				if err := s.checkSource(n); err != nil {
					return fmt.Errorf("message %d: %w", *got, err)
				}
				*checked++
			}
		}
	}
	return nil
}

// fillSource writes the stream's source bytes, what SetupSide writes
// without Verify: a verified ping-pong before may have left its own.
func (s *Side) fillSource(n int) {
	src := s.D.LinkMem()[s.l.src : s.l.src+uint64(n)]
	for i := range src {
		src[i] = byte(i) ^ byte(s.D.Node())
	}
}

// checkSource compares s.buf[:n] with the bytes the peer's SetupSide
// wrote into its source buffer (unverified sides send those).
func (s *Side) checkSource(n int) error {
	if len(s.peerSrc) < n {
		s.peerSrc = make([]byte, len(s.buf))
		for i := range s.peerSrc {
			s.peerSrc[i] = byte(i) ^ byte(s.Peer)
		}
	}
	want := s.peerSrc[:n]
	if !bytes.Equal(s.buf[:n], want) {
		at := 0
		for at < n && s.buf[at] == want[at] {
			at++
		}
		return fmt.Errorf("%w: %d-byte message from node %d differs at byte %d", ErrCorrupt, n, s.Peer, at)
	}
	return nil
}

func isQueueFull(err error) bool { return errors.Is(err, driver.ErrQueueFull) }

// yieldFull lets the peer of this process move on while the command
// queue is full (a device this thread runs was polled by Post).
func (s *Side) yieldFull() { runtime.Gosched() }
