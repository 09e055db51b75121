package uapi

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Region is a mapped device region (the bytes of the shared memory file).
// Every word the other side writes must be accessed through these atomic
// accessors; bulk data in link memory is copied with copy() after the
// publishing pointer has been loaded atomically.
type Region []byte

// CheckRegion validates a region's size and alignment before use.
func CheckRegion(b []byte) error {
	n := len(b)
	if n < MinRegionSize || n&(n-1) != 0 {
		return fmt.Errorf("region of %d bytes: must be a power of two of at least %d", n, MinRegionSize)
	}
	if uintptr(unsafe.Pointer(&b[0]))%64 != 0 {
		return fmt.Errorf("region not 64-byte aligned")
	}
	return nil
}

func (r Region) p64(off uint32) *uint64 {
	_ = r[off+7] // bounds check
	return (*uint64)(unsafe.Pointer(&r[off]))
}

// Load64 atomically loads the 64-bit word at off (8-byte aligned).
func (r Region) Load64(off uint32) uint64 { return atomic.LoadUint64(r.p64(off)) }

// Store64 atomically stores the 64-bit word at off.
func (r Region) Store64(off uint32, v uint64) { atomic.StoreUint64(r.p64(off), v) }

// Add64 atomically adds to the 64-bit word at off and returns the new value.
func (r Region) Add64(off uint32, d uint64) uint64 { return atomic.AddUint64(r.p64(off), d) }

// StoreOwn64 stores the word at off as its one writer: a release store
// (a plain MOV on amd64, see ownstore_tso.go), for a word only the
// caller's side writes and only one of its threads at a time (a device
// register its passes write, the serialization being theirs). Unlike
// Store64 it does not order a later load of another word: a hand-off that
// stores a word and then loads the other side's flag (the doorbell's
// DEV_SLEEP, the interrupt's DRV_WAIT) needs Store64.
func (r Region) StoreOwn64(off uint32, v uint64) { storeOwn64(r.p64(off), v) }

// AddOwn64 adds to the word at off as its one writer (StoreOwn64's terms):
// a counter only the device's passes count. It returns the new value.
// Readers load it atomically; a writer outside the device's passes uses
// Add64, and then on counters of its own only.
func (r Region) AddOwn64(off uint32, d uint64) uint64 { return addOwn64(r.p64(off), d) }

// Load64At and Store64At take a 64-bit offset for parts beyond 4 GiB offsets' type.
func (r Region) Load64At(off uint64) uint64 {
	_ = r[off+7]
	return atomic.LoadUint64((*uint64)(unsafe.Pointer(&r[off])))
}

// Store64At atomically stores the word at a 64-bit offset.
func (r Region) Store64At(off uint64, v uint64) {
	_ = r[off+7]
	atomic.StoreUint64((*uint64)(unsafe.Pointer(&r[off])), v)
}

// Load32At atomically loads the 32-bit word at off (4-byte aligned).
func (r Region) Load32At(off uint64) uint32 {
	_ = r[off+3]
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&r[off])))
}

// Store32At atomically stores the 32-bit word at off.
func (r Region) Store32At(off uint64, v uint32) {
	_ = r[off+3]
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&r[off])), v)
}

// Reg reads register off.
func (r Region) Reg(off uint32) uint64 { return r.Load64(off) }

// Counter reads counter c.
func (r Region) Counter(c Counter) uint64 { return r.Load64(c.Off()) }

// ReadWords8 atomically loads the 8 words of a 64-byte slot at off.
func (r Region) ReadWords8(off uint64) (w [8]uint64) {
	_ = r[off+63]
	p := (*[8]uint64)(unsafe.Pointer(&r[off]))
	for i := range w {
		w[i] = atomic.LoadUint64(&p[i])
	}
	return w
}

// WriteWords8 writes the 8 words of a 64-byte slot at off. The slot is not
// visible to the other side until the producer publishes it by storing the
// ring tail, so the words are written with plain stores.
func (r Region) WriteWords8(off uint64, w [8]uint64) {
	_ = r[off+63]
	p := (*[8]uint64)(unsafe.Pointer(&r[off]))
	*p = w
}

// ReadDesc loads the descriptor in command-queue slot at off.
func (r Region) ReadDesc(off uint64) Desc { return DescFromWords(r.ReadWords8(off)) }

// WriteDesc writes a descriptor into the command slot at off and publishes
// it for free-running index idx: words 0-6 with plain stores, then SEQ =
// idx+1 with an atomic store, which the device polls.
func (r Region) WriteDesc(off uint64, d *Desc, idx uint64) {
	atomic.StoreUint64(r.descBody(off, d), idx+1)
}

// descBody stores words 0-6 of d into the command slot at off with plain
// stores and returns its SEQ word, for the caller to publish.
func (r Region) descBody(off uint64, d *Desc) *uint64 {
	_ = r[off+63]
	p := (*[8]uint64)(unsafe.Pointer(&r[off]))
	w := d.Words()
	for i := 0; i < DescSeqOff/8; i++ {
		p[i] = w[i]
	}
	return &p[DescSeqOff/8]
}

