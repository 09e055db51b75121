package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/daemon"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// linkOpts says what carries the embedded pair's frames.
type linkOpts struct {
	kind    string // mem, udp, afpacket, tap
	payload int    // packet payload (mem and udp; afpacket/tap follow the interface MTU)
	fault   string // fault injection spec, "" for none
	pcap    string // capture file, "" for none
	key     string // pre-shared key file: authenticated links; "" for none
	check   bool   // checked devices (vdev.Config.Check)
}

// ports builds the two devices' ports (nodes 1 and 2) on the chosen medium
// and returns a cleanup that removes whatever was set up (namespace,
// interfaces, capture file).
func (o linkOpts) ports() (func(d *vdev.Device) (link.Port, error), func() error, error) {
	var fc impair.Config
	if o.fault != "" {
		var err error
		if fc, err = impair.Parse(o.fault); err != nil {
			return nil, nil, err
		}
	}
	key, err := daemon.KeyFor(o.key)
	if err != nil {
		return nil, nil, err
	}
	var cleanups []func() error
	cleanup := func() error {
		var errs []error
		for i := len(cleanups) - 1; i >= 0; i-- {
			errs = append(errs, cleanups[i]())
		}
		return errors.Join(errs...)
	}
	var open func(d *vdev.Device) (link.Port, error)
	switch o.kind {
	case "", "mem":
		hub := link.NewHub(o.payload+wire.FrameOverhead, 256)
		open = func(d *vdev.Device) (link.Port, error) { return hub.Attach(d.MAC()) }
	case "udp":
		addrs := map[uint16]string{}
		for _, n := range []uint16{1, 2} {
			l, err := net.ListenPacket("udp", "127.0.0.1:0")
			if err != nil {
				return nil, nil, err
			}
			addrs[n] = l.LocalAddr().String()
			l.Close()
		}
		mtu := min(o.payload, 65507-wire.FrameOverhead) + wire.FrameOverhead
		open = func(d *vdev.Device) (link.Port, error) {
			peer := uint16(3 - d.Node())
			return link.ListenUDP(addrs[d.Node()], d.MAC(), map[string]string{wire.NodeMAC(peer).String(): addrs[peer]}, mtu)
		}
	case "afpacket", "tap":
		name := fmt.Sprintf("dimmnet-pp-%d", os.Getpid())
		ns, err := netsetup.NewNamespace(name)
		if err != nil {
			return nil, nil, fmt.Errorf("--link %s needs root and a network namespace: %w", o.kind, err)
		}
		cleanups = append(cleanups, func() error { ns.Close(); return netsetup.DeleteNamespace(name) })
		ifs := [2]string{"dnpp1", "dnpp2"}
		if o.kind == "afpacket" {
			if err := netsetup.VethPair(ns, ifs[0], ifs[1], nil, nil); err != nil {
				cleanup()
				return nil, nil, err
			}
			if err := netsetup.SetMTU(ns, 9000, ifs[:]...); err != nil { // jumbo frames: fewer packets per MiB
				cleanup()
				return nil, nil, err
			}
		} else {
			if err := netsetup.Bridge(ns, "dnppbr"); err != nil {
				cleanup()
				return nil, nil, err
			}
			for i, n := range ifs {
				// the TAP's own address must differ from the device's node MAC
				if err := netsetup.TAP(ns, n, "dnppbr", net.HardwareAddr{0x02, 0x54, 0x41, 0x50, 0, byte(i + 1)}); err != nil {
					cleanup()
					return nil, nil, err
				}
			}
		}
		open = func(d *vdev.Device) (link.Port, error) {
			var p link.Port
			err := netsetup.Run(ns, func() error {
				var err error
				if o.kind == "afpacket" {
					p, err = link.OpenAFPacket(ifs[d.Node()-1], d.MAC())
				} else {
					p, err = link.OpenTAP(ifs[d.Node()-1], d.MAC())
				}
				return err
			})
			return p, err
		}
	default:
		return nil, nil, fmt.Errorf("--link %q: want mem, udp, afpacket or tap", o.kind)
	}
	var pcapFile *os.File
	var finish func() error
	wrapped := func(d *vdev.Device) (link.Port, error) {
		p, err := open(d)
		if err != nil {
			return nil, err
		}
		if fc.Active() {
			c := fc
			c.Seed += int64(d.Node()) // the two directions differ, repeatably
			p = impair.Wrap(p, c)
		}
		if o.pcap != "" && d.Node() == 1 { // one side sees every frame of the pair
			if pcapFile, err = os.Create(o.pcap); err != nil {
				return nil, err
			}
			if p, finish, err = capture.Wrap(p, pcapFile); err != nil {
				return nil, err
			}
			cleanups = append(cleanups, func() error { return finish() })
		}
		return auth.Keyed(p, key) // last, so captures and faults see the frames as the medium carries them
	}
	return wrapped, cleanup, nil
}

// rankFlags adds --key and --check to a command whose ranks are other
// processes (mpbench, acp-bench).
func rankFlags(fs *flag.FlagSet) (keyFile *string, check *bool) {
	keyFile = fs.String("key", "", "authenticate every frame between the ranks' devices with this pre-shared key file (passed to the ranks as DIMMNET_KEY; under mpirun, export DIMMNET_KEY instead)")
	check = fs.Bool("check", false, "checked devices: a rank whose library breaks the datasheet fails (DIMMNET_CHECK=1 for the ranks)")
	return keyFile, check
}

// setRankEnv hands --key and --check to the rank processes, which read
// them from the environment (driver/ranks), as ranks an outside launcher
// starts do.
func setRankEnv(keyFile string, check bool) error {
	if keyFile != "" {
		p, err := filepath.Abs(keyFile)
		if err != nil {
			return err
		}
		if _, err := auth.LoadKey(p); err != nil { // refuse a weak key here, not in every rank
			return fmt.Errorf("--key: %w", err)
		}
		os.Setenv("DIMMNET_KEY", p)
	}
	if check {
		os.Setenv("DIMMNET_CHECK", "1")
	}
	return nil
}
