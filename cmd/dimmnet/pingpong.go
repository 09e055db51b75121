package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/perf"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/cpubind"
	"github.com/dimmnet/dimmnet/internal/interrupt"
	"github.com/dimmnet/dimmnet/internal/rundir"
	"github.com/dimmnet/dimmnet/vdev"
	"golang.org/x/sys/unix"
)

func pingpongCmd(args []string) error {
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the results as JSON records")
	breakdown := fs.Bool("breakdown", false, "print the Table 7 stage breakdown for 8-byte messages instead (in process, --link shm and --attach: a responder in another process sends its stamps back)")
	maxSize := fs.Int("max", 1<<20, "largest message size in bytes")
	iters := fs.Int("iters", 0, "timed round trips per measurement (0: chosen by time, see --time)")
	runTime := fs.Duration("time", 30*time.Second, "about how long the device measurements take in all: each measurement's round trips are counted from its warm-up's pace to take an even share of what is left (at most the counts a fast path needs, so the in-process default ends sooner); --iters forces a count instead")
	rawTime := fs.Duration("raw-time", time.Second, "with --attach: the time budget of each raw baseline (word, three hand-offs, UDP) measured in the same run")
	payload := fs.Int("mtu", vdev.DefaultHubPayload, "packet payload in bytes (mem, udp; afpacket and tap use 9000/1500-byte frames)")
	linkKind := fs.String("link", "mem", "what carries the frames: mem, udp (loopback), afpacket (veth pair), tap (TAPs on a bridge), shm (frame rings in shared memory between two processes, each embedding its device: the second is a child; the raw baselines between processes are measured in the same run); afpacket and tap need root and make their own network namespace")
	faultSpec := fs.String("fault", "", "inject faults on both devices' receive sides, e.g. loss=0.1,dup=0.01,reorder=0.05,corrupt=0.001,seed=1; the same sizes are also measured without faults on the same medium first, and records carry that baseline and the faulty/lossless ratios (turns --verify on)")
	verify := fs.Bool("verify", false, "the receiver copies every payload out after its status and compares it byte for byte with what the sender wrote for that iteration; a mismatch fails the run. On by default with --fault (--verify=false turns it off). Timings include the check: each responder copies a message out before replying")
	pcapFile := fs.String("pcap", "", "capture every frame of the pair to this pcap file")
	check := fs.Bool("check", false, "checked devices: each validates its driver's side of the datasheet and counts and logs every violation (docs/sandbox.md); records carry violations, which the run prints; with --link shm both processes check")
	keyFile := fs.String("key", "", "authenticate every frame with this pre-shared key file (at least 16 bytes, mode 0600): the in-process pair also measures the same sizes without a key first and prints what the key costs (records carry keyed, unkeyed and key_ratio); with --link shm both processes use it")
	quiet := fs.Bool("q", false, "no progress line")
	attach := fs.String("attach", "", "SOCK_A,SOCK_B: ping-pong between two processes attached to a running dimmnet serve (a bare name such as node0.sock is in serve's default directory), then the raw baselines between processes (see --raw-time)")
	compare := fs.Bool("compare", false, "with --attach: also run the embedded in-process ping-pong and print the ratios")
	responder := fs.String("responder", "", "run only the responder role on this socket (what --attach starts; it reads each measurement's timed count from stdin)")
	shmResponder := fs.String("shm-responder", "", "run only the responder role on the shared-memory link of this directory, as --node (what --link shm starts)")
	node := fs.Int("node", 2, "with --shm-responder: this process's node id")
	noBind := fs.Bool("no-bind", false, "with --link shm: leave the two processes, and the raw baselines measured beside them, where the scheduler puts them. By default, when they fit the CPUs this process may use, each runs bound to a CPU of its own (two spinning processes the scheduler kept on one core ran 150-600x slower); with one CPU (taskset -c N) nothing is bound. DIMMNET_BIND=0 also turns it off")
	bindCPU := fs.Int("bind-cpu", -1, "with --shm-responder: bind this process to this CPU once its device is open (what --link shm passes; -1: unbound)")
	peer := fs.Int("peer", -1, "with --responder: the initiator's node id")
	if err := fs.Parse(args); err != nil {
		return err
	}
	verifySet := false
	fs.Visit(func(f *flag.Flag) { verifySet = verifySet || f.Name == "verify" })
	if *breakdown && verifySet && *verify {
		return fmt.Errorf("--verify does not apply to --breakdown (its traced stages time the plain hostcopy path)")
	}
	if !verifySet && *faultSpec != "" {
		*verify = true // a lossy run must prove it delivered the right bytes, not only some bytes
	}
	if *maxSize < 8 || *maxSize > 4<<20 || *runTime <= 0 || *rawTime <= 0 {
		return fmt.Errorf("--max %d, --time %v, --raw-time %v: --max must be 8..4194304, the times positive", *maxSize, *runTime, *rawTime)
	}
	pl := pingpong.NewPlan(*maxSize, *iters, *runTime)
	lo := linkOpts{kind: *linkKind, payload: *payload, fault: *faultSpec, pcap: *pcapFile, key: *keyFile, check: *check}
	progress := progressLine(*quiet || *responder != "" || *shmResponder != "")
	defer progress("")
	switch {
	case *responder != "":
		return respondProcess(func() (*driver.Driver, func(), error) { return dialDevice(*responder) }, *peer, *maxSize, *verify, -1, pl)
	case *shmResponder != "":
		return respondProcess(func() (*driver.Driver, func(), error) {
			return shmDevice(*shmResponder, uint16(*node), *payload, *keyFile, *check)
		}, *peer, *maxSize, *verify, *bindCPU, pl)
	case *breakdown && (*attach != "" || lo.kind == "shm"):
		return processBreakdown(*attach, *payload, *iters, !*noBind, *asJSON, progress)
	case *attach != "" || lo.kind == "shm":
		var pp procPair
		if *attach != "" {
			socks := strings.Split(*attach, ",")
			if len(socks) != 2 {
				return fmt.Errorf("--attach %q: want SOCK_A,SOCK_B", *attach)
			}
			for i := range socks {
				var err error
				if socks[i], err = rundir.Socket(socks[i]); err != nil {
					return fmt.Errorf("--attach: %w", err)
				}
			}
			pp = attachPair(socks[0], socks[1])
		} else {
			if lo.fault != "" || lo.pcap != "" {
				return fmt.Errorf("--link shm: --fault and --pcap apply to the in-process pair only")
			}
			dir, rm, err := shmTempDir()
			if err != nil {
				return err
			}
			defer rm()
			pp = shmPair(dir, *payload, *keyFile, *check, !*noBind)
		}
		res, respVerified, err := initiateProcess(pp, fs, *verify, pl, progress)
		if err != nil {
			return err
		}
		if lo.kind == "shm" && lo.key != "" {
			for i := range res {
				res[i].Keyed = true
			}
		}
		bound := len(res) > 0 && res[0].Bound
		if bound {
			pp.title += ", each bound to a CPU of its own (--no-bind: unbound)"
		}
		// The floors this run is judged against, on the machine as it is
		// now, with the daemon idle; bound as the device's processes were
		// (those that fit), so the ratios compare like with like.
		raw, err := pingpong.RawBaselines(*rawTime, pp.bind, progress)
		if err != nil {
			return err
		}
		if lo.kind == "shm" { // the ceiling of moving link memory, for the 1 MiB ratio
			size := min(*maxSize, 1<<20)
			raw = append(raw, pingpong.Result{Mode: pingpong.ModeRaw, Condition: pingpong.CondMemcpy, Size: size, MBps: pingpong.RawMemcpy(size, 200)})
		}
		var local []pingpong.Result
		if *compare {
			if local, err = runInProcess(lo, *maxSize, *verify, pl, progress); err != nil {
				return err
			}
		}
		progress("")
		if *asJSON {
			return pingpong.WriteJSON(os.Stdout, slices.Concat(res, raw, local), *linkKind)
		}
		pingpong.PrintTable(os.Stdout, pp.title, res)
		pingpong.PrintRaw(os.Stdout, res, raw)
		if lo.kind == "shm" {
			pingpong.PrintBaseline(os.Stdout, res, rawOf(raw, pingpong.CondWord).RTTHalfP50Us, rawOf(raw, pingpong.CondMemcpy).MBps)
		}
		if *verify {
			fmt.Printf("payloads verified byte for byte: %d by the initiator, %d by the responder\n", pingpong.VerifiedIn(res), respVerified)
		}
		if *compare {
			fmt.Println()
			pingpong.PrintTable(os.Stdout, "embedded two-node in-process devices", local)
			pingpong.PrintRatio(os.Stdout, res, local)
		}
		return nil
	case *breakdown:
		sides, closeFn, err := localPair(lo, *maxSize, false)
		if err != nil {
			return err
		}
		defer closeFn()
		b, err := pingpong.Breakdown(sides[0], sides[1], *iters, progress)
		if err != nil {
			return err
		}
		progress("")
		if *asJSON {
			return pingpong.WriteJSON(os.Stdout, b, *linkKind)
		}
		pingpong.PrintBreakdown(os.Stdout, b)
		return nil
	}
	var lossless, unkeyed []pingpong.Result
	if lo.key != "" {
		// What authentication costs needs the same sizes without a key,
		// on the same medium, in this run.
		plain := lo
		plain.key, plain.pcap = "", ""
		var err error
		if unkeyed, err = runInProcess(plain, *maxSize, *verify, pl, func(s string) { progress("unkeyed baseline: " + s) }); err != nil {
			return fmt.Errorf("unkeyed baseline: %w", err)
		}
	}
	if lo.fault != "" {
		// What the faults cost needs the same sizes without them, on the
		// same medium, in this run.
		clean := lo
		clean.fault, clean.pcap = "", ""
		var err error
		if lossless, err = runInProcess(clean, *maxSize, *verify, pl, func(s string) { progress("lossless baseline: " + s) }); err != nil {
			return fmt.Errorf("lossless baseline: %w", err)
		}
	}
	res, err := runInProcess(lo, *maxSize, *verify, pl, progress)
	if err != nil {
		return err
	}
	if lo.fault != "" {
		for i := range res {
			res[i].Fault = lo.fault
		}
		if err := pingpong.AddBaseline(res, lossless); err != nil {
			return err
		}
	}
	if lo.key != "" {
		for i := range res {
			res[i].Keyed = true
		}
		if err := pingpong.AddKeyBaseline(res, unkeyed); err != nil {
			return err
		}
	}
	if *asJSON {
		progress("")
		return pingpong.WriteJSON(os.Stdout, res, *linkKind)
	}
	progress("raw baselines: word ping-pong through shared memory, memcpy")
	raw := pingpong.RawWordPingPong(20000)
	cp := pingpong.RawMemcpy(min(*maxSize, 1<<20), 200)
	progress("")
	if lo.fault != "" {
		pingpong.PrintTable(os.Stdout, "embedded two-node in-process devices, link "+lo.kind+", no faults (the baseline)", lossless)
		fmt.Println()
		pingpong.PrintTable(os.Stdout, "embedded two-node in-process devices, link "+lo.kind+", faults "+lo.fault, res)
		pingpong.PrintLossRatio(os.Stdout, res)
	} else {
		title := "embedded two-node in-process devices, link " + lo.kind
		if lo.key != "" {
			pingpong.PrintTable(os.Stdout, title+", no key (the baseline)", unkeyed)
			fmt.Println()
			title += ", every frame authenticated (--key)"
		}
		pingpong.PrintTable(os.Stdout, title, res)
	}
	if lo.key != "" {
		pingpong.PrintKeyRatio(os.Stdout, res)
	}
	pingpong.PrintBaseline(os.Stdout, res, raw, cp)
	var rec pingpong.Recovery
	for _, r := range res {
		rec.Retransmits += r.Retransmits
		rec.Timeouts += r.Timeouts
		rec.Duplicates += r.Duplicates
		rec.CRCFail += r.CRCFail
		rec.Violations += r.Violations
	}
	if lo.check {
		fmt.Printf("checked devices: %d violations of the datasheet by the drivers\n", rec.Violations)
		rec.Violations = 0
	}
	if rec != (pingpong.Recovery{}) || lo.fault != "" {
		fmt.Printf("link recovery: %d retransmits, %d timeouts, %d duplicates dropped, %d CRC failures\n", rec.Retransmits, rec.Timeouts, rec.Duplicates, rec.CRCFail)
	}
	if *verify {
		fmt.Printf("payloads verified byte for byte: %d messages, both directions, warm-up included (timings include the check)", pingpong.VerifiedIn(res))
		if lo.fault != "" {
			fmt.Printf("; %d more in the lossless baseline", pingpong.VerifiedIn(lossless))
		}
		fmt.Println()
	}
	return nil
}

