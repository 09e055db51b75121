package main

import (
	"errors"
	"flag"
	"time"

	"github.com/dimmnet/dimmnet/qemu/lab"
)

// labCmd is the host side of the guest lab: a daemon with two linked
// devices, two TCG guests each with one of them (ivshmem-doorbell) and one
// plain shared region for the raw baseline, the ping-pong between them.
func labCmd(args []string) error {
	if len(args) == 0 || (args[0] != "pingpong" && args[0] != "fi_pingpong" && args[0] != "shell") {
		return errors.New("usage: dimmnet lab pingpong|fi_pingpong|shell [flags]")
	}
	what := args[0]
	fs := flag.NewFlagSet("lab "+what, flag.ContinueOnError)
	dir := fs.String("dir", "", "keep sockets, initramfs and guest console logs here (default: a temporary directory, removed)")
	kpath := fs.String("kernel", "", "boot this kernel instead of Debian's cloud kernel")
	maxSize := fs.Int("max", 64<<10, "largest message size (fi_pingpong: FI_DIMMNET_MAX_MSG, the last size of -S all)")
	iters := fs.Int("iters", 200, "round trips per size (TCG is slow)")
	rawIters := fs.Int("rawiters", 2000, "round trips of the raw baseline")
	asJSON := fs.Bool("json", false, "print the results as JSON records")
	timeout := fs.Duration("timeout", 15*time.Minute, "give up after this long")
	mem := fs.Int("mem", 128, "guest memory in MiB")
	spin := fs.Bool("spin", false, "guests poll without ever sleeping (faster when cores are plentiful)")
	linkKind := fs.String("link", "mem", "what joins the two devices: mem (one daemon, its in-memory hub), udp (a daemon per guest, linked over loopback UDP), tap (a daemon per guest, each device's TAP on a bridge) or afpacket (a daemon per guest, AF_PACKET on the two ends of a veth pair); tap and afpacket need root and run in a network namespace the lab makes and removes")
	pcapFile := fs.String("pcap", "", "capture every frame between the two devices to this pcap file")
	check := fs.Bool("check", false, "checked devices (serve --check): the guests' drivers' violations of the datasheet are counted and logged; the guests' dimmnet stat lists them")
	keyFile := fs.String("key", "", "authenticate the frames between the devices with this pre-shared key file (passed to every daemon's serve --key; the in-memory hub of --link mem carries them too)")
	storm := fs.Bool("doorbell-storm", false, "test the daemon against a misbehaving guest: guest 0 also stores to its device's Doorbell register in a tight loop while the ping-pong runs")
	attach := fs.String("attach", "vfio", "how guests reach their device: vfio (an emulated IOMMU, vfio-pci, MSI-X interrupts) or sysfs (no IOMMU: BARs mapped through sysfs, polling)")
	provider := fs.String("provider", "", "fi_pingpong: the libdimmnet-fi.so to load (default: built from this source tree, which needs libfabric-dev)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	return lab.Run(lab.Options{
		What:     what,
		Dir:      *dir,
		Kpath:    *kpath,
		MaxSize:  *maxSize,
		Iters:    *iters,
		RawIters: *rawIters,
		AsJSON:   *asJSON,
		Timeout:  *timeout,
		Mem:      *mem,
		Spin:     *spin,
		LinkKind: *linkKind,
		PcapFile: *pcapFile,
		Check:    *check,
		KeyFile:  *keyFile,
		Storm:    *storm,
		Attach:   *attach,
		Provider: *provider,
	})
}
