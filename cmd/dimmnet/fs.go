package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/regfs"
	"github.com/dimmnet/dimmnet/internal/provenance"
	"github.com/dimmnet/dimmnet/internal/rundir"
)

// attachAll attaches to every DIR/node<K>.sock a daemon serves.
func attachAll(dir string) ([]string, []driver.Attachment, error) {
	socks, err := filepath.Glob(filepath.Join(dir, "node*.sock"))
	if err != nil {
		return nil, nil, err
	}
	if len(socks) == 0 {
		return nil, nil, fmt.Errorf("no node*.sock in %s: is dimmnet serve --dir %s running?", dir, dir)
	}
	sort.Slice(socks, func(i, j int) bool { return nodeNum(socks[i]) < nodeNum(socks[j]) })
	var names []string
	var ts []driver.Attachment
	for _, s := range socks {
		t, err := driver.Dial(s)
		if err != nil {
			for _, o := range ts {
				o.Close()
			}
			return nil, nil, err
		}
		names = append(names, strings.TrimSuffix(filepath.Base(s), ".sock"))
		ts = append(ts, t)
	}
	return names, ts, nil
}

// fileExists reports whether something is at p (a symlink included).
func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func nodeNum(sock string) int {
	var n int
	fmt.Sscanf(strings.TrimPrefix(filepath.Base(sock), "node"), "%d", &n)
	return n
}

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
	names, ts, err := attachAll(*dir)
	if err != nil {
		return err
	}
	defer func() {
		for _, t := range ts {
			t.Close()
		}
	}()
	var devs []regfs.Device
	for i, t := range ts {
		devs = append(devs, regfs.Device{Name: names[i], Region: t.Region()})
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
	name, t, err := attachOne(fs.Arg(0))
	if err != nil {
		return err
	}
	defer t.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var o regfs.WatchOptions
	if *watch {
		o.Every = time.Second
	}
	if *asJSON {
		o.Encode = provenance.NewEncoder(os.Stdout).Encode
	}
	return regfs.Watch(ctx, os.Stdout, name, t.Region(), o)
}

// attachOne attaches to the device stat and trace name: a socket (a bare
// name is in serve's default directory), else node0.sock there if a
// daemon serves it, else the device on this guest's PCI bus.
func attachOne(sock string) (string, driver.Attachment, error) {
	if sock == "" {
		if p := filepath.Join(rundir.Default(), "node0.sock"); fileExists(p) {
			sock = "node0.sock"
		}
	}
	if sock == "" {
		t, err := driver.AttachPCI("")
		return "pci", t, err
	}
	sock, err := rundir.Socket(sock)
	if err != nil {
		return "", nil, err
	}
	t, err := driver.Dial(sock)
	return strings.TrimSuffix(filepath.Base(sock), ".sock"), t, err
}
