package driver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"github.com/dimmnet/dimmnet/uapi"
	"golang.org/x/sys/unix"
)

// Why VFIO: a guest that maps its BARs through sysfs gets no interrupts (no
// kernel driver enables MSI-X for it), so its driver can only poll or nap.
// vfio-pci hands the whole function to userspace instead, MSI-X included:
// each vector becomes an eventfd the driver blocks on, so a waiting guest
// halts its vCPU and its QEMU thread sleeps, as DPDK and SPDK drivers do.
//
// The steps (Documentation/driver-api/vfio.rst) are BindVFIO once, as root,
// then AttachVFIO: container, group, device, regions, interrupts.

// Errors naming what a guest lacks for VFIO; the caller falls back to the
// sysfs attach and says which.
var (
	// ErrNoIOMMU: the function has no iommu_group (QEMU without
	// -device intel-iommu, or a kernel without intel_iommu=on).
	ErrNoIOMMU = errors.New("driver: no IOMMU group for the device (QEMU needs -device intel-iommu,intremap=on and the kernel intel_iommu=on)")
	// ErrNoVFIO: vfio-pci is not loaded, or /dev/vfio is missing.
	ErrNoVFIO = errors.New("driver: VFIO not available (the vfio, vfio_iommu_type1 and vfio-pci modules are not loaded)")
)

// VFIODev is where the VFIO character devices live; tests point it elsewhere.
var VFIODev = "/dev/vfio"

const vfioPCIDriver = "vfio-pci"

