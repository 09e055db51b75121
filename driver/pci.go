package driver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/uapi"
	"golang.org/x/sys/unix"
)

// PCI identity of QEMU's ivshmem devices (plain and doorbell alike: the
// subsystem ids are QEMU's defaults and identify nothing).
const (
	PCIVendor = "0x1af4"
	PCIDevice = "0x1110"
)

// ivshmem BAR0 registers (QEMU hw/misc/ivshmem.c).
const (
	ivPosition = 8
	ivDoorbell = 12
)

// ErrNoPCIDevice reports that no dimmnet device is on the guest's PCI bus.
var ErrNoPCIDevice = errors.New("driver: no dimmnet device (1af4:1110 with the register-page magic) on the PCI bus")

// pciTransport is a guest's view of the device through sysfs, the fallback
// when VFIO is unavailable (VFIOFunction): BAR2 is the region, BAR0 holds
// the Doorbell register. Without vfio-pci no kernel driver enables MSI-X
// for userspace, so waiting is polling.
type pciTransport struct {
	bdf  string
	mem  []byte
	regs []byte
	spin bool // never sleep while waiting (dimmnet.spin=1 on a lab guest's command line)
}

// PCISysfs is where the guest's PCI devices are listed; tests point it elsewhere.
var PCISysfs = "/sys/bus/pci/devices"

// ivshmemDevices lists the bus addresses of every 1af4:1110 device.
func ivshmemDevices() ([]string, error) {
	ents, err := os.ReadDir(PCISysfs)
	if err != nil {
		return nil, fmt.Errorf("list PCI devices: %w", err)
	}
	var bdfs []string
	for _, e := range ents {
		v, _ := os.ReadFile(filepath.Join(PCISysfs, e.Name(), "vendor"))
		d, _ := os.ReadFile(filepath.Join(PCISysfs, e.Name(), "device"))
		if strings.TrimSpace(string(v)) == PCIVendor && strings.TrimSpace(string(d)) == PCIDevice {
			bdfs = append(bdfs, e.Name())
		}
	}
	return bdfs, nil
}

func mapResource(bdf string, n int, size int) ([]byte, error) {
	p := filepath.Join(PCISysfs, bdf, fmt.Sprintf("resource%d", n))
	f, err := os.OpenFile(p, os.O_RDWR|os.O_SYNC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	defer f.Close()
	if size == 0 {
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("stat %s: %w", p, err)
		}
		size = int(st.Size())
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s (%d bytes): %w", p, size, err)
	}
	return mem, nil
}

