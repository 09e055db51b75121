package acp

import "unsafe"

// Area is one part of a rank's link memory.
type Area struct{ Addr, Size uint64 }

// Areas is where Init puts the layer's parts in link memory; user memory
// (Malloc) starts at Heap.
type Areas struct {
	Ring    Area // the delegation ring every sender shares
	Out     Area // outgoing message slots
	Resolve Area // landing slots of registration table reads
	Bounce  Area // staging of misaligned copies
	Table   Area // the registration table peers read
	Starter Area // the starter memory
	Heap    uint64
}

// layoutFor is the one computation of the layout: Init places the areas
// by it and MemoryUse reports it.
func layoutFor(o Options, sp Split) Areas {
	next := uint64(0)
	place := func(n uint64) Area { a := next; next = alignUp(next+n, 64); return Area{a, n} }
	var a Areas
	a.Ring = place(uint64(o.RingBytes))
	a.Out = place(outSlots * msgSize)
	a.Resolve = place(resolveSlots * tableEntry)
	a.Bounce = place(uint64(o.Bounce))
	a.Table = place(uint64(1<<sp.SegBits) * tableEntry)
	a.Starter = place(uint64(o.StarterSize))
	a.Heap = next
	return a
}

// MemoryRow is one use of memory by a rank.
type MemoryRow struct {
	Use string
	// Bytes for procs ranks and no registrations; PerRank and
	// PerRegistration say how it grows.
	Bytes, PerRank, PerRegistration uint64
	// Link is true for link memory (the device reaches it), false for the
	// process's own memory.
	Link bool
}

// MemoryUse is what one rank of procs allocates with options o (zero
// fields: the defaults) on a device with linkMem bytes of link memory:
// the same layout Init places, and the sizes of the Go structures the
// communication goroutine keeps. The starter memory is the user's and is
// left out, as the paper's tables leave it out.
func MemoryUse(procs int, o Options, linkMem uint64) ([]MemoryRow, error) {
	o.StarterSize = defaultInt(o.StarterSize, DefaultStarterSize)
	o.RingBytes = defaultInt(o.RingBytes, DefaultRingBytes)
	o.Bounce = defaultInt(o.Bounce, DefaultBounce)
	sp, err := NewSplit(procs, 1, linkMem)
	if err != nil {
		return nil, err
	}
	a := layoutFor(o, sp)
	p := uint64(procs)
	return []MemoryRow{
		{Use: "command queue (caller to communication goroutine)", Bytes: QueueEntries * uint64(unsafe.Sizeof(cmd{})+1)},
		{Use: "delegation ring, shared by every sender (IPUSH)", Bytes: a.Ring.Size, Link: true},
		{Use: "outgoing delegation message slots", Bytes: a.Out.Size, Link: true},
		{Use: "registration table read by peers", Bytes: a.Table.Size, Link: true},
		{Use: "registration table, the owner's copy", Bytes: uint64(1<<sp.SegBits) * uint64(unsafe.Sizeof(segment{}))},
		{Use: "peers' segments learned (per segment used, not per rank)", PerRegistration: uint64(unsafe.Sizeof(segEnt{})) + 8},
		{Use: "table read landing slots", Bytes: a.Resolve.Size, Link: true},
		{Use: "bounce buffer (misaligned copies)", Bytes: a.Bounce.Size, Link: true},
		{Use: "rank to node table", Bytes: 2 * p, PerRank: 2},
	}, nil
}
