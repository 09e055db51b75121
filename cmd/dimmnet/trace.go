package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/dimmnet/dimmnet/internal/provenance"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/rundir"
	"github.com/dimmnet/dimmnet/vdev/tracesock"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// traceCmd streams a daemon device's live trace: what it takes, writes,
// hears and sends, one decoded line each.
func traceCmd(args []string) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the records as JSON lines")
	pcapFile := fs.String("pcap", "", "also write every frame the device sends and receives to this pcapng file, on an interface named after the node (the generated dissector decodes it)")
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
	r, err := tracesock.Dial(tracesock.Path(sock), *pcapFile != "")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); r.Close() }()
	var cw *capture.Writer
	if *pcapFile != "" {
		f, err := os.Create(*pcapFile)
		if err != nil {
			return err
		}
		if cw, err = capture.NewWriter(f, 65536+wire.FrameOverhead); err != nil {
			f.Close()
			return err
		}
		defer func() {
			cw.Close()
			fmt.Fprintf(os.Stderr, "trace: %d frames captured to %s\n", cw.Frames(), *pcapFile)
		}()
	}
	out := provenance.NewEncoder(os.Stdout)
	for n := 0; *count == 0 || n < *count; n++ {
		rec, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("trace: %w", err)
		}
		if cw != nil && rec.Frame != nil {
			cw.RecordOn(strings.TrimSuffix(filepath.Base(sock), ".sock"), rec.Frame)
		}
		rec.Frame = nil
		if *asJSON {
			if err := out.Encode(rec); err != nil {
				return err
			}
		} else {
			fmt.Println(rec.Text)
		}
	}
	return nil
}
