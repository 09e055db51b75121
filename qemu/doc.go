// Package qemu will hold what guests need — kernel fetch, initramfs built
// from this project's static binaries, guest init, VM launcher — for the
// two-VM lab (issue "guest lab"). It is empty until that issue is built.
package qemu
