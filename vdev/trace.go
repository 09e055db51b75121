package vdev

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// A live trace shows a driver developer what the device sees, decoded, as
// it happens: the commands it takes, the statuses it writes, doorbells and
// interrupts, frames with their sequence numbers, violations. It is the
// device's usbmon. Nobody watching, it costs one atomic load per event
// site; a watcher that stops reading never slows the device: its events
// are dropped and counted.

// EventKind says what a trace event is.
type EventKind uint8

// Kinds of trace events.
const (
	EvCmd       EventKind = iota + 1 // a command taken from the queue
	EvStatus                         // a status entry written
	EvDoorbell                       // a doorbell heard
	EvInterrupt                      // an interrupt sent to a sleeping driver
	EvTx                             // a frame sent
	EvRx                             // a frame received (before it is judged)
	EvViolation                      // a checked device's violation
)

var eventNames = [...]string{EvCmd: "CMD", EvStatus: "STATUS", EvDoorbell: "DOORBELL", EvInterrupt: "IRQ",
	EvTx: "TX", EvRx: "RX", EvViolation: "VIOLATION"}

// String names the kind as the trace's lines do.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && eventNames[k] != "" {
		return eventNames[k]
	}
	return fmt.Sprintf("EVENT(%d)", uint8(k))
}

// Event is one traced event. Frame holds the frame's bytes only for a
// watcher that asked for them (a capture); the header is always decoded.
type Event struct {
	Time   int64 // CLOCK_MONOTONIC ns
	Node   uint16
	Kind   EventKind
	Index  uint64 // EvCmd: the command index
	Desc   uapi.Desc
	Status uapi.Status
	Hdr    wire.Header
	Frame  []byte
	Viol   uapi.Violation
}

// String is the event as one line of `dimmnet trace`.
func (e Event) String() string {
	t := fmt.Sprintf("%d.%06d node %d %-9s ", e.Time/1e9, e.Time%1e9/1e3, e.Node, e.Kind)
	switch e.Kind {
	case EvCmd:
		c := e.Desc
		return t + fmt.Sprintf("cmd#%d %s dst %d/%d local %#x remote %#x len %d flags %s imm %#x cookie %#x",
			e.Index, c.Opcode, c.DstNode, c.DstProc, c.LocalAddr, c.RemoteAddr, c.Length, cmdFlags(c.Flags), c.Imm, c.Cookie)
	case EvStatus:
		return t + e.Status.String()
	case EvTx, EvRx:
		h := &e.Hdr
		s := fmt.Sprintf("%s %d>%d seq=%d", h.Type, h.SrcNode, h.DstNode, h.Seq)
		if h.Flags&wire.FlagAckValid != 0 {
			s += fmt.Sprintf(" ack=%d", h.Ack)
		}
		if h.Type == wire.TypeNack {
			s += " code=" + wire.NackCodeName(h.Code)
		}
		s += fmt.Sprintf(" msg=%d off=%d/%d len=%d", h.MsgID, h.Offset, h.MsgLen, h.PayloadLen)
		if h.Flags&wire.FlagSeq != 0 {
			s += fmt.Sprintf(" epoch=%d", h.Code)
		}
		return t + s + " [" + h.Flags.String() + "]"
	case EvViolation:
		return t + e.Viol.String()
	}
	return strings.TrimSpace(t)
}

func cmdFlags(f uint8) string {
	var names []string
	for _, n := range uapi.FlagNames {
		if f&n.Bit != 0 {
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return "0"
	}
	return strings.Join(names, "|")
}

// tracer fans a device's events out to its watchers. It is replaced, not
// changed, when a watcher comes or goes (Device.tracer).
type tracer struct {
	subs   []*Watch
	frames bool // some watcher wants frame bytes
}

// Watch is one watcher of a device's trace.
type Watch struct {
	// C delivers the events; it is closed by Stop.
	C       <-chan Event
	mu      sync.Mutex // guards c against a send after Stop closed it
	c       chan Event
	frames  bool
	dropped atomic.Uint64
	d       *Device
}

// Dropped is how many events the watcher missed because it read too
// slowly.
func (w *Watch) Dropped() uint64 { return w.dropped.Load() }

// Watch starts tracing the device for a new watcher with room for buf
// events; frames: also copy each frame's bytes. Stop ends it.
func (d *Device) Watch(buf int, frames bool) *Watch {
	w := &Watch{c: make(chan Event, max(buf, 1)), frames: frames, d: d}
	w.C = w.c
	d.traceMu.Lock()
	defer d.traceMu.Unlock()
	t := &tracer{frames: frames}
	if old := d.tracer.Load(); old != nil {
		t.subs = append(t.subs, old.subs...)
		t.frames = t.frames || old.frames
	}
	t.subs = append(t.subs, w)
	d.tracer.Store(t)
	return w
}

// Stop detaches the watcher and closes its channel; it may be called
// more than once.
func (w *Watch) Stop() {
	d := w.d
	d.traceMu.Lock()
	defer d.traceMu.Unlock()
	old := d.tracer.Load()
	if old == nil {
		return
	}
	t := &tracer{}
	for _, s := range old.subs {
		if s != w {
			t.subs = append(t.subs, s)
			t.frames = t.frames || s.frames
		}
	}
	if len(t.subs) == 0 {
		d.tracer.Store(nil)
	} else {
		d.tracer.Store(t)
	}
	// The device may be emitting to an older set right now: it sends
	// under the watcher's lock, which this takes before closing.
	w.mu.Lock()
	if w.c != nil { // a second Stop finds it closed
		close(w.c)
		w.c = nil
	}
	w.mu.Unlock()
}

// emit hands e to every watcher without waiting: a full watcher loses it.
func (t *tracer) emit(d *Device, e Event) {
	e.Time, e.Node = monotime.Now(), d.node
	for _, w := range t.subs {
		ev := e
		if !w.frames {
			ev.Frame = nil
		}
		w.mu.Lock()
		if w.c != nil {
			select {
			case w.c <- ev:
			default:
				w.dropped.Add(1)
			}
		}
		w.mu.Unlock()
	}
}

// traceFrame emits a frame event, copying the bytes only for a capture.
func (d *Device) traceFrame(t *tracer, k EventKind, h *wire.Header, head, payload []byte) {
	e := Event{Kind: k, Hdr: *h}
	e.Hdr.BaseLayer = wire.Header{}.BaseLayer // no references into the frame
	if t.frames {
		e.Frame = append(append([]byte(nil), head...), payload...)
	}
	t.emit(d, e)
}

// traceTx emits a sent frame: its header as sent (PayloadLen filled in
// by the encoder) and, for a capture, its bytes.
func (d *Device) traceTx(t *tracer, h *wire.Header, head, payload []byte) {
	hh := *h
	hh.PayloadLen = uint32(len(head) - wire.FrameOverhead + len(payload))
	d.traceFrame(t, EvTx, &hh, head, payload)
}
