package pairs

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/rundir"
)

// Options is one `dimmnet pingpong` run, as its flags say it.
type Options struct {
	Link              // the medium (Kind "shm": two processes on the shared-memory link)
	Max, Iters    int // largest message size; timed round trips (0: chosen by Time)
	Time, RawTime time.Duration
	Verify        bool      // compare every payload byte for byte
	VerifySet     bool      // Verify was given (else a run with Fault verifies)
	Breakdown     bool      // the stage breakdown of 8-byte messages, in process
	JSON          bool      // records as JSON instead of tables
	Compare       bool      // with Attach: also the in-process pair, and the ratios
	Bind          bool      // with shm: each process on a CPU of its own when two fit
	Attach        string    // "SOCK_A,SOCK_B": two processes attached to a daemon
	Responder     string    // run only the responder role on this socket
	ShmResponder  string    // run only the responder role on this shm directory
	Node, BindCPU int       // with ShmResponder: its node id, and its CPU (-1: unbound)
	Peer          int       // with a responder role: the initiator's node id
	Out           io.Writer // the tables or records (a responder's protocol lines)
	In            io.Reader // a responder's timed counts, from the initiator
	Progress      func(string)
	// Running, if not nil (tests), is called with the responder's pid once
	// both processes of a two-process run are ready, before the plan.
	Running func(pid int)
}

// Run is one `dimmnet pingpong` run: a responder role, two processes
// (attached or on the shared-memory link) with the raw baselines between
// processes, the in-process stage breakdown, or the in-process pair with
// its fault-free or unkeyed baseline, printed to o.Out.
func Run(o Options) error {
	if o.Breakdown && o.VerifySet && o.Verify {
		return fmt.Errorf("--verify does not apply to --breakdown (its traced stages time the plain hostcopy path)")
	}
	if !o.VerifySet && o.Fault != "" {
		o.Verify = true // a lossy run must prove it delivered the right bytes, not only some bytes
	}
	if o.Max < 8 || o.Max > 4<<20 || o.Time <= 0 || o.RawTime <= 0 {
		return fmt.Errorf("--max %d, --time %v, --raw-time %v: --max must be 8..4194304, the times positive", o.Max, o.Time, o.RawTime)
	}
	pl := pingpong.NewPlan(o.Max, o.Iters, o.Time)
	switch {
	case o.Responder != "":
		return respondProcess(func() (*driver.Driver, func(), error) { return DialDevice(o.Responder) }, o.Peer, o.Max, o.Verify, -1, pl, o.In, o.Out)
	case o.ShmResponder != "":
		return respondProcess(func() (*driver.Driver, func(), error) {
			return ShmDevice(o.ShmResponder, uint16(o.Node), o.Payload, o.Key, o.Check)
		}, o.Peer, o.Max, o.Verify, o.BindCPU, pl, o.In, o.Out)
	case o.Breakdown && (o.Attach != "" || o.Kind == "shm"):
		return processBreakdown(o)
	case o.Attach != "" || o.Kind == "shm":
		return runProcesses(o, pl)
	case o.Breakdown:
		return runBreakdown(o)
	}
	return runInProcess(o, pl)
}