// localPair is the embedded default: two in-process devices, nodes 1 and
// 2, on the link lo describes, verifying every payload if asked.
func localPair(lo linkOpts, maxSize int, verify bool) ([2]*pingpong.Side, func(), error) {
	interrupt.Catch() // before a namespace is made: its removal is registered below
	var sides [2]*pingpong.Side
	open, undo, err := lo.ports()
	if err != nil {
		return sides, nil, err
	}
	l, err := vdev.NewLocalPorts(vdev.Config{Check: lo.check}, []uint16{1, 2}, open)
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

func runInProcess(lo linkOpts, maxSize int, verify bool, pl []pingpong.Step, progress func(string)) ([]pingpong.Result, error) {
	sides, closeFn, err := localPair(lo, maxSize, verify)
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
		r.Link = lo.kind
		res = append(res, r)
	}
	return res, nil
}

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

// testHookRunning, when set (tests only), runs once both processes of a
// two-process run are ready (and bound, if they are), before the plan.
var testHookRunning func(responder int)

// attachPair runs two processes attached to a daemon's devices.
func attachPair(sockA, sockB string) procPair {
	return procPair{
		open:      func() (*driver.Driver, func(), error) { return dialDevice(sockA) },
		responder: []string{"--responder", sockB}, where: sockB,
		path: "process", title: "two processes attached to dimmnet serve",
	}
}

