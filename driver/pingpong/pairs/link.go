// Package pairs builds the two ends of a ping-pong and runs the whole
// measurement `dimmnet pingpong` prints: the in-process pair on a medium
// (mem, udp, afpacket, tap), two processes on the shared-memory link or
// attached to a daemon, with their raw baselines; and the same pairs, and
// one across two hosts, as `dimmnet perf` measures them (driver/perf's
// Pair). It is a harness beside the pingpong library because it makes
// devices and links, which the library must not import; the commands
// only parse flags and call it.
package pairs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/interrupt"
	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// Link says what carries the embedded pair's frames.
type Link struct {
	Kind    string // mem, udp, afpacket, tap (shm: two processes, see Run)
	Payload int    // packet payload (mem and udp; afpacket/tap follow the interface MTU)
	Fault   string // fault injection spec, "" for none
	Pcap    string // capture file, "" for none
	Key     string // pre-shared key file: authenticated links; "" for none
	Check   bool   // checked devices (vdev.Config.Check)
}

// ports builds the two devices' ports (nodes 1 and 2) on the chosen medium
// and returns a cleanup that removes whatever was set up (namespace,
// interfaces, capture file).
func (o Link) ports() (func(d *vdev.Device) (link.Port, error), func() error, error) {
	var fc impair.Config
	if o.Fault != "" {
		var err error
		if fc, err = impair.Parse(o.Fault); err != nil {
			return nil, nil, err
		}
	}
	key, err := auth.LoadOptionalKey(o.Key)
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
	switch o.Kind {
	case "", "mem":
		hub := link.NewHub(o.Payload+wire.FrameOverhead, 256)
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
		mtu := min(o.Payload, 65507-wire.FrameOverhead) + wire.FrameOverhead
		open = func(d *vdev.Device) (link.Port, error) {
			peer := uint16(3 - d.Node())
			return link.ListenUDP(addrs[d.Node()], d.MAC(), map[string]string{wire.NodeMAC(peer).String(): addrs[peer]}, mtu)
		}
	case "afpacket", "tap":
		name := fmt.Sprintf("dimmnet-pp-%d", os.Getpid())
		ns, err := netsetup.NewNamespace(name)
		if err != nil {
			return nil, nil, fmt.Errorf("--link %s needs root and a network namespace: %w", o.Kind, err)
		}
		cleanups = append(cleanups, func() error { ns.Close(); return netsetup.DeleteNamespace(name) })
		ifs := [2]string{"dnpp1", "dnpp2"}
		if o.Kind == "afpacket" {
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
				if o.Kind == "afpacket" {
					p, err = link.OpenAFPacket(ifs[d.Node()-1], d.MAC())
				} else {
					p, err = link.OpenTAP(ifs[d.Node()-1], d.MAC())
				}
				return err
			})
			return p, err
		}
	default:
		return nil, nil, fmt.Errorf("--link %q: want mem, udp, afpacket or tap", o.Kind)
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
		if o.Pcap != "" && d.Node() == 1 { // one side sees every frame of the pair
			if pcapFile, err = os.Create(o.Pcap); err != nil {
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

// Local is the embedded default: two in-process devices, nodes 1 and 2,
// on the link lo describes, set up for messages up to maxSize, verifying
// every payload if asked. A signal stops both sides; close tears down.
func Local(lo Link, maxSize int, verify bool) ([2]*pingpong.Side, func(), error) {
	interrupt.Catch() // before a namespace is made: its removal is registered below
	var sides [2]*pingpong.Side
	open, undo, err := lo.ports()
	if err != nil {
		return sides, nil, err
	}
	l, err := vdev.NewLocalPorts(vdev.Config{Check: lo.Check}, []uint16{1, 2}, open)
	if err != nil {
		undo()
		return sides, nil, err
	}
	// Ctrl-C (or timeout's SIGTERM) must not leave a namespace,
	// interfaces or a half-written capture behind, and nothing may be
	// unmapped while a side still writes its link memory: a signal stops
	// both sides, the measurement returns, and the caller's deferred
	// close tears down (internal/interrupt).
	interrupt.Catch()
	var once sync.Once
	var unregs []func()
	closeAll := func() {
		once.Do(func() {
			for _, u := range unregs {
				u()
			}
			l.Close()
			undo()
		})
	}
	unregs = append(unregs, interrupt.OnForcedExit(func() { undo() }))
	for i, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			closeAll()
			return sides, nil, err
		}
		sides[i] = &pingpong.Side{D: d, Peer: l.Devices[1-i].Node(), Verify: verify}
		unregs = append(unregs, interrupt.OnStop(sides[i].Stop))
	}
	if err := pingpong.Setup(sides[0], sides[1], maxSize); err != nil {
		closeAll()
		return sides, nil, err
	}
	return sides, closeAll, nil
}

// inProcess runs the plan on a fresh in-process pair on lo.
func inProcess(lo Link, maxSize int, verify bool, pl []pingpong.Step, progress func(string)) ([]pingpong.Result, error) {
	sides, closeFn, err := Local(lo, maxSize, verify)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	var res []pingpong.Result
	budget := pingpong.Pace(pl)
	for i, st := range pl {
		progress(fmt.Sprintf("pingpong %d/%d: %s %s %s", i+1, len(pl), st.Mode, st.Cond, pingpong.SizeName(st.Size)))
		r, err := pingpong.RunFor(sides[0], sides[1], st.Mode, st.Cond, st.Size, budget(st))
		if err != nil {
			return nil, err
		}
		r.Path = "inprocess"
		r.Link = lo.Kind
		res = append(res, r)
	}
	return res, nil
}
