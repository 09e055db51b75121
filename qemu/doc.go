// Package qemu gathers what the guest lab needs to boot QEMU guests with a
// dimmnet device: qemu/kernel fetches and checks Debian's cloud kernel,
// qemu/initramfs writes the initramfs from this project's static binaries,
// qemu/guest is the guest's /init and qemu/lab the host side of the lab
// command. Guest attach is driver.AttachVFIO (the kernel's VFIO modules
// from the same package, an emulated IOMMU), or driver.AttachPCI's sysfs
// mapping without them.
package qemu
