package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/perf"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/driver/pingpong/pairs"
	"github.com/dimmnet/dimmnet/internal/interrupt"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
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
		return perfServe(f.link, f.ifname, f.port, f.payload, maxNeed, progress)
	case role == "targets":
		return perfTargets(f.per, f.asJSON, !f.noBind, progress)
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
	if f.size > 0 {
		o.Sizes = []int{f.size}
		return o
	}
	for _, s := range pingpong.Sizes(f.maxSize) {
		if f.sweep || s == 8 || s == f.maxSize || isPow8(s) {
			o.Sizes = append(o.Sizes, s)
		}
	}
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
		p, err = perfDialHost(host, f.link, f.ifname, f.port, f.payload, maxNeed)
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
		peers, err := perfPeers(medium, o, f.noOMPI, p.Binding == "bound", progress)
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

// isPow8 says whether n is a power of 8 (the sweep's default sizes).
func isPow8(n int) bool {
	for n > 1 && n%8 == 0 {
		n /= 8
	}
	return n == 1
}

// perfPeers measures the same-run peers of a medium: the raw floors and
// Open MPI (vader and tcp) with the OSU window.
func perfPeers(medium string, o perf.Options, noOMPI, bind bool, progress func(string)) ([]perf.Record, error) {
	var bwSizes []int
	if slices.Contains(o.Patterns, perf.PatternBW) {
		bwSizes = o.Sizes
	}
	progress("raw floors: word ping-pong, memcpy")
	recs, err := perf.Raw(medium, bwSizes, o.Time, bind)
	if err != nil {
		return nil, err
	}
	if noOMPI {
		return recs, nil
	}
	progress("Open MPI: vader and tcp, lat, bw and rate (window 64)")
	om, err := perf.OMPI(o.Sizes, perf.DefaultPeerWindow, o.Time)
	if err != nil {
		fmt.Fprintf(os.Stderr, "perf: Open MPI peers: %v\n", err)
		return recs, nil
	}
	return append(recs, om...), nil
}