// pciDriver returns the name of the driver bound to the function at bdf,
// "" for none.
func pciDriver(bdf string) string {
	l, err := os.Readlink(filepath.Join(PCISysfs, bdf, "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(l)
}

// BoundToVFIO reports whether the function at bdf belongs to vfio-pci.
func BoundToVFIO(bdf string) bool { return pciDriver(bdf) == vfioPCIDriver }

// iommuGroup returns the name of the function's IOMMU group, which is also
// its VFIO group's file name in /dev/vfio.
func iommuGroup(bdf string) (string, error) {
	l, err := os.Readlink(filepath.Join(PCISysfs, bdf, "iommu_group"))
	if err != nil {
		return "", ErrNoIOMMU
	}
	return filepath.Base(l), nil
}

// BindVFIO hands the function at bdf to vfio-pci: its driver_override
// names vfio-pci, any other driver lets go of it, and drivers_probe binds
// it. Probe the function (FindPCI) first: once vfio-pci owns the BARs,
// their sysfs resource files may no longer be mapped (CONFIG_IO_STRICT_DEVMEM).
func BindVFIO(bdf string) error {
	if BoundToVFIO(bdf) {
		return nil
	}
	if _, err := iommuGroup(bdf); err != nil {
		return fmt.Errorf("bind %s to vfio-pci: %w", bdf, err)
	}
	bus := filepath.Dir(PCISysfs) // /sys/bus/pci
	if _, err := os.Stat(filepath.Join(bus, "drivers", vfioPCIDriver)); err != nil {
		return fmt.Errorf("bind %s to vfio-pci: no %s driver: %w", bdf, vfioPCIDriver, ErrNoVFIO)
	}
	dev := filepath.Join(PCISysfs, bdf)
	if err := os.WriteFile(filepath.Join(dev, "driver_override"), []byte(vfioPCIDriver), 0); err != nil {
		return fmt.Errorf("bind %s to vfio-pci: %w", bdf, err)
	}
	if cur := pciDriver(bdf); cur != "" {
		if err := os.WriteFile(filepath.Join(dev, "driver", "unbind"), []byte(bdf), 0); err != nil {
			return fmt.Errorf("bind %s to vfio-pci: unbind from %s: %w", bdf, cur, err)
		}
	}
	if err := os.WriteFile(filepath.Join(bus, "drivers_probe"), []byte(bdf), 0); err != nil {
		return fmt.Errorf("bind %s to vfio-pci: %w", bdf, err)
	}
	if !BoundToVFIO(bdf) {
		return fmt.Errorf("bind %s to vfio-pci: still bound to %q after drivers_probe: %w", bdf, pciDriver(bdf), ErrNoVFIO)
	}
	return nil
}

// vfioDevice is an open VFIO device: its container, group and device fds
// and where its regions are in the device fd.
type vfioDevice struct {
	bdf                      string
	container, group, device int
	bar0, bar2, config       vfioRegionInfo
}

// openVFIO opens the function at bdf, bound to vfio-pci, the way
// vfio.rst's example does: a container with the type1 IOMMU, the group
// set into it, the device fd from the group.
func openVFIO(bdf string) (_ *vfioDevice, err error) {
	v := &vfioDevice{bdf: bdf, container: -1, group: -1, device: -1}
	defer func() {
		if err != nil {
			v.close()
			err = fmt.Errorf("vfio %s: %w", bdf, err)
		}
	}()
	grp, err := iommuGroup(bdf)
	if err != nil {
		return nil, err
	}
	if v.container, err = unix.Open(filepath.Join(VFIODev, "vfio"), unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open container %s: %w (%w)", filepath.Join(VFIODev, "vfio"), err, ErrNoVFIO)
	}
	if ver, err := ioctlInt(v.container, vfioGetAPIVersion, 0); err != nil || ver != vfioAPIVersion {
		return nil, fmt.Errorf("VFIO API version %d (want %d): %v", ver, vfioAPIVersion, err)
	}
	if ok, err := ioctlInt(v.container, vfioCheckExtension, vfioType1IOMMU); err != nil || ok != 1 {
		return nil, fmt.Errorf("no type1 IOMMU (%v): %w", err, ErrNoVFIO)
	}
	gpath := filepath.Join(VFIODev, grp)
	if v.group, err = unix.Open(gpath, unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		return nil, fmt.Errorf("open group %s: %w", gpath, err)
	}
	st := vfioGroupStatus{Argsz: uint32(unsafe.Sizeof(vfioGroupStatus{}))}
	if err := ioctlPtr(v.group, vfioGroupGetStatus, unsafe.Pointer(&st)); err != nil {
		return nil, fmt.Errorf("group %s status: %w", grp, err)
	}
	if st.Flags&vfioGroupFlagsViable == 0 {
		return nil, fmt.Errorf("group %s not viable: another device in it is bound to a host driver", grp)
	}
	if err := ioctlPtr(v.group, vfioGroupSetContainer, unsafe.Pointer(&v.container)); err != nil {
		return nil, fmt.Errorf("group %s into container: %w", grp, err)
	}
	if _, err := ioctlInt(v.container, vfioSetIOMMU, vfioType1IOMMU); err != nil {
		return nil, fmt.Errorf("set type1 IOMMU: %w (without interrupt remapping vfio_iommu_type1 wants allow_unsafe_interrupts=1)", err)
	}
	name, err := unix.BytePtrFromString(bdf)
	if err != nil {
		return nil, err
	}
	if v.device, err = ioctlInt(v.group, vfioGroupGetDeviceFD, uintptr(unsafe.Pointer(name))); err != nil {
		return nil, fmt.Errorf("device fd: %w", err)
	}
	runtime.KeepAlive(name)
	for _, r := range []struct {
		idx  uint32
		info *vfioRegionInfo
	}{{vfioPCIBAR0Region, &v.bar0}, {vfioPCIBAR2Region, &v.bar2}, {vfioPCIConfigRegion, &v.config}} {
		*r.info = vfioRegionInfo{Argsz: uint32(unsafe.Sizeof(vfioRegionInfo{})), Index: r.idx}
		if err := ioctlPtr(v.device, vfioDeviceGetRegionInf, unsafe.Pointer(r.info)); err != nil {
			return nil, fmt.Errorf("region %d info: %w", r.idx, err)
		}
		if r.info.Flags&(vfioRegionInfoFlagRead|vfioRegionInfoFlagWrite) != vfioRegionInfoFlagRead|vfioRegionInfoFlagWrite {
			return nil, fmt.Errorf("region %d not readable and writable (flags %#x)", r.idx, r.info.Flags)
		}
	}
	if v.bar0.Size < ivDoorbell+4 {
		return nil, fmt.Errorf("BAR0 of %d bytes has no Doorbell register", v.bar0.Size)
	}
	return v, nil
}

func (v *vfioDevice) close() error {
	var errs []error
	for _, fd := range []int{v.device, v.group, v.container} {
		if fd >= 0 {
			errs = append(errs, unix.Close(fd))
		}
	}
	v.device, v.group, v.container = -1, -1, -1
	return errors.Join(errs...)
}

// read32 and write32 reach a register through the device fd: pread and
// pwrite at the region's offset are vfio-pci's way to BARs it cannot
// mmap, such as ivshmem's 256-byte BAR0 (mmap needs whole pages).
func (v *vfioDevice) read32(r vfioRegionInfo, off uint64) (uint32, error) {
	var b [4]byte
	if n, err := unix.Pread(v.device, b[:], int64(r.Offset+off)); err != nil || n != 4 {
		return 0, fmt.Errorf("read region %d at %#x: %d bytes, %v", r.Index, off, n, err)
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func (v *vfioDevice) write32(r vfioRegionInfo, off uint64, val uint32) error {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], val)
	if n, err := unix.Pwrite(v.device, b[:], int64(r.Offset+off)); err != nil || n != 4 {
		return fmt.Errorf("write region %d at %#x: %d bytes, %v", r.Index, off, n, err)
	}
	return nil
}

// read64 reads a 64-bit word of a region through the device fd (the
// register page's magic, before anything is mapped).
func (v *vfioDevice) read64(r vfioRegionInfo, off uint64) (uint64, error) {
	lo, err := v.read32(r, off)
	if err != nil {
		return 0, err
	}
	hi, err := v.read32(r, off+4)
	return uint64(hi)<<32 | uint64(lo), err
}

// setBusMaster turns on bus mastering in the Command register: MSI-X
// messages are memory writes by the device, which QEMU drops otherwise.
func (v *vfioDevice) setBusMaster() error {
	var b [2]byte
	off := int64(v.config.Offset + pciCommand)
	if _, err := unix.Pread(v.device, b[:], off); err != nil {
		return fmt.Errorf("read PCI command: %w", err)
	}
	cmd := binary.LittleEndian.Uint16(b[:])
	if cmd&pciCommandMaster != 0 {
		return nil
	}
	binary.LittleEndian.PutUint16(b[:], cmd|pciCommandMaster)
	if _, err := unix.Pwrite(v.device, b[:], off); err != nil {
		return fmt.Errorf("write PCI command: %w", err)
	}
	return nil
}

// setMSIX points MSI-X vector 0 at fd, or disables the vectors (fd < 0).
func (v *vfioDevice) setMSIX(fd int) error {
	s := vfioIRQSet1{Argsz: uint32(unsafe.Sizeof(vfioIRQSet1{})), Index: vfioPCIMSIXIRQ, Count: 1, FD: int32(fd),
		Flags: vfioIRQSetDataEventfd | vfioIRQSetActionTrigger}
	if fd < 0 {
		s = vfioIRQSet1{Argsz: 20, Index: vfioPCIMSIXIRQ, Flags: vfioIRQSetDataNone | vfioIRQSetActionTrigger}
	}
	if err := ioctlPtr(v.device, vfioDeviceSetIRQs, unsafe.Pointer(&s)); err != nil {
		return fmt.Errorf("VFIO_DEVICE_SET_IRQS MSI-X: %w", err)
	}
	return nil
}

// probeVFIO reports whether the function at bdf, bound to vfio-pci, is a
// dimmnet device (the register-page magic in BAR2 and an IVPosition of 1
// or more), reading through the device fd without mapping anything.
func probeVFIO(bdf string) bool {
	v, err := openVFIO(bdf)
	if err != nil {
		return false
	}
	defer v.close()
	magic, err := v.read64(v.bar2, uapi.RegMagic)
	if err != nil || magic != uapi.Magic {
		return false
	}
	pos, err := v.read32(v.bar0, ivPosition)
	return err == nil && pos >= 1
}

// VFIOFunction is an ivshmem function driven through VFIO: BAR2 mapped
// through the device fd, BAR0 by pread/pwrite, MSI-X vector 0 an eventfd.
// As a dimmnet device it is a driver's Attachment (AttachVFIO); any ivshmem
// doorbell function can be opened as one (OpenVFIO) to ring peers and
// wait for their interrupts, as the lab's raw interrupt baseline does.
type VFIOFunction struct {
	v    *vfioDevice
	mem  []byte
	irq  *eventfd.FD
	irqs atomic.Uint64 // wake-ups by the interrupt
	spin bool
}

// AttachVFIO attaches a guest's driver to the dimmnet device at bdf, bound
// to vfio-pci (BindVFIO): the region is BAR2 mapped through the device fd,
// the Doorbell a pwrite to BAR0, and WaitIRQ blocks on MSI-X vector 0.
func AttachVFIO(bdf string) (Attachment, error) {
	f, err := OpenVFIO(bdf)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// OpenVFIO opens the ivshmem doorbell function at bdf, bound to vfio-pci,
// whatever its BAR2 holds.
func OpenVFIO(bdf string) (_ *VFIOFunction, err error) {
	v, err := openVFIO(bdf)
	if err != nil {
		return nil, fmt.Errorf("attach: %w", err)
	}
	t := &VFIOFunction{v: v, spin: os.Getenv("DIMMNET_GUEST_SPIN") == "1"}
	defer func() {
		if err != nil {
			t.Close()
			err = fmt.Errorf("attach vfio %s: %w", bdf, err)
		}
	}()
	if v.bar2.Flags&vfioRegionInfoFlagMmap == 0 {
		return nil, fmt.Errorf("BAR2 cannot be mmapped (flags %#x)", v.bar2.Flags)
	}
	if t.mem, err = unix.Mmap(v.device, int64(v.bar2.Offset), int(v.bar2.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, fmt.Errorf("mmap BAR2 (%d bytes): %w", v.bar2.Size, err)
	}
	info := vfioIRQInfo{Argsz: uint32(unsafe.Sizeof(vfioIRQInfo{})), Index: vfioPCIMSIXIRQ}
	if err := ioctlPtr(v.device, vfioDeviceGetIRQInfo, unsafe.Pointer(&info)); err != nil {
		return nil, fmt.Errorf("MSI-X info: %w", err)
	}
	if info.Count < 1 || info.Flags&vfioIRQInfoEventfd == 0 {
		return nil, fmt.Errorf("no MSI-X vector with an eventfd (count %d, flags %#x): start QEMU's ivshmem-doorbell with vectors=1", info.Count, info.Flags)
	}
	if err := v.setBusMaster(); err != nil {
		return nil, err
	}
	if t.irq, err = eventfd.New(); err != nil {
		return nil, err
	}
	if err := v.setMSIX(t.irq.Int()); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *VFIOFunction) Region() []byte { return t.mem }

// Kick writes 0<<16 | vector 0 to the Doorbell register: QEMU writes the
// eventfd of peer 0, the device's doorbell.
func (t *VFIOFunction) Kick() error {
	const peer, vector = 0, 0
	return t.v.write32(t.v.bar0, ivDoorbell, peer<<16|vector)
}

// Ring writes peer<<16 | vector 0 to the Doorbell register: QEMU writes
// that ivshmem peer's eventfd for vector 0, which is an MSI-X interrupt in
// the peer's guest.
func (t *VFIOFunction) Ring(peer uint16) error {
	return t.v.write32(t.v.bar0, ivDoorbell, uint32(peer)<<16)
}

// WaitInterrupt blocks until MSI-X vector 0 fires or timeout passes (<= 0:
// no limit) and reports whether it fired.
func (t *VFIOFunction) WaitInterrupt(timeout time.Duration) (bool, error) {
	ok, err := t.irq.Wait(timeout)
	if ok {
		t.irqs.Add(1)
	}
	return ok, err
}

// WaitIRQ blocks on MSI-X vector 0 until the device interrupts (it does
// while the driver's DRV_WAIT is set) or timeoutMs passes; the vCPU halts
// meanwhile. With DIMMNET_GUEST_SPIN=1 it returns at once, to poll on.
func (t *VFIOFunction) WaitIRQ(timeoutMs int) error {
	if t.spin {
		runtime.Gosched()
		return nil
	}
	_, err := t.WaitInterrupt(time.Duration(timeoutMs) * time.Millisecond)
	return err
}

// IVPosition is this guest's peer id on the ivshmem server, read from BAR0.
func (t *VFIOFunction) IVPosition() uint32 {
	p, _ := t.v.read32(t.v.bar0, ivPosition)
	return p
}

// Close disables the interrupt and releases the mapping and every fd.
func (t *VFIOFunction) Close() error {
	var errs []error
	if t.irq != nil {
		errs = append(errs, t.v.setMSIX(-1), t.irq.Close())
	}
	if t.mem != nil {
		errs = append(errs, unix.Munmap(t.mem))
	}
	errs = append(errs, t.v.close())
	return errors.Join(errs...)
}

// Interrupts returns how many times a VFIO transport's driver was woken by
// the device's interrupt, and whether t is one.
func Interrupts(t Attachment) (uint64, bool) {
	v, ok := t.(*VFIOFunction)
	if !ok {
		return 0, false
	}
	return v.irqs.Load(), true
}

// AttachKind names how t reaches the device: "vfio", "sysfs", or another
// attach's name.
func AttachKind(t Attachment) string {
	switch t.(type) {
	case *VFIOFunction:
		return "vfio"
	case *pciTransport:
		return "sysfs"
	case *hostTransport:
		return "ivshmem"
	case *localTransport:
		return "local"
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", t), "*driver.")
}
