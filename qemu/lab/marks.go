package lab

import "fmt"

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

// MarkFi prefixes each line fi_pingpong printed in a guest (its table,
// and the provider's FI_DIMMNET_STATS line), after it exited.
const MarkFi = "DIMMNET-FI"

// Where the lab's fi_pingpong guests find what the initramfs carries, and
// their addresses on the virtio-net link fi_pingpong's own socket uses.
const (
	FiPingpongPath = "usr/bin/fi_pingpong" // archive path of the host's fi_pingpong
	FiProviderDir  = "usr/lib/dimmnet-ofi" // holds libdimmnet-fi.so: FI_PROVIDER_PATH
	FiPort         = 47592                 // fi_pingpong's default control port
	fiSubnet       = "10.77.0.%d"          // guest i is .i+1
)

// FiGuestIP is guest i's address on the lab's control link.
func FiGuestIP(i int) string { return fmt.Sprintf(fiSubnet, i+1) }
