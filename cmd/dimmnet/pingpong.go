package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong/pairs"
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
	progress := progressLine(*quiet || *responder != "" || *shmResponder != "")
	defer progress("")
	return pairs.Run(pairs.Options{
		Link: pairs.Link{Kind: *linkKind, Payload: *payload, Fault: *faultSpec, Pcap: *pcapFile, Key: *keyFile, Check: *check},
		Max:  *maxSize, Iters: *iters, Time: *runTime, RawTime: *rawTime,
		Verify: *verify, VerifySet: verifySet, Breakdown: *breakdown, JSON: *asJSON, Compare: *compare, Bind: !*noBind,
		Attach: *attach, Responder: *responder, ShmResponder: *shmResponder,
		Node: *node, BindCPU: *bindCPU, Peer: *peer,
		Out: os.Stdout, In: os.Stdin, Progress: progress,
	})
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
