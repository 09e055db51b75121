package pairs

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/perf"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/cpubind"
	"github.com/dimmnet/dimmnet/internal/interrupt"
	"github.com/dimmnet/dimmnet/internal/rundir"
)

// PerfLocal is the in-process pair on a medium, every side stopped by
// a signal before anything is torn down (Local).
func PerfLocal(lo Link, maxSize int) (*perf.Pair, error) {
	sides, closeFn, err := Local(lo, maxSize, false)
	if err != nil {
		return nil, err
	}
	p := perf.InProcess(sides[0], sides[1], lo.Kind)
	return p.OnClose(func() error { closeFn(); return nil }), nil
}

// PerfShm is two processes on the shared-memory link: this one node 1,
// a child node 2, bound one to a CPU when two fit.
func PerfShm(payload, maxSize int, bind bool) (*perf.Pair, error) {
	dir, err := os.MkdirTemp("", "dimmnet-perf-shm-")
	if err != nil {
		return nil, err
	}
	unforce := interrupt.OnForcedExit(func() { os.RemoveAll(dir) })
	d, release, err := ShmDevice(dir, 1, payload, "", false)
	if err != nil {
		unforce()
		os.RemoveAll(dir)
		return nil, err
	}
	args := perf.ChildArgs{"perf", "--shm-responder", dir, "--node", "2", "--peer", "1", "--max", strconv.Itoa(maxSize), "--mtu", strconv.Itoa(payload)}
	return perf.Child(args, bind, "shm", SideSetup(d, maxSize), func() { release(); os.RemoveAll(dir); unforce() })
}

// PerfAttach is two processes attached to a daemon's devices.
func PerfAttach(spec string, maxSize int) (*perf.Pair, error) {
	socks := strings.Split(spec, ",")
	if len(socks) != 2 {
		return nil, fmt.Errorf("--attach %q: want SOCK_A,SOCK_B", spec)
	}
	for i := range socks {
		var err error
		if socks[i], err = rundir.Socket(socks[i]); err != nil {
			return nil, fmt.Errorf("--attach: %w", err)
		}
	}
	d, release, err := DialDevice(socks[0])
	if err != nil {
		return nil, err
	}
	args := perf.ChildArgs{"perf", "--responder", socks[1], "--peer", strconv.Itoa(int(d.Node())), "--max", strconv.Itoa(maxSize)}
	return perf.Child(args, false, "attach", SideSetup(d, maxSize), release)
}

// SideSetup sets up the initiator's side once the responder's node is
// known, stopped by a signal.
func SideSetup(d *driver.Driver, maxSize int) func(uint16) (*pingpong.Side, error) {
	return func(peer uint16) (*pingpong.Side, error) {
		a := &pingpong.Side{D: d, Peer: peer}
		interrupt.Catch()
		interrupt.OnStop(a.Stop)
		return a, pingpong.SetupSide(a, maxSize)
	}
}

// PerfChild is the responder process of PerfShm and PerfAttach.
func PerfChild(open func() (*driver.Driver, func(), error), peer, maxSize, cpu int) error {
	if peer < 0 || peer > 65535 {
		return fmt.Errorf("a responder needs --peer NODE")
	}
	d, release, err := open()
	if err != nil {
		return err
	}
	defer release()
	if cpu >= 0 {
		bd, err := cpubind.Pin(cpu)
		if err != nil {
			return fmt.Errorf("responder: %w", err)
		}
		defer bd.Restore()
	}
	b := &pingpong.Side{D: d, Peer: uint16(peer)}
	if err := pingpong.SetupSide(b, maxSize); err != nil {
		return err
	}
	return perf.ServeChild(b)
}

// processBreakdown is --breakdown between two processes (--attach, --link
// shm): the responder sends its stamps back over perf's control stream;
// both read the host's monotonic clock.
func processBreakdown(o Options) error {
	attach, payload, iters, bind, asJSON, progress := o.Attach, o.Payload, o.Iters, o.Bind, o.JSON, o.Progress
	var p *perf.Pair
	var err error
	if attach != "" {
		p, err = PerfAttach(attach, 8)
	} else {
		p, err = PerfShm(payload, 8, bind)
	}
	if err != nil {
		return err
	}
	b, err := p.Session.Breakdown(iters, progress)
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	progress("")
	if asJSON {
		return pingpong.WriteJSON(o.Out, b)
	}
	fmt.Fprintf(o.Out, "two processes (%s, %s)\n", p.Medium, p.Binding)
	pingpong.PrintBreakdown(o.Out, b)
	return nil
}
