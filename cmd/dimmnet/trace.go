package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/dimmnet/dimmnet/internal/rundir"
	"github.com/dimmnet/dimmnet/vdev/daemon/tracesock"
)

// traceCmd streams a daemon device's live trace: what it takes, writes,
// hears and sends, one decoded line each.
func traceCmd(args []string) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the records as JSON lines")
	pcapFile := fs.String("pcap", "", "also write every frame the device sends and receives to this pcap file (the generated dissector decodes it)")
	count := fs.Int("n", 0, "stop after this many records (0: until Ctrl-C or the daemon stops)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dimmnet trace [flags] node<K>.sock (the default directory's) or DIR/node<K>.sock (or its .trace)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want one socket")
	}
	sock, err := rundir.Socket(fs.Arg(0)) // a bare name: the default directory's
	if err != nil {
		return err
	}
	return tracesock.Follow(sock, tracesock.FollowOptions{JSON: *asJSON, PcapFile: *pcapFile, Count: *count}, os.Stdout)
}
