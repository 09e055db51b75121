package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/perf"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/driver/pingpong/pairs"
	"github.com/dimmnet/dimmnet/internal/interrupt"
	"github.com/dimmnet/dimmnet/vdev"
)

const perfUsage = `usage: dimmnet perf [lat|bw|rate|all] [flags]       measure a device pair here
       dimmnet perf serve [--link udp|afpacket] [flags]  wait for another host's perf
       dimmnet perf HOST [lat|bw|rate|all] [flags]       measure against HOST's perf serve
       dimmnet perf targets [flags]                      issue 34's side-by-side table

lat: ping-pong RTT/2 with min, median, mean, p99, p99.9, max and stdev
     (perftest's ib_write_lat, osu_latency); bw: a window of messages in
     flight, MB/s and messages/s (ib_write_bw, osu_bw; --bidir: osu_bibw);
     rate: 8-byte messages in windows (osu_mbw_mr). The raw floors and Open
     MPI (vader and tcp) run the same patterns in the same run.
`

// perfFlags are perf's flags.
type perfFlags struct {
	link, attach, ops, conds, ifname, shmResponder, responder string
	size, maxSize, window, payload, port, node, peer, bindCPU int
	sweep, bidir, asJSON, noPeers, noOMPI, checkData, quiet   bool
	noBind                                                    bool
	per                                                       time.Duration
}

func newPerfFlags(fs *flag.FlagSet) *perfFlags {
	f := &perfFlags{}
	fs.StringVar(&f.link, "link", "mem", "what carries the frames: mem, udp, afpacket, tap (in-process pair), shm (two processes), or for serve/HOST udp (their default) or afpacket")
	fs.StringVar(&f.attach, "attach", "", "SOCK_A,SOCK_B: two processes attached to a running dimmnet serve")
	fs.IntVar(&f.size, "s", 0, "one message size (0: a sweep of 8 B .. --max, by 8x)")
	fs.IntVar(&f.maxSize, "max", 1<<20, "largest size of the sweep")
	fs.BoolVar(&f.sweep, "sweep", false, "every power of two of the sweep, not every 8x")
	fs.StringVar(&f.ops, "op", "push,ipush", "push, ipush or both")
	fs.StringVar(&f.conds, "cond", "linkmem,hostcopy", "the receiver's condition: linkmem, hostcopy or both (see pingpong)")
	fs.IntVar(&f.window, "window", 0, "bw and rate: messages in flight (0: the device's MAX_INFLIGHT; the Open MPI peers use 64)")
	fs.BoolVar(&f.bidir, "bidir", false, "bw in both directions at once (osu_bibw)")
	fs.DurationVar(&f.per, "time", time.Second, "about how long each measurement's timed part takes")
	fs.BoolVar(&f.asJSON, "json", false, "print JSON records (one array)")
	fs.BoolVar(&f.noPeers, "no-peers", false, "measure the device only: no raw floors, no Open MPI")
	fs.BoolVar(&f.noOMPI, "no-ompi", false, "no Open MPI peers")
	fs.BoolVar(&f.checkData, "check-data", false, "receivers compare every payload they copy out with what was sent (timings include it)")
	fs.BoolVar(&f.quiet, "q", false, "no progress line")
	fs.IntVar(&f.payload, "mtu", vdev.DefaultHubPayload, "packet payload in bytes (mem, udp, shm)")
	fs.BoolVar(&f.noBind, "no-bind", false, "with --link shm: leave the two processes where the scheduler puts them")
	fs.IntVar(&f.port, "port", 18515, "serve/HOST: the TCP control port")
	fs.StringVar(&f.ifname, "ifname", "", "serve/HOST with --link afpacket: the interface")
	fs.StringVar(&f.shmResponder, "shm-responder", "", "(internal) the responder process on this shared-memory link directory")
	fs.StringVar(&f.responder, "responder", "", "(internal) the responder process attached to this daemon socket")
	fs.IntVar(&f.node, "node", 2, "(internal) with --shm-responder: this process's node id")
	fs.IntVar(&f.peer, "peer", -1, "(internal) the initiator's node id")
	fs.IntVar(&f.bindCPU, "bind-cpu", -1, "(internal) bind the responder to this CPU once its device is open")
	return f
}

