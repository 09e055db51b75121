package main

import (
	"errors"
	"flag"
	"os"

	"github.com/dimmnet/dimmnet/driver/devinfo"
	"github.com/dimmnet/dimmnet/internal/provenance"
	"github.com/dimmnet/dimmnet/internal/rundir"
)

// devicesCmd lists every device a daemon serves (or, with no daemon, the
// devices on this lab guest's PCI bus), as ibv_devinfo -v lists RDMA
// devices.
func devicesCmd(args []string) error {
	fs := flag.NewFlagSet("devices", flag.ContinueOnError)
	dir := fs.String("dir", "", "the daemon's directory (dimmnet serve --dir; default: serve's default)")
	pci := fs.Bool("pci", false, "list the devices on this machine's PCI bus (a lab guest's) instead")
	asJSON := fs.Bool("json", false, "print one JSON record per device")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New("usage: dimmnet devices [--dir DIR | --pci] [--json]")
	}
	if *dir == "" && !*pci {
		*dir = rundir.Default()
		_, err := os.Stat(*dir)
		*pci = err != nil // no daemon directory: a guest's devices, if any
	}
	list := func() ([]devinfo.Device, error) { return devinfo.List(*dir) }
	if *pci {
		list = devinfo.ListPCI
	}
	devs, err := list()
	if err != nil {
		return err
	}
	if !*asJSON {
		return devinfo.Write(os.Stdout, devs)
	}
	enc := provenance.NewEncoder(os.Stdout)
	for _, d := range devs {
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	return nil
}
