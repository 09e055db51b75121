package pairs

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/cpubind"
	"github.com/dimmnet/dimmnet/internal/interrupt"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// procPair is a two-process run: how the initiator opens its device, how
// the responder (this program again) is told to open its own, and what
// the records say about the path.
type procPair struct {
	open       func() (*driver.Driver, func(), error)
	responder  []string // the responder's flags naming its device
	where      string   // for messages: the responder's socket or directory
	path, link string   // the records' path and link
	title      string   // the table's heading
	// bind binds the two processes one to a CPU when they fit the CPUs
	// this one may use (cpubind): both spin while they wait, and the
	// scheduler may otherwise keep them on one core for a whole run.
	bind bool
}

// attachPair runs two processes attached to a daemon's devices.
func attachPair(sockA, sockB string) procPair {
	return procPair{
		open:      func() (*driver.Driver, func(), error) { return DialDevice(sockA) },
		responder: []string{"--responder", sockB}, where: sockB,
		path: "process", title: "two processes attached to dimmnet serve",
	}
}

// DialDevice attaches to a daemon's device.
func DialDevice(sock string) (*driver.Driver, func(), error) {
	t, err := driver.Dial(sock)
	if err != nil {
		return nil, nil, err
	}
	d, err := driver.Open(t)
	if err != nil {
		t.Close()
		return nil, nil, err
	}
	return d, func() { d.Close() }, nil
}

// initiateProcess opens its device, starts this program again as the
// responder on the other (`pingpong` with the responder's flags), and
// runs the plan against it. It also returns how many messages the
// responder verified. running, if not nil, is called with the
// responder's pid once both are ready (and bound), before the plan.
func initiateProcess(pp procPair, maxSize, iters int, verify bool, pl []pingpong.Step, progress func(string), running func(pid int)) ([]pingpong.Result, int, error) {
	d, release, err := pp.open()
	if err != nil {
		return nil, 0, err
	}
	defer release()
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, fmt.Errorf("find own executable: %w", err)
	}
	// Each process binds itself once its device is open and it is on its
	// own: a driver judges at Open whether it has a core of its own (one
	// CPU: it yields at every look), and a child started after we bound
	// would inherit our one CPU.
	var cpus []int
	if pp.bind {
		allowed, err := cpubind.Allowed()
		if err != nil {
			return nil, 0, err
		}
		cpus = cpubind.CPUs(2, &allowed)
	}
	respArgs := slices.Clone(pp.responder)
	if cpus != nil {
		respArgs = append(respArgs, "--bind-cpu", strconv.Itoa(cpus[1]))
	}
	cmd := exec.Command(exe, slices.Concat([]string{"pingpong"}, respArgs, []string{"--peer", fmt.Sprint(d.Node()), "--max", strconv.Itoa(maxSize), "--iters", strconv.Itoa(iters),
		"--verify=" + strconv.FormatBool(verify)})...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // the responder dies with us
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	counts, err := cmd.StdinPipe() // each measurement's timed count, as chosen
	if err != nil {
		return nil, 0, err
	}
	defer counts.Close()
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("start responder: %w", err)
	}
	defer cmd.Process.Kill() // no-op once it exited
	var peer int
	if _, err := fmt.Fscanf(out, "ready %d\n", &peer); err != nil {
		cmd.Wait()
		return nil, 0, fmt.Errorf("responder on %s did not get ready: %w", pp.where, err)
	}
	if cpus != nil {
		b, err := cpubind.Pin(cpus[0])
		if err != nil {
			return nil, 0, fmt.Errorf("initiator: %w", err)
		}
		defer func() { // before the raw baselines start their children
			if err := b.Restore(); err != nil {
				fmt.Fprintf(os.Stderr, "pingpong: the raw baselines run bound to one CPU: %v\n", err)
			}
		}()
	}
	if running != nil {
		running(cmd.Process.Pid)
	}
	a := &pingpong.Side{D: d, Peer: uint16(peer), Verify: verify}
	defer stopOnSignal(a)()
	if err := pingpong.SetupSide(a, maxSize); err != nil {
		return nil, 0, err
	}
	// The responder's last line is its verified count. If it fails (a
	// payload that does not verify), stop our wait for its reply at once.
	type ending struct {
		verified int
		err      error
	}
	ended := make(chan ending, 1)
	go func() {
		var e ending
		fmt.Fscanf(out, "verified %d\n", &e.verified) // EOF if it failed
		if e.err = cmd.Wait(); e.err != nil {
			e.err = fmt.Errorf("responder on %s: %w", pp.where, e.err)
			a.Stop(e.err)
		}
		ended <- e
	}()
	var res []pingpong.Result
	budget := pingpong.Pace(pl)
	tell := func(n int) error { _, err := fmt.Fprintf(counts, "%d\n", n); return err }
	for i, st := range pl {
		progress(fmt.Sprintf("pingpong (two processes, %s) %d/%d: %s %s %s", pp.path, i+1, len(pl), st.Mode, st.Cond, pingpong.SizeName(st.Size)))
		r, err := pingpong.InitiateFor(a, st.Mode, st.Cond, st.Size, budget(st), tell)
		if err != nil {
			return nil, 0, err
		}
		r.Path, r.Link, r.Bound = pp.path, pp.link, cpus != nil
		res = append(res, r)
	}
	e := <-ended
	return res, e.verified, e.err
}

