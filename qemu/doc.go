// Package qemu gathers what the guest lab needs to boot QEMU guests with a
// dimmnet device: qemu/kernel fetches and checks Debian's cloud kernel,
// qemu/initramfs writes the initramfs from this project's static binaries.
// The guest /init and the lab command live in cmd/dimmnet; guest attach is
// driver.AttachVFIO (the kernel's VFIO modules from the same package, an
// emulated IOMMU), or driver.AttachPCI's sysfs mapping without them.
package qemu
