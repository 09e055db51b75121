package driver

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// The VFIO user API, from include/uapi/linux/vfio.h (Linux 6.1, the lab
// kernel's). golang.org/x/sys/unix does not carry it. Every ioctl is
// _IO(VFIO_TYPE, VFIO_BASE + n) with VFIO_TYPE ';' (0x3b) and VFIO_BASE 100:
// no size or direction bits, the argument's argsz says how big it is.
const (
	vfioAPIVersion = 0 // VFIO_API_VERSION
	vfioType1IOMMU = 1 // VFIO_TYPE1_IOMMU

	vfioGetAPIVersion      = 0x3b64 // VFIO_GET_API_VERSION
	vfioCheckExtension     = 0x3b65 // VFIO_CHECK_EXTENSION
	vfioSetIOMMU           = 0x3b66 // VFIO_SET_IOMMU
	vfioGroupGetStatus     = 0x3b67 // VFIO_GROUP_GET_STATUS
	vfioGroupSetContainer  = 0x3b68 // VFIO_GROUP_SET_CONTAINER
	vfioGroupGetDeviceFD   = 0x3b6a // VFIO_GROUP_GET_DEVICE_FD
	vfioDeviceGetRegionInf = 0x3b6c // VFIO_DEVICE_GET_REGION_INFO
	vfioDeviceGetIRQInfo   = 0x3b6d // VFIO_DEVICE_GET_IRQ_INFO
	vfioDeviceSetIRQs      = 0x3b6e // VFIO_DEVICE_SET_IRQS

	vfioGroupFlagsViable = 1 << 0 // VFIO_GROUP_FLAGS_VIABLE

	vfioRegionInfoFlagRead  = 1 << 0 // VFIO_REGION_INFO_FLAG_READ
	vfioRegionInfoFlagWrite = 1 << 1 // VFIO_REGION_INFO_FLAG_WRITE
	vfioRegionInfoFlagMmap  = 1 << 2 // VFIO_REGION_INFO_FLAG_MMAP

	vfioIRQInfoEventfd = 1 << 0 // VFIO_IRQ_INFO_EVENTFD

	vfioIRQSetDataNone      = 1 << 0 // VFIO_IRQ_SET_DATA_NONE
	vfioIRQSetDataEventfd   = 1 << 2 // VFIO_IRQ_SET_DATA_EVENTFD
	vfioIRQSetActionTrigger = 1 << 5 // VFIO_IRQ_SET_ACTION_TRIGGER

	// enum { VFIO_PCI_BAR0_REGION_INDEX, ..., VFIO_PCI_CONFIG_REGION_INDEX = 7 }
	vfioPCIBAR0Region   = 0
	vfioPCIBAR2Region   = 2
	vfioPCIConfigRegion = 7
	// enum { VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSI_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX, ... }
	vfioPCIMSIXIRQ = 2
)

// struct vfio_group_status
type vfioGroupStatus struct {
	Argsz uint32
	Flags uint32
}

// struct vfio_region_info (no capability chain read: the BARs we use need none)
type vfioRegionInfo struct {
	Argsz     uint32
	Flags     uint32
	Index     uint32
	CapOffset uint32
	Size      uint64
	Offset    uint64
}

// struct vfio_irq_info
type vfioIRQInfo struct {
	Argsz uint32
	Flags uint32
	Index uint32
	Count uint32
}

// struct vfio_irq_set with room for one eventfd in its flexible data[]
// (20 bytes of header, then an __s32 per vector).
type vfioIRQSet1 struct {
	Argsz uint32
	Flags uint32
	Index uint32
	Start uint32
	Count uint32
	FD    int32
}

// PCI configuration space (include/uapi/linux/pci_regs.h): the Command
// register and its Bus Master bit. QEMU drops a function's MSI-X writes
// while bus mastering is off (an MSI is a memory write by the device), and
// vfio-pci does not turn it on: DPDK sets it too (pci_vfio_set_bus_master).
const (
	pciCommand       = 0x04 // PCI_COMMAND, 16 bits
	pciCommandMaster = 0x4  // PCI_COMMAND_MASTER
)

// ioctlPtr issues a VFIO ioctl whose argument is a struct.
func ioctlPtr(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// ioctlInt issues a VFIO ioctl whose argument is a plain value and returns
// its result.
func ioctlInt(fd int, req, arg uintptr) (int, error) {
	r, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, arg)
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}
