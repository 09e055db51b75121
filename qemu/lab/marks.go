package lab

// Console protocol between a guest and `dimmnet lab`: one line each, so the
// host can parse a serial log that the kernel may interleave with its own.
const (
	MarkBooted   = "DIMMNET-BOOTED"   // seconds since the kernel started
	MarkResult   = "DIMMNET-RESULT"   // one JSON pingpong.Result
	MarkVerified = "DIMMNET-VERIFIED" // payloads checked byte for byte
	MarkDone     = "DIMMNET-DONE"     // "ok" or "error: ..."
	MarkAttach   = "DIMMNET-ATTACH"   // "vfio" or "sysfs (why not vfio)"
	MarkIRQs     = "DIMMNET-IRQS"     // wake-ups by the device's MSI-X interrupt
	MarkStorm    = "DIMMNET-STORM"    // "N times in D": a storming guest's Doorbell stores
	MarkDevice   = "DIMMNET-DEVICE"   // one JSON devinfo.Device: the guest's device as dimmnet devices lists it
)
