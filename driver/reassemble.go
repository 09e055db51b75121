package driver

import "github.com/dimmnet/dimmnet/uapi"

// Message is one IPUSH message put back together.
type Message struct {
	SrcNode uint16
	SrcProc uint32
	MsgID   uint32
	Imm     uint64
	Data    []byte
}

type msgKey struct {
	node  uint16
	proc  uint32
	msgID uint32
}

type partial struct {
	data []byte
	got  int
	size int // known once the last packet arrived
}

// Reassembler rebuilds messages from per-packet IPUSH statuses. The device
// never reassembles: packets of messages from senders sharing a ring arrive
// interleaved, and each per-packet status says whose message, where in it,
// and whether it is the last, which is all this needs.
type Reassembler struct {
	parts map[msgKey]*partial
}

// NewReassembler makes an empty reassembler.
func NewReassembler() *Reassembler { return &Reassembler{parts: map[msgKey]*partial{}} }

// Add copies the packet a per-packet status describes out of the ring
// (data, as Ring.Data returns it) and returns the message it completes, if
// any. The caller releases the ring space after Add returns.
func (ra *Reassembler) Add(s *uapi.Status, data []byte) (*Message, bool) {
	k := msgKey{s.SrcNode, s.SrcProc, s.MsgID}
	p := ra.parts[k]
	if p == nil {
		p = &partial{size: -1}
		ra.parts[k] = p
	}
	end := int(s.Offset) + len(data)
	if end > uapi.MaxXfer { // the device refuses such packets; never size a buffer by a bogus offset
		return nil, false
	}
	if end > len(p.data) {
		if end > cap(p.data) {
			n := make([]byte, end, max(end, 2*cap(p.data)))
			copy(n, p.data)
			p.data = n
		} else {
			p.data = p.data[:end]
		}
	}
	copy(p.data[s.Offset:], data)
	p.got += len(data)
	if s.Flags&uapi.StFlagLast != 0 {
		p.size = end
	}
	if p.size >= 0 && p.got >= p.size {
		delete(ra.parts, k)
		return &Message{SrcNode: s.SrcNode, SrcProc: s.SrcProc, MsgID: s.MsgID, Imm: s.Imm, Data: p.data[:p.size]}, true
	}
	return nil, false
}

// Pending is the number of messages partly received.
func (ra *Reassembler) Pending() int { return len(ra.parts) }
