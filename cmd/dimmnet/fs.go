package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dimmnet/dimmnet/driver/devinfo"
	"github.com/dimmnet/dimmnet/driver/regfs"
	"github.com/dimmnet/dimmnet/internal/provenance"
	"github.com/dimmnet/dimmnet/internal/rundir"
)

// fsCmd mounts the live register view of every device a daemon hosts.
func fsCmd(args []string) error {
	fs := flag.NewFlagSet("fs", flag.ContinueOnError)
	dir := fs.String("dir", "", "the daemon's directory (dimmnet serve --dir; default: serve's default, checked as serve checks it)")
	rw := fs.Bool("rw", false, "allow writes to RW registers and link memory")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("usage: dimmnet fs [--dir DIR] [--rw] MOUNTPOINT")
	}
	if *dir == "" {
		*dir = rundir.Default()
		if err := rundir.Check(*dir); err != nil {
			return err
		}
	}
	mnt := fs.Arg(0)
	as, err := devinfo.AttachAll(*dir)
	if err != nil {
		return err
	}
	var devs []regfs.Device
	for _, a := range as {
		defer a.Close()
		devs = append(devs, regfs.Device{Name: a.Name, Region: a.Region()})
	}
	// Ctrl-C unmounts from the moment the view can be seen (regfs.Serve).
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return regfs.Serve(ctx, mnt, devs, regfs.Options{Writable: *rw}, os.Stdout)
}

// statCmd prints one device's registers and counters (every second with
// -w, each counter's rate beside its total; --json: records for scripts).
func statCmd(args []string) error {
	fs := flag.NewFlagSet("stat", flag.ContinueOnError)
	watch := fs.Bool("w", false, "print again every second until interrupted, with each counter's rate per second")
	asJSON := fs.Bool("json", false, "print JSON records (registers, counters, rates_per_second, trace, violations)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return errors.New("usage: dimmnet stat [-w] [--json] [SOCKET] (a bare name such as node1.sock is in serve's default directory; no socket: node0.sock there if a daemon serves it, else the device on this guest's PCI bus)")
	}
	a, err := devinfo.Attach(fs.Arg(0))
	if err != nil {
		return err
	}
	defer a.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var o regfs.WatchOptions
	if *watch {
		o.Every = time.Second
	}
	if *asJSON {
		o.Encode = provenance.NewEncoder(os.Stdout).Encode
	}
	return regfs.Watch(ctx, os.Stdout, a.Name, a.Region(), o)
}