// runProcesses is two processes, attached to a daemon or on the
// shared-memory link, then the raw baselines between processes (bound as
// they were), and with Compare the in-process pair.
func runProcesses(o Options, pl []pingpong.Step) error {
	var pp procPair
	if o.Attach != "" {
		socks := strings.Split(o.Attach, ",")
		if len(socks) != 2 {
			return fmt.Errorf("--attach %q: want SOCK_A,SOCK_B", o.Attach)
		}
		for i := range socks {
			var err error
			if socks[i], err = rundir.Socket(socks[i]); err != nil {
				return fmt.Errorf("--attach: %w", err)
			}
		}
		pp = attachPair(socks[0], socks[1])
	} else {
		if o.Fault != "" || o.Pcap != "" {
			return fmt.Errorf("--link shm: --fault and --pcap apply to the in-process pair only")
		}
		dir, rm, err := shmTempDir()
		if err != nil {
			return err
		}
		defer rm()
		pp = shmPair(dir, o.Payload, o.Key, o.Check, o.Bind)
	}
	res, respVerified, err := initiateProcess(pp, o.Max, o.Iters, o.Verify, pl, o.Progress, o.Running)
	if err != nil {
		return err
	}
	if o.Kind == "shm" && o.Key != "" {
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
	raw, err := pingpong.RawBaselines(o.RawTime, pp.bind, o.Progress)
	if err != nil {
		return err
	}
	if o.Kind == "shm" { // the ceiling of moving link memory, for the 1 MiB ratio
		size := min(o.Max, 1<<20)
		raw = append(raw, pingpong.Result{Mode: pingpong.ModeRaw, Condition: pingpong.CondMemcpy, Size: size, MBps: pingpong.RawMemcpy(size, 200)})
	}
	var local []pingpong.Result
	if o.Compare {
		if local, err = inProcess(o.Link, o.Max, o.Verify, pl, o.Progress); err != nil {
			return err
		}
	}
	o.Progress("")
	if o.JSON {
		return pingpong.WriteJSON(o.Out, slices.Concat(res, raw, local), o.Kind)
	}
	pingpong.PrintTable(o.Out, pp.title, res)
	pingpong.PrintRaw(o.Out, res, raw)
	if o.Kind == "shm" {
		pingpong.PrintBaseline(o.Out, res, rawOf(raw, pingpong.CondWord).RTTHalfP50Us, rawOf(raw, pingpong.CondMemcpy).MBps)
	}
	if o.Verify {
		fmt.Fprintf(o.Out, "payloads verified byte for byte: %d by the initiator, %d by the responder\n", pingpong.VerifiedIn(res), respVerified)
	}
	if o.Compare {
		fmt.Fprintln(o.Out)
		pingpong.PrintTable(o.Out, "embedded two-node in-process devices", local)
		pingpong.PrintRatio(o.Out, res, local)
	}
	return nil
}

// runBreakdown is the stage breakdown of 8-byte messages on the
// in-process pair.
func runBreakdown(o Options) error {
	sides, closeFn, err := Local(o.Link, o.Max, false)
	if err != nil {
		return err
	}
	defer closeFn()
	b, err := pingpong.Breakdown(sides[0], sides[1], o.Iters, o.Progress)
	if err != nil {
		return err
	}
	o.Progress("")
	if o.JSON {
		return pingpong.WriteJSON(o.Out, b, o.Kind)
	}
	pingpong.PrintBreakdown(o.Out, b)
	return nil
}

// runInProcess is the in-process pair on o's medium, after the same sizes
// without the faults or the key where those are on, with the raw floors.
func runInProcess(o Options, pl []pingpong.Step) error {
	var lossless, unkeyed []pingpong.Result
	if o.Key != "" {
		// What authentication costs needs the same sizes without a key,
		// on the same medium, in this run.
		plain := o.Link
		plain.Key, plain.Pcap = "", ""
		var err error
		if unkeyed, err = inProcess(plain, o.Max, o.Verify, pl, func(s string) { o.Progress("unkeyed baseline: " + s) }); err != nil {
			return fmt.Errorf("unkeyed baseline: %w", err)
		}
	}
	if o.Fault != "" {
		// What the faults cost needs the same sizes without them, on the
		// same medium, in this run.
		clean := o.Link
		clean.Fault, clean.Pcap = "", ""
		var err error
		if lossless, err = inProcess(clean, o.Max, o.Verify, pl, func(s string) { o.Progress("lossless baseline: " + s) }); err != nil {
			return fmt.Errorf("lossless baseline: %w", err)
		}
	}
	res, err := inProcess(o.Link, o.Max, o.Verify, pl, o.Progress)
	if err != nil {
		return err
	}
	if o.Fault != "" {
		for i := range res {
			res[i].Fault = o.Fault
		}
		if err := pingpong.AddBaseline(res, lossless); err != nil {
			return err
		}
	}
	if o.Key != "" {
		for i := range res {
			res[i].Keyed = true
		}
		if err := pingpong.AddKeyBaseline(res, unkeyed); err != nil {
			return err
		}
	}
	if o.JSON {
		o.Progress("")
		return pingpong.WriteJSON(o.Out, res, o.Kind)
	}
	o.Progress("raw baselines: word ping-pong through shared memory, memcpy")
	raw := pingpong.RawWordPingPong(20000)
	cp := pingpong.RawMemcpy(min(o.Max, 1<<20), 200)
	o.Progress("")
	if o.Fault != "" {
		pingpong.PrintTable(o.Out, "embedded two-node in-process devices, link "+o.Kind+", no faults (the baseline)", lossless)
		fmt.Fprintln(o.Out)
		pingpong.PrintTable(o.Out, "embedded two-node in-process devices, link "+o.Kind+", faults "+o.Fault, res)
		pingpong.PrintLossRatio(o.Out, res)
	} else {
		title := "embedded two-node in-process devices, link " + o.Kind
		if o.Key != "" {
			pingpong.PrintTable(o.Out, title+", no key (the baseline)", unkeyed)
			fmt.Fprintln(o.Out)
			title += ", every frame authenticated (--key)"
		}
		pingpong.PrintTable(o.Out, title, res)
	}
	if o.Key != "" {
		pingpong.PrintKeyRatio(o.Out, res)
	}
	pingpong.PrintBaseline(o.Out, res, raw, cp)
	var rec pingpong.Recovery
	for _, r := range res {
		rec.Retransmits += r.Retransmits
		rec.Timeouts += r.Timeouts
		rec.Duplicates += r.Duplicates
		rec.CRCFail += r.CRCFail
		rec.Violations += r.Violations
	}
	if o.Check {
		fmt.Fprintf(o.Out, "checked devices: %d violations of the datasheet by the drivers\n", rec.Violations)
		rec.Violations = 0
	}
	if rec != (pingpong.Recovery{}) || o.Fault != "" {
		fmt.Fprintf(o.Out, "link recovery: %d retransmits, %d timeouts, %d duplicates dropped, %d CRC failures\n", rec.Retransmits, rec.Timeouts, rec.Duplicates, rec.CRCFail)
	}
	if o.Verify {
		fmt.Fprintf(o.Out, "payloads verified byte for byte: %d messages, both directions, warm-up included (timings include the check)", pingpong.VerifiedIn(res))
		if o.Fault != "" {
			fmt.Fprintf(o.Out, "; %d more in the lossless baseline", pingpong.VerifiedIn(lossless))
		}
		fmt.Fprintln(o.Out)
	}
	return nil
}