// crossDevice opens this host's device as node on medium udp (listening
// on udpAddr, its peer at peerAddr) or afpacket (on ifname).
func crossDevice(node uint16, medium, ifname, udpAddr, peerAddr string, payload int) (*driver.Driver, func(), error) {
	peerNode := 3 - node
	l, err := vdev.NewLocalPorts(vdev.Config{}, []uint16{node}, func(d *vdev.Device) (link.Port, error) {
		switch medium {
		case "udp":
			mtu := min(payload, 65507-wire.FrameOverhead) + wire.FrameOverhead
			return link.ListenUDP(udpAddr, d.MAC(), map[string]string{wire.NodeMAC(peerNode).String(): peerAddr}, mtu)
		case "afpacket":
			if ifname == "" {
				return nil, fmt.Errorf("--link afpacket needs --ifname")
			}
			return link.OpenAFPacket(ifname, d.MAC())
		}
		return nil, fmt.Errorf("--link %q: across hosts, want udp or afpacket", medium)
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

// freeUDPPort reserves a UDP port on ip for the device to listen on.
func freeUDPPort(ip string) (string, error) {
	c, err := net.ListenPacket("udp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", err
	}
	a := c.LocalAddr().String()
	c.Close()
	return a, nil
}

// The cross-host hello on the TCP control connection: the client is node
// 1 and says "hello 1 MEDIUM UDPPORT"; the server, node 2, answers
// "hello 2 UDPPORT" once its device is open. Then the control protocol
// of package perf runs on the same connection.

// perfServe waits for one initiator at a time and serves its session.
func perfServe(medium, ifname string, port, payload, maxSize int, progress func(string)) error {
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Fprintf(os.Stderr, "perf serve: waiting on %v (--link %s)\n", ln.Addr(), medium)
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		if err := serveOne(c, medium, ifname, payload, maxSize); err != nil {
			fmt.Fprintf(os.Stderr, "perf serve: %v: %v\n", c.RemoteAddr(), err)
		}
		c.Close()
	}
}

func serveOne(c net.Conn, medium, ifname string, payload, maxSize int) error {
	in := bufio.NewReader(c)
	var node, peerPort int
	var peerMedium string
	line, err := in.ReadString('\n')
	if err != nil {
		return err
	}
	if _, err := fmt.Sscanf(line, "hello %d %s %d", &node, &peerMedium, &peerPort); err != nil || node != 1 {
		return fmt.Errorf("bad hello %q", line)
	}
	if peerMedium != medium {
		fmt.Fprintf(c, "err the server runs --link %s, not %s\n", medium, peerMedium)
		return fmt.Errorf("the client asked for --link %s", peerMedium)
	}
	lhost, _, _ := net.SplitHostPort(c.LocalAddr().String())
	rhost, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	udpAddr, err := freeUDPPort(lhost)
	if err != nil {
		return err
	}
	d, release, err := crossDevice(2, medium, ifname, udpAddr, net.JoinHostPort(rhost, strconv.Itoa(peerPort)), payload)
	if err != nil {
		fmt.Fprintf(c, "err %v\n", err)
		return err
	}
	defer release()
	b := &pingpong.Side{D: d, Peer: 1}
	if err := pingpong.SetupSide(b, maxSize); err != nil {
		return err
	}
	_, p, _ := net.SplitHostPort(udpAddr)
	fmt.Fprintf(c, "hello 2 %s\n", p)
	return perf.Serve(b, rw{in, c})
}

// rw joins a buffered reader with the connection it reads.
type rw struct {
	*bufio.Reader
	net.Conn
}

func (x rw) Read(p []byte) (int, error) { return x.Reader.Read(p) }

// perfDialHost opens this host's device as node 1 and pairs it with
// host's perf serve.
func perfDialHost(host, medium, ifname string, port, payload, maxSize int) (*perf.Pair, error) {
	c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	lhost, _, _ := net.SplitHostPort(c.LocalAddr().String())
	rhost, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	udpAddr, err := freeUDPPort(lhost)
	if err != nil {
		c.Close()
		return nil, err
	}
	_, myPort, _ := net.SplitHostPort(udpAddr)
	fmt.Fprintf(c, "hello 1 %s %s\n", medium, myPort)
	in := bufio.NewReader(c)
	line, err := in.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("perf serve on %s: %w", host, err)
	}
	var peerPort int
	if _, err := fmt.Sscanf(line, "hello 2 %d", &peerPort); err != nil {
		c.Close()
		return nil, fmt.Errorf("perf serve on %s: %s", host, strings.TrimSpace(line))
	}
	d, release, err := crossDevice(1, medium, ifname, udpAddr, net.JoinHostPort(rhost, strconv.Itoa(peerPort)), payload)
	if err != nil {
		c.Close()
		return nil, err
	}
	a, err := pairs.SideSetup(d, maxSize)(2)
	if err != nil {
		release()
		c.Close()
		return nil, err
	}
	return perf.Remote(a, rw{in, c}, medium+" (hosts)").OnClose(func() error { release(); return nil }), nil
}

// perfTargets is issue 34's side-by-side run: the device in process, on
// shm and on udp, the raw floors and Open MPI, in one run, then the
// targets' ratios.
func perfTargets(per time.Duration, asJSON, bind bool, progress func(string)) error {
	lat8 := perf.Options{Patterns: []string{perf.PatternLat}, Ops: []string{pingpong.ModePush, pingpong.ModeIPush}, Conds: []string{pingpong.CondLinkMem}, Sizes: []int{8}, Time: per}
	streams := perf.Options{Patterns: []string{perf.PatternRate, perf.PatternBW}, Ops: []string{pingpong.ModePush}, Conds: []string{pingpong.CondLinkMem},
		Sizes: []int{64 << 10, 1 << 20}, Window: perf.DefaultPeerWindow, Time: per}
	var recs []perf.Record
	run := func(po pairOrErr, os ...perf.Options) error {
		p, err := po.p, po.err
		if err != nil {
			return err
		}
		for _, o := range os {
			r, err := perf.Run(p, o, progress)
			if err != nil {
				p.Close()
				return err
			}
			recs = append(recs, r...)
		}
		return p.Close()
	}
	if err := run(withOpts(pairs.PerfLocal(pairs.Link{Kind: "mem", Payload: vdev.DefaultHubPayload}, 1<<20)), lat8, streams); err != nil {
		return fmt.Errorf("mem: %w", err)
	}
	if err := run(withOpts(pairs.PerfShm(vdev.DefaultHubPayload, 1<<20, bind)), lat8, streams); err != nil {
		return fmt.Errorf("shm: %w", err)
	}
	if err := run(withOpts(pairs.PerfLocal(pairs.Link{Kind: "udp", Payload: vdev.DefaultHubPayload}, 1<<20)), lat8); err != nil {
		return fmt.Errorf("udp: %w", err)
	}
	progress("raw floors")
	raw, err := perf.Raw("udp", streams.Sizes, per, bind)
	if err != nil {
		return err
	}
	recs = append(recs, raw...)
	progress("Open MPI: vader and tcp")
	om, err := perf.OMPI([]int{8, 64 << 10, 1 << 20}, perf.DefaultPeerWindow, per)
	if err != nil {
		fmt.Fprintf(os.Stderr, "perf targets: Open MPI peers: %v\n", err)
	}
	recs = append(recs, om...)
	progress("")
	if asJSON {
		return pingpong.WriteJSON(os.Stdout, recs)
	}
	perf.Print(os.Stdout, recs)
	perf.PrintTargets(os.Stdout, perf.Targets(recs))
	return nil
}

// pairOrErr carries an opener's two results into a call.
type pairOrErr struct {
	p   *perf.Pair
	err error
}

func withOpts(p *perf.Pair, err error) pairOrErr { return pairOrErr{p, err} }
