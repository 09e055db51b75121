package driver

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/dimmnet/dimmnet/uapi"
)

// Ring is one IPUSH receive ring (an AMT entry) as the driver manages it.
type Ring struct {
	d         *Driver
	idx       uint16
	entry     uint64 // offset of the AMT entry
	base      uint64
	size      uint64
	devHead   bool
	pending   uint64 // released by the consumer
	published uint64 // head the device has been told
}

// SetRing configures AMT entry idx as a ring of size bytes at link address
// base. With devHead the device advances the head when the driver posts
// READ_DONE (DIMMnet-2's mode); otherwise the driver stores the head itself.
func (d *Driver) SetRing(idx uint16, base, size uint64, devHead bool) (*Ring, error) {
	if uint64(idx) >= d.g.AMTEntries {
		return nil, fmt.Errorf("set ring %d: only %d AMT entries: %w", idx, d.g.AMTEntries, uapi.EBadAMT)
	}
	if base%uapi.RingAlign != 0 || size%uapi.RingAlign != 0 || size == 0 || base+size > d.g.LinkMemSize || size > 1<<32-1 {
		return nil, fmt.Errorf("set ring %d at %#x size %d: outside link memory or misaligned: %w", idx, base, size, uapi.EBadAMT)
	}
	e := d.g.AMTOff + uint64(idx)*uapi.AMTSize
	flags := uint64(uapi.AMTFlagValid)
	if devHead {
		flags |= uapi.AMTFlagDevHead
	}
	d.r.Store64At(e+uapi.AMTCfg, 0) // invalid while we rewrite it
	d.r.Store64At(e+uapi.AMTBase, base)
	d.r.Store64At(e+uapi.AMTHead, 0)
	d.r.Store64At(e+uapi.AMTTail, 0)
	d.r.Store64At(e+uapi.AMTCfg, size|flags<<32)
	r := &Ring{d: d, idx: idx, entry: e, base: base, size: size, devHead: devHead}
	d.rings = slices.DeleteFunc(d.rings, func(o *Ring) bool { return o.idx == idx })
	d.rings = append(d.rings, r)
	return r, nil
}

// Index is the ring's AMT index.
func (r *Ring) Index() uint16 { return r.idx }

// Tail is the device's write position.
func (r *Ring) Tail() uint64 { return r.d.r.Load64At(r.entry + uapi.AMTTail) }

// Head is the consumer's position.
func (r *Ring) Head() uint64 { return r.d.r.Load64At(r.entry + uapi.AMTHead) }

// Data returns the link memory an IPUSH status describes (a per-packet
// status, or a per-message one that was not interleaved), without copying.
// It is nil for a WRAPPED status (use Copy) or one outside the ring.
func (r *Ring) Data(s *uapi.Status) []byte {
	if s.Flags&uapi.StFlagWrapped != 0 || s.Addr < r.base || s.Addr+uint64(s.Length) > r.base+r.size {
		return nil
	}
	return r.d.lm[s.Addr : s.Addr+uint64(s.Length)]
}

// Copy copies the data an IPUSH status describes into dst, following a
// WRAPPED message across the ring's end, and returns the bytes copied.
func (r *Ring) Copy(dst []byte, s *uapi.Status) int {
	if s.Flags&uapi.StFlagWrapped == 0 {
		return copy(dst, r.Data(s))
	}
	first := uint64(s.Offset)
	if s.Addr < r.base || s.Addr+first > r.base+r.size || uint64(s.Length) < first || uint64(s.Length)-first > r.size {
		return 0
	}
	n := copy(dst, r.d.lm[s.Addr:s.Addr+first])
	return n + copy(dst[n:], r.d.lm[r.base:r.base+uint64(s.Length)-first])
}

// ReleaseTo frees the ring up to position pos (a status's End, or Tail()).
// In device-head mode it posts READ_DONE and the device moves the head;
// an error wrapping ErrNotRung means that READ_DONE is posted (the
// release stands, and is not posted again), only its doorbell failed.
func (r *Ring) ReleaseTo(pos uint64) error {
	r.pending = pos
	return r.publish()
}

// Release frees the ring up to pos lazily: the head is published once a
// quarter of the ring has been freed, when the driver is about to sleep,
// when a RING_FULL status arrives, or on Flush. Each publication is a store
// to the line the device reads for every packet (or a READ_DONE command), so
// a ring consumed message by message pays for it a quarter as often.
// Its errors are ReleaseTo's.
func (r *Ring) Release(pos uint64) error {
	r.pending = pos
	if pos-r.published < r.size/4 {
		return nil
	}
	return r.publish()
}

func (r *Ring) publish() error {
	if r.pending == r.published {
		return nil
	}
	if !r.devHead {
		r.d.r.Store64At(r.entry+uapi.AMTHead, r.pending)
		r.d.kickIfAsleep()
		r.published = r.pending
		return nil
	}
	_, err := r.d.Post(&uapi.Desc{Opcode: uapi.OpREADDONE, RemoteAddr: uint64(r.idx), Imm: r.pending})
	if Posted(err) {
		// A READ_DONE whose doorbell failed is posted all the same: the
		// device moves the head at its next look, and posting it again
		// would only repeat it. The error still says so.
		r.published = r.pending
	}
	return err
}

// MapSender points the AMT Address Table entry of sender GPID gpid at ring
// amt, so IPUSH from that sender lands there. Several senders may share a ring.
func (d *Driver) MapSender(gpid uint32, amt uint16) error {
	_, err := d.amtat(uapi.AMTATOpWrite, gpid, uapi.AMTATValid|uint64(amt))
	return err
}

// UnmapSender removes a sender's entry: its IPUSHes are then refused.
func (d *Driver) UnmapSender(gpid uint32) error {
	_, err := d.amtat(uapi.AMTATOpWrite, gpid, 0)
	return err
}

// Sender reads a sender's AMT Address Table entry: the ring and whether it is mapped.
func (d *Driver) Sender(gpid uint32) (amt uint16, ok bool, err error) {
	v, err := d.amtat(uapi.AMTATOpRead, gpid, 0)
	return uint16(v), v&uapi.AMTATValid != 0, err
}

// amtat runs one select/data/ctrl handshake with the device.
func (d *Driver) amtat(op uint64, gpid uint32, data uint64) (uint64, error) {
	d.amtatSeq++
	seq := d.amtatSeq
	d.r.Store64(uapi.RegAMTATSel, uint64(gpid))
	if op == uapi.AMTATOpWrite {
		d.r.Store64(uapi.RegAMTATData, data)
	}
	d.r.Store64(uapi.RegAMTATCtrl, seq<<8|op)
	d.kickIfAsleep()
	for i := 0; ; i++ {
		v := d.r.Load64(uapi.RegAMTATDone)
		if v>>8 == seq&(1<<56-1) {
			if v&0xff != uapi.AMTATResultOK {
				return 0, fmt.Errorf("AMT Address Table op %d on GPID %d: %w", op, gpid, ErrAMTAT)
			}
			return d.r.Load64(uapi.RegAMTATData), nil
		}
		if i%64 == 63 {
			runtime.Gosched()
		}
		if i%1024 == 1023 {
			if err := d.Alive(); err != nil {
				return 0, err
			}
			d.kickIfAsleep()
		}
	}
}