// WriteDescOwn is WriteDesc publishing SEQ with a release store
// (StoreOwn64's terms) instead of a locked one: for a driver whose next
// step orders that store before any load of DEV_SLEEP itself (a driver
// that runs its device: the pass it starts takes the command or, when
// another thread holds the device, runs a locked instruction before it
// looks at DEV_SLEEP).
func (r Region) WriteDescOwn(off uint64, d *Desc, idx uint64) {
	storeOwn64(r.descBody(off, d), idx+1)
}

// ReadStatus loads the status entry in the slot at off.
func (r Region) ReadStatus(off uint64) Status { return StatusFromWords(r.ReadWords8(off)) }

// WriteStatus writes a status entry into the slot at off (publish with the tail).
func (r Region) WriteStatus(off uint64, s *Status) { r.WriteWords8(off, s.Words()) }

// Geometry is the layout a driver reads from the register page.
type Geometry struct {
	RegionSize   uint64
	CmdqOff      uint64
	CmdqEntries  uint64
	StatqOff     uint64
	StatqEntries uint64
	AMTOff       uint64
	AMTEntries   uint64
	AMTATEntries uint64
	LLCMOff      uint64
	LLCMSize     uint64
	ScratchOff   uint64
	ScratchSize  uint64
	LinkMemOff   uint64
	LinkMemSize  uint64
	PageSize     uint64
	MTU          uint64
	AMTATMirOff  uint64
	FrameTagOff  uint64
}

// ReadGeometry loads the geometry registers.
func (r Region) ReadGeometry() Geometry {
	return Geometry{
		RegionSize:   r.Load64(RegRegionSize),
		CmdqOff:      r.Load64(RegCmdqOff),
		CmdqEntries:  r.Load64(RegCmdqEntries),
		StatqOff:     r.Load64(RegStatqOff),
		StatqEntries: r.Load64(RegStatqEntries),
		AMTOff:       r.Load64(RegAMTOff),
		AMTEntries:   r.Load64(RegAMTEntries),
		AMTATEntries: r.Load64(RegAMTATEntries),
		LLCMOff:      r.Load64(RegLLCMOff),
		LLCMSize:     r.Load64(RegLLCMSize),
		ScratchOff:   r.Load64(RegScratchOff),
		ScratchSize:  r.Load64(RegScratchSize),
		LinkMemOff:   r.Load64(RegLinkMemOff),
		LinkMemSize:  r.Load64(RegLinkMemSize),
		PageSize:     r.Load64(RegPageSizeReg),
		MTU:          r.Load64(RegMTU),
		AMTATMirOff:  r.Load64(RegAMTATMirOff),
		FrameTagOff:  r.Load64(RegFrameTagOff),
	}
}

// Frames is the number of link page frames (LMMC).
func (g Geometry) Frames() uint64 {
	if g.PageSize == 0 {
		return 0
	}
	return g.LinkMemSize / g.PageSize
}

// Validate checks that every part lies inside a region of n bytes and that
// ring sizes are powers of two, so a driver never trusts a corrupt page.
func (g Geometry) Validate(n uint64) error {
	in := func(name string, off, size uint64) error {
		if off > n || size > n-off {
			return fmt.Errorf("geometry: %s [%#x,+%#x) outside region of %#x bytes", name, off, size, n)
		}
		return nil
	}
	if g.RegionSize != n {
		return fmt.Errorf("geometry: REGION_SIZE %d but mapped %d bytes", g.RegionSize, n)
	}
	for _, p := range []struct {
		name      string
		off, size uint64
	}{
		{"command queue", g.CmdqOff, g.CmdqEntries * DescSize},
		{"status ring", g.StatqOff, g.StatqEntries * StatusSize},
		{"AMT", g.AMTOff, g.AMTEntries * AMTSize},
		{"LLCM", g.LLCMOff, g.LLCMSize},
		{"scratch", g.ScratchOff, g.ScratchSize},
		{"link memory", g.LinkMemOff, g.LinkMemSize},
		{"AMT Address Table mirror", g.AMTATMirOff, g.AMTATEntries * 4},
		{"frame tag table", g.FrameTagOff, g.Frames() * 4},
	} {
		if err := in(p.name, p.off, p.size); err != nil {
			return err
		}
		if p.off%64 != 0 {
			return fmt.Errorf("geometry: %s offset %#x not 64-byte aligned", p.name, p.off)
		}
	}
	for _, q := range []struct {
		name string
		n    uint64
	}{{"CMDQ_ENTRIES", g.CmdqEntries}, {"STATQ_ENTRIES", g.StatqEntries}} {
		if q.n == 0 || q.n&(q.n-1) != 0 {
			return fmt.Errorf("geometry: %s %d not a power of two", q.name, q.n)
		}
	}
	if g.MTU < 64 {
		return fmt.Errorf("geometry: MTU %d too small", g.MTU)
	}
	return nil
}