// dialDevice attaches to a daemon's device.
func dialDevice(sock string) (*driver.Driver, func(), error) {
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
// responder on the other, and runs the plan against it. It also returns
// how many messages the responder verified.
func initiateProcess(pp procPair, fs *flag.FlagSet, verify bool, pl []pingpong.Step, progress func(string)) ([]pingpong.Result, int, error) {
	d, release, err := pp.open()
	if err != nil {
		return nil, 0, err
	}
	defer release()
	exe, err := os.Executable()
	if err != nil {
		return nil, 0, fmt.Errorf("find own executable: %w", err)
	}
	maxSize, iters := fs.Lookup("max").Value.String(), fs.Lookup("iters").Value.String()
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
	cmd := exec.Command(exe, slices.Concat([]string{"pingpong"}, respArgs, []string{"--peer", fmt.Sprint(d.Node()), "--max", maxSize, "--iters", iters,
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
	if testHookRunning != nil {
		testHookRunning(cmd.Process.Pid)
	}
	a := &pingpong.Side{D: d, Peer: uint16(peer), Verify: verify}
	defer stopOnSignal(a)()
	max, _ := strconv.Atoi(maxSize)
	if err := pingpong.SetupSide(a, max); err != nil {
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
// not -1, set up, say ready, serve the plan (each measurement's timed
// count read from stdin, as the initiator chose it), say how many
// messages it verified.
func respondProcess(open func() (*driver.Driver, func(), error), peer, maxSize int, verify bool, cpu int, pl []pingpong.Step) error {
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
	fmt.Printf("ready %d\n", d.Node())
	in := bufio.NewReader(os.Stdin)
	count := func() (int, error) {
		var n int
		if _, err := fmt.Fscanf(in, "%d\n", &n); err != nil {
			return 0, fmt.Errorf("read from the initiator: %w", err)
		}
		return n, nil
	}
	for _, st := range pl {
		if err := pingpong.RespondFor(b, st.Mode, st.Cond, st.Size, st.Budget.Warm, count); err != nil {
			return err
		}
	}
	fmt.Printf("verified %d\n", b.Verified)
	return nil
}

// progressLine returns a function that shows progress on stderr: one line
// rewritten in place on a terminal, plain lines (a few) otherwise, nothing
// with quiet. An empty message clears the line.
func progressLine(quiet bool) func(string) {
	if quiet {
		return func(string) {}
	}
	if _, err := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS); err == nil {
		return func(s string) { fmt.Fprintf(os.Stderr, "\r\033[K%s", s) }
	}
	last := time.Time{}
	return func(s string) {
		if s != "" && time.Since(last) > 2*time.Second {
			last = time.Now()
			fmt.Fprintln(os.Stderr, s)
		}
	}
}

// processBreakdown is --breakdown between two processes (--attach, --link
// shm): the responder sends its stamps back over perf's control stream;
// both read the host's monotonic clock.
func processBreakdown(attach string, payload, iters int, bind, asJSON bool, progress func(string)) error {
	var p *perf.Pair
	var err error
	if attach != "" {
		p, err = perfAttach(attach, 8)
	} else {
		p, err = perfShm(payload, 8, bind)
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
		return pingpong.WriteJSON(os.Stdout, b)
	}
	fmt.Printf("two processes (%s, %s)\n", p.Medium, p.Binding)
	pingpong.PrintBreakdown(os.Stdout, b)
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