// respondProcess is the responder process: attach, bind to cpu if it is
// not -1, set up, say ready on out, serve the plan (each measurement's
// timed count read from in, as the initiator chose it), say how many
// messages it verified.
func respondProcess(open func() (*driver.Driver, func(), error), peer, maxSize int, verify bool, cpu int, pl []pingpong.Step, in io.Reader, out io.Writer) error {
	if peer < 0 || peer > 65535 {
		return fmt.Errorf("a responder needs --peer NODE (the initiator's node id)")
	}
	d, release, err := open()
	if err != nil {
		return err
	}
	defer release()
	if cpu >= 0 { // after Open: the driver judged the CPUs it may use unbound
		bd, err := cpubind.Pin(cpu)
		if err != nil {
			return fmt.Errorf("responder: %w", err)
		}
		defer bd.Restore()
	}
	b := &pingpong.Side{D: d, Peer: uint16(peer), Verify: verify}
	if err := pingpong.SetupSide(b, maxSize); err != nil {
		return err
	}
	fmt.Fprintf(out, "ready %d\n", d.Node())
	br := bufio.NewReader(in)
	count := func() (int, error) {
		var n int
		if _, err := fmt.Fscanf(br, "%d\n", &n); err != nil {
			return 0, fmt.Errorf("read from the initiator: %w", err)
		}
		return n, nil
	}
	for _, st := range pl {
		if err := pingpong.RespondFor(b, st.Mode, st.Cond, st.Size, st.Budget.Warm, count); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "verified %d\n", b.Verified)
	return nil
}

// shmTempDir makes the shared-memory link's directory of a --link shm
// run; rm removes it, and so does an exit forced by a signal.
func shmTempDir() (dir string, rm func(), err error) {
	if dir, err = os.MkdirTemp("", "dimmnet-shm-"); err != nil {
		return "", nil, err
	}
	unforce := interrupt.OnForcedExit(func() { os.RemoveAll(dir) })
	return dir, func() { unforce(); os.RemoveAll(dir) }, nil
}

// stopOnSignal makes a signal stop side a's measurement (internal/
// interrupt); the returned function undoes it.
func stopOnSignal(a *pingpong.Side) func() {
	interrupt.Catch()
	return interrupt.OnStop(a.Stop)
}

// shmPair runs two processes on the shared-memory link of dir: this one as
// node 1, a child as node 2, each embedding its device; with bind, each
// on a CPU of its own when two fit (procPair.bind).
func shmPair(dir string, payload int, keyFile string, check, bind bool) procPair {
	pp := procPair{bind: bind,
		open:      func() (*driver.Driver, func(), error) { return ShmDevice(dir, 1, payload, keyFile, check) },
		responder: []string{"--shm-responder", dir, "--node", "2", "--mtu", strconv.Itoa(payload)}, where: "the shared-memory link",
		path: "process", link: "shm", title: "two processes, each with its device, on the shared-memory link",
	}
	if check {
		pp.responder = append(pp.responder, "--check")
	}
	if keyFile != "" {
		pp.responder = append(pp.responder, "--key", keyFile)
		pp.title += ", every frame authenticated (--key)"
	}
	return pp
}

// ShmDevice embeds this process's device as node on dir's shared-memory
// link and opens a driver on it (run to completion: the driver's thread
// runs the device while it waits).
func ShmDevice(dir string, node uint16, payload int, keyFile string, check bool) (*driver.Driver, func(), error) {
	key, err := auth.LoadOptionalKey(keyFile)
	if err != nil {
		return nil, nil, err
	}
	if payload == 0 {
		payload = vdev.DefaultHubPayload
	}
	l, err := vdev.NewLocalPorts(vdev.Config{Check: check}, []uint16{node}, func(d *vdev.Device) (link.Port, error) {
		p, err := link.ListenShm(dir, d.Node(), payload+wire.FrameOverhead)
		if err != nil {
			return nil, err
		}
		return auth.Keyed(p, key)
	})
	if err != nil {
		return nil, nil, err
	}
	d, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return d, func() { d.Close(); l.Close() }, nil
}

// rawOf is the raw baseline of condition cond in raw (zero if absent):
// the word ping-pong's median RTT/2 and memcpy's MB/s are what the
// shared-memory link is judged by.
func rawOf(raw []pingpong.Result, cond string) pingpong.Result {
	for _, r := range raw {
		if r.Mode == pingpong.ModeRaw && r.Condition == cond {
			return r
		}
	}
	return pingpong.Result{}
}
