package uapi

// AMTSize is the size of one AMT (Address Management Table) entry.
const AMTSize = 32

// AMT entry word offsets inside an entry.
const (
	AMTBase        = 0      // link address of the ring (8-byte aligned)
	AMTCfg         = 8      // size (low 32 bits) | flags<<32
	AMTHead        = 16     // free-running byte position the consumer has freed up to
	AMTTail        = 24     // free-running byte position the device has written up to
	AMTFlagValid   = 1 << 0 // the entry describes a ring
	AMTFlagDevHead = 1 << 1 // the device advances the head on READ_DONE (DIMMnet-2); the driver must not write HEAD
)

// AMTFields documents the AMT entry for the datasheet.
var AMTFields = []Field{
	{AMTBase, 8, "BASE", "link address of the ring (8-byte aligned, inside link memory)"},
	{AMTCfg, 4, "SIZE", "ring bytes (a multiple of 8, not necessarily a power of two; at least one MTU, up to MaxXfer); written with FLAGS as one 64-bit word, last"},
	{AMTCfg + 4, 4, "FLAGS", "VALID (1), DEV_HEAD (2)"},
	{AMTHead, 8, "HEAD", "free-running byte position freed by the consumer (the driver stores it; in DEV_HEAD mode the device, on READ_DONE); start 0"},
	{AMTTail, 8, "TAIL", "free-running byte position written by the device; start 0. Position p is the byte at link address BASE + p mod SIZE; TAIL - HEAD bytes are in use"},
}

// RingAlign is the granule of ring placement: every packet starts on it.
const RingAlign = 8
