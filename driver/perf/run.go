package perf

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/cpubind"
	"github.com/dimmnet/dimmnet/uapi"
)

// Pair is an open pair: the initiator's session with its responder and
// what the records say about where it ran.
type Pair struct {
	Session *Session
	Medium  string
	Binding string
	// TransportWindow is the devices' window of unacknowledged packets
	// per peer (vdev.Config.Window), which the ABI does not show; 0:
	// DefaultTransportWindow.
	TransportWindow int
	// close ends the responder and releases what the pair holds.
	close func() error
	// abort ends a responder that will not answer (the initiator's
	// side was stopped mid-measurement, the responder still waits for
	// its message).
	abort  func()
	closed bool
}

// Close ends the session (the responder quits) and releases the pair.
// After a stop (a signal, a failed side) the responder is ended instead
// of asked. A second Close does nothing.
func (p *Pair) Close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	var err error
	if cause := p.Session.A.Stopped(); cause != nil && p.abort != nil {
		p.abort()
	} else {
		err = p.Session.Close()
	}
	if p.close != nil {
		if cerr := p.close(); err == nil {
			err = cerr
		}
	}
	return err
}

// OnClose adds f to what Close releases, after what is there already.
func (p *Pair) OnClose(f func() error) *Pair {
	prev := p.close
	p.close = func() error {
		var err error
		if prev != nil {
			err = prev()
		}
		if ferr := f(); err == nil {
			err = ferr
		}
		return err
	}
	return p
}

// InProcess pairs two sides of this process: the responder serves on a
// goroutine of its own, over a pipe.
func InProcess(a, b *pingpong.Side, medium string) *Pair {
	ca, cb := net.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Serve(b, cb)
		cb.Close() // the session sees the end at once
		done <- err
	}()
	return &Pair{Session: NewSession(a, ca), Medium: medium, Binding: "one-process", close: func() error {
		ca.Close()
		return <-done
	}, abort: func() { b.Stop(fmt.Errorf("%w: the initiator stopped", pingpong.ErrPeerFailed)) }}
}

// Remote pairs a side with a responder reached over conn (another host's
// `perf serve`, over TCP).
func Remote(a *pingpong.Side, conn io.ReadWriteCloser, medium string) *Pair {
	return &Pair{Session: NewSession(a, conn), Medium: medium, Binding: "hosts", close: conn.Close, abort: func() {}}
}

// ChildArgs is how the initiator's program is started again as the
// responder (after the executable: the subcommand and its flags naming
// the device). The child prints "ready NODE" once its side is set up,
// then serves on its standard input and output (ServeChild).
type ChildArgs []string

// Child starts this executable with args as the responder process of a
// pair whose initiator side is a (already open, not yet set up: the
// child's node is learned from its ready line), each process bound to a
// CPU of its own when two fit (bind). setup finishes a's side once the
// peer is known. The child dies with this process.
func Child(args ChildArgs, bind bool, medium string, setup func(peer uint16) (*pingpong.Side, error), release func()) (*Pair, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	var cpus []int
	if bind {
		allowed, err := cpubind.Allowed()
		if err != nil {
			return nil, err
		}
		cpus = cpubind.CPUs(2, &allowed)
	}
	a := slices.Clone(args)
	if cpus != nil {
		a = append(a, "--bind-cpu", strconv.Itoa(cpus[1]))
	}
	cmd := exec.Command(exe, a...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start responder: %w", err)
	}
	fail := func(err error) (*Pair, error) {
		cmd.Process.Kill()
		cmd.Wait()
		release()
		return nil, err
	}
	var peer uint16
	if _, err := fmt.Fscanf(out, "ready %d\n", &peer); err != nil {
		return fail(fmt.Errorf("responder did not get ready: %w", err))
	}
	var unpin func() error
	if cpus != nil {
		b, err := cpubind.Pin(cpus[0])
		if err != nil {
			return fail(fmt.Errorf("initiator: %w", err))
		}
		unpin = b.Restore
	}
	side, err := setup(peer)
	if err != nil {
		return fail(err)
	}
	killed := false
	binding := "unbound"
	if cpus != nil {
		binding = "bound"
	}
	return &Pair{Session: NewSession(side, rw{out, in}), Medium: medium, Binding: binding, close: func() error {
		in.Close()
		err := cmd.Wait()
		release()
		if unpin != nil {
			unpin()
		}
		if err != nil && !killed {
			return fmt.Errorf("responder: %w", err)
		}
		return nil
	}, abort: func() { killed = true; cmd.Process.Kill() }}, nil
}

// ServeChild is the responder process's side of Child: say ready, serve
// on standard input and output.
func ServeChild(b *pingpong.Side) error {
	fmt.Printf("ready %d\n", b.D.Node())
	return Serve(b, rw{os.Stdin, os.Stdout})
}

// rw joins a reader and a writer into a control stream.
type rw struct {
	io.Reader
	io.Writer
}

// DefaultTransportWindow is vdev.Config.Window's default.
const DefaultTransportWindow = 64

// Options are the measurements Run makes on a pair.
type Options struct {
	Patterns []string
	Ops      []string
	Conds    []string
	// Sizes of lat and bw (rate is always RateSize).
	Sizes  []int
	Window int
	Bidir  bool
	// Time is about how long each measurement's timed part takes.
	Time  time.Duration
	Check bool
}

// Run makes every measurement of o on p and returns the records, each
// with the medium, binding, windows and provenance.
func Run(p *Pair, o Options, progress func(string)) ([]Record, error) {
	d := p.Session.A.D
	tw := p.TransportWindow
	if tw == 0 {
		tw = DefaultTransportWindow
	}
	mi := int(d.Region().Load64(uapi.RegMaxInflight))
	window := o.Window
	if window <= 0 {
		window = mi
	}
	var specs []Spec
	for _, pat := range o.Patterns {
		sizes := o.Sizes
		if pat == PatternRate {
			sizes = []int{RateSize}
		}
		for _, size := range sizes {
			for _, op := range o.Ops {
				for _, cond := range o.Conds {
					specs = append(specs, Spec{Pattern: pat, Op: op, Cond: cond, Size: size, Window: window, Bidir: o.Bidir && pat == PatternBW, Time: o.Time, Check: o.Check})
				}
			}
		}
	}
	var recs []Record
	for i, sp := range specs {
		progress(fmt.Sprintf("perf %d/%d: %s %s %s %s", i+1, len(specs), sp.Pattern, sp.Op, sp.Cond, pingpong.SizeName(sp.Size)))
		r, err := p.Session.Measure(sp)
		if err != nil {
			return recs, fmt.Errorf("%s %s %s %d bytes: %w", sp.Pattern, sp.Op, sp.Cond, sp.Size, err)
		}
		r.Medium, r.Binding, r.TransportWindow, r.MaxInflight = p.Medium, p.Binding, tw, mi
		if sp.Pattern == PatternLat {
			r.Window = 0
		}
		r.Info = CollectInfo()
		recs = append(recs, r)
	}
	return recs, nil
}