// FindPCI returns the bus addresses of the dimmnet devices on the PCI bus:
// ivshmem doorbell devices whose BAR2 starts with the register-page magic.
// A function already bound to vfio-pci is probed through VFIO, since its
// sysfs resource files may no longer be mapped.
func FindPCI() ([]string, error) {
	bdfs, err := ivshmemDevices()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bdfs {
		if BoundToVFIO(b) {
			if probeVFIO(b) {
				out = append(out, b)
			}
		} else if sysfsMagic(b) == 1 && doorbellCapable(b) {
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, ErrNoPCIDevice
	}
	return out, nil
}

// FindPlainPCI returns the ivshmem-plain functions: shared regions with no
// doorbell and no dimmnet device (the lab's raw word baseline).
func FindPlainPCI() ([]string, error) {
	return findOther(false)
}

// FindDoorbellPCI returns the ivshmem doorbell functions that are not
// dimmnet devices: a device-less ivshmem server's peers (the lab's raw
// interrupt baseline).
func FindDoorbellPCI() ([]string, error) {
	return findOther(true)
}

// findOther lists the ivshmem functions without the dimmnet magic that
// have (doorbell) or lack an MSI-X BAR. An ivshmem-doorbell function has
// its MSI-X table in BAR1, ivshmem-plain has no BAR1 and no interrupts:
// that, not PCI order or sizes, tells them apart.
func findOther(doorbell bool) ([]string, error) {
	bdfs, err := ivshmemDevices()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, b := range bdfs {
		_, err := os.Stat(filepath.Join(PCISysfs, b, "resource1"))
		if (err == nil) != doorbell {
			continue
		}
		// A function bound to vfio-pci is skipped: its group may be open
		// (by this process) and its sysfs resources refused. Find the
		// functions before binding them.
		if !BoundToVFIO(b) && sysfsMagic(b) == 0 {
			out = append(out, b)
		}
	}
	return out, nil
}

// sysfsMagic maps the first page of BAR2 through sysfs: 1 if it starts
// with the dimmnet register-page magic, 0 if not, -1 if it cannot be mapped.
func sysfsMagic(bdf string) int {
	mem, err := mapResource(bdf, 2, os.Getpagesize())
	if err != nil {
		return -1
	}
	defer unix.Munmap(mem)
	if uapi.Region(mem).Load64(uapi.RegMagic) == uapi.Magic {
		return 1
	}
	return 0
}

// doorbellCapable reports whether the ivshmem device at bdf is a doorbell
// device (IVPosition 1 or more: the daemon is peer 0); a region attached as
// ivshmem-plain would take our doorbell nowhere.
func doorbellCapable(bdf string) bool {
	regs, err := mapResource(bdf, 0, os.Getpagesize())
	if err != nil {
		return false
	}
	defer unix.Munmap(regs)
	return atomic.LoadUint32((*uint32)(unsafe.Pointer(&regs[ivPosition]))) >= 1
}

// MapPCIRegion maps the whole BAR2 of the ivshmem device at bdf.
func MapPCIRegion(bdf string) ([]byte, error) { return mapResource(bdf, 2, 0) }

// AttachPCI attaches a guest's driver to the dimmnet device at bdf (""
// for the first one found): BAR2 is mapped as the region and BAR0 for the
// Doorbell register. Above this step the driver is the same code.
//
// A function bound to vfio-pci (BindVFIO) is attached through VFIO
// (AttachVFIO): its sysfs resources belong to vfio-pci then.
func AttachPCI(bdf string) (Attachment, error) {
	if bdf == "" {
		l, err := FindPCI()
		if err != nil {
			return nil, err
		}
		bdf = l[0]
	}
	if BoundToVFIO(bdf) {
		return AttachVFIO(bdf)
	}
	mem, err := mapResource(bdf, 2, 0)
	if err != nil {
		return nil, fmt.Errorf("attach %s: %w", bdf, err)
	}
	regs, err := mapResource(bdf, 0, os.Getpagesize())
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("attach %s: %w", bdf, err)
	}
	return &pciTransport{bdf: bdf, mem: mem, regs: regs, spin: os.Getenv("DIMMNET_GUEST_SPIN") == "1"}, nil
}

func (t *pciTransport) reg32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&t.regs[off])) }

// IVPosition is this guest's peer id on the ivshmem server (1 or more for a
// doorbell device; the device itself is peer 0).
func (t *pciTransport) IVPosition() uint32 { return atomic.LoadUint32(t.reg32(ivPosition)) }

func (t *pciTransport) Region() []byte { return t.mem }

// Kick stores 0<<16 | vector 0 into the Doorbell register: QEMU writes the
// eventfd of peer 0, the device's doorbell.
func (t *pciTransport) Kick() error {
	const peer, vector = 0, 0
	atomic.StoreUint32(t.reg32(ivDoorbell), uint32(peer)<<16|uint32(vector))
	return nil
}

// WaitIRQ has no interrupt to wait for in a guest's userspace: it pauses
// briefly and lets the driver poll again (Alive catches a dead daemon).
func (t *pciTransport) WaitIRQ(timeoutMs int) error {
	if t.spin {
		runtime.Gosched() // keep polling: a timer sleep under TCG costs about a millisecond
		return nil
	}
	time.Sleep(min(time.Duration(timeoutMs)*time.Millisecond, 200*time.Microsecond))
	return nil
}

func (t *pciTransport) Close() error {
	return errors.Join(unix.Munmap(t.mem), unix.Munmap(t.regs))
}

// IVPosition returns the guest's ivshmem peer id if t is a PCI attach
// (sysfs or VFIO).
func IVPosition(t Attachment) (uint32, bool) {
	switch p := t.(type) {
	case *pciTransport:
		return p.IVPosition(), true
	case *VFIOFunction:
		return p.IVPosition(), true
	}
	return 0, false
}