// perfRole splits perf's leading words: a pattern or a role, or a host
// and then perhaps a pattern.
func perfRole(args []string) (role, host string, rest []string) {
	role = "all"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		role, args = args[0], args[1:]
		switch role {
		case "lat", "bw", "rate", "all", "serve", "targets":
		default:
			host, role = role, "all"
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				role, args = args[0], args[1:]
			}
		}
	}
	return role, host, args
}

// perfCmd parses perf's flags and runs one of its roles.
func perfCmd(args []string) error {
	fs := flag.NewFlagSet("perf", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), perfUsage); fs.PrintDefaults() }
	f := newPerfFlags(fs)
	role, host, args := perfRole(args)
	if err := fs.Parse(args); err != nil {
		return err
	}
	linkSet := false
	fs.Visit(func(fl *flag.Flag) { linkSet = linkSet || fl.Name == "link" })
	if !linkSet && (host != "" || role == "serve") {
		f.link = "udp" // across hosts: mem and shm stay on one
	}
	maxNeed := max(f.maxSize, f.size)
	if maxNeed < 8 || maxNeed > 4<<20 {
		return fmt.Errorf("--max/-s %d: must be 8..4194304", maxNeed)
	}
	progress := progressLine(f.quiet || f.shmResponder != "" || f.responder != "")
	defer progress("")
	if f.responder == "" && f.shmResponder == "" {
		interrupt.Catch() // a signal from here on stops the measurement before teardown
	}
	switch {
	case f.shmResponder != "":
		return pairs.PerfChild(func() (*driver.Driver, func(), error) {
			return pairs.ShmDevice(f.shmResponder, uint16(f.node), f.payload, "", false)
		}, f.peer, maxNeed, f.bindCPU)
	case f.responder != "":
		return pairs.PerfChild(func() (*driver.Driver, func(), error) { return pairs.DialDevice(f.responder) }, f.peer, maxNeed, -1)
	case role == "serve":
		return pairs.PerfServe(f.link, f.ifname, f.port, f.payload, maxNeed, progress)
	case role == "targets":
		return perf.RunTargets(os.Stdout, perfOpener(!f.noBind), f.per, f.asJSON, !f.noBind, progress)
	}
	return perfMeasure(f, role, host, maxNeed, progress)
}

// perfOptions are the measurements the flags ask for.
func perfOptions(f *perfFlags, role string) perf.Options {
	o := perf.Options{Window: f.window, Bidir: f.bidir, Time: f.per, Check: f.checkData,
		Patterns: []string{role}, Ops: strings.Split(f.ops, ","), Conds: strings.Split(f.conds, ",")}
	if role == "all" {
		o.Patterns = []string{perf.PatternLat, perf.PatternBW, perf.PatternRate}
	}
	o.Sizes = perf.Sizes(f.size, f.maxSize, f.sweep)
	return o
}

// perfMeasure opens the pair the flags name, measures it, adds the
// same-run peers and prints.
func perfMeasure(f *perfFlags, role, host string, maxNeed int, progress func(string)) error {
	o := perfOptions(f, role)
	medium := f.link
	var p *perf.Pair
	var err error
	switch {
	case host != "":
		p, err = pairs.PerfDialHost(host, f.link, f.ifname, f.port, f.payload, maxNeed)
	case f.attach != "":
		medium = "attach"
		p, err = pairs.PerfAttach(f.attach, maxNeed)
	case f.link == "shm":
		p, err = pairs.PerfShm(f.payload, maxNeed, !f.noBind)
	default:
		p, err = pairs.PerfLocal(pairs.Link{Kind: f.link, Payload: f.payload}, maxNeed)
	}
	if err != nil {
		return err
	}
	recs, err := perf.Run(p, o, progress)
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if !f.noPeers && host == "" {
		peers, err := perf.Peers(medium, o, f.noOMPI, p.Binding == "bound", progress)
		if err != nil {
			return err
		}
		recs = append(recs, peers...)
	}
	progress("")
	if f.asJSON {
		return pingpong.WriteJSON(os.Stdout, recs)
	}
	perf.Print(os.Stdout, recs)
	return nil
}

// perfOpener opens perf targets' pairs: in process on mem and udp, two
// processes on shm.
func perfOpener(bind bool) perf.Opener {
	return func(medium string) (*perf.Pair, error) {
		if medium == "shm" {
			return pairs.PerfShm(vdev.DefaultHubPayload, 1<<20, bind)
		}
		return pairs.PerfLocal(pairs.Link{Kind: medium, Payload: vdev.DefaultHubPayload}, 1<<20)
	}
}
