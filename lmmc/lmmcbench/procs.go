// Package lmmcbench runs LMMC's benchmark with every node in a process of
// its own, on its own device and driver, paging over a real medium (the
// shared-memory link or UDP), as the paper's nodes paged over the network;
// a node's client processes stay inside it, since they share its tables.
// It is apart from the library because it embeds devices (vdev) and
// launches processes; Bench runs the same patterns in one process.
package lmmcbench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/lmmc"
)

// Links lists the media Procs runs its nodes over.
var Links = []string{"shm", "udp"}

// ErrLink is returned for a medium Procs does not run on.
var ErrLink = errors.New("lmmcbench: unknown link")

// ErrNodeFailed reports a node process that failed or reported nothing.
var ErrNodeFailed = errors.New("lmmcbench: a node process failed")

const roleNode = "lmmc-node"

func init() { subproc.Register(roleNode, childNode) }

// barrierPrefix starts the line a node prints when it reaches a stage of
// BenchNode's barrier; the launcher answers with a line on every
// node's stdin once all of them have printed it.
const barrierPrefix = "barrier "

// limit is how long a run across processes may take before its nodes are
// killed: far beyond any pattern's rounds, short of a hung test.
const limit = 5 * time.Minute

// Procs runs one Bench pattern under policy with each node a process
// of this executable on medium linkName ("shm" or "udp"), and returns the
// merged result held to MergeReports's checks (the pair check across
// processes included). A test binary must call subproc.Main in TestMain.
func Procs(policy, pattern string, ports, frames int, cfg BenchConfig, linkName string) (BenchResult, error) {
	r := BenchResult{Policy: policy, Pattern: pattern, Ports: ports, Frames: frames}
	if linkName != "shm" && linkName != "udp" {
		return r, fmt.Errorf("%w: %q (have %v)", ErrLink, linkName, Links)
	}
	if cfg.Capture != nil {
		return r, fmt.Errorf("lmmcbench: a capture records one process's devices: %w", lmmc.ErrConfig)
	}
	nodes := BenchNodes(pattern, cfg)
	dir, err := os.MkdirTemp("", "lmmc-procs-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	peers, _, err := ranks.LocalMedium(linkName, dir, "dimmnet-lmmc-", nodes)
	if err != nil {
		return r, err
	}
	cmds := make([]*exec.Cmd, nodes)
	ins := make([]io.WriteCloser, nodes)
	outs := make([]io.ReadCloser, nodes)
	for i := range cmds {
		c, err := subproc.Command(roleNode, dir+"/shm", peers, linkName, strconv.Itoa(i), strconv.Itoa(nodes), policy, pattern,
			strconv.Itoa(ports), strconv.Itoa(frames), strconv.Itoa(cfg.Rounds), strconv.Itoa(cfg.Size), strconv.FormatBool(cfg.Check))
		if err != nil {
			return r, err
		}
		if ins[i], err = c.StdinPipe(); err != nil {
			return r, err
		}
		if outs[i], err = c.StdoutPipe(); err != nil {
			return r, err
		}
		cmds[i] = c
	}
	if err := ranks.StartRanks(nil, cmds); err != nil {
		return r, err
	}
	// Each node's output: its barrier lines, then its report.
	type result struct {
		rep NodeReport
		err error
	}
	arrived := make(chan string, 2*nodes)
	results := make([]chan result, nodes)
	for i := range cmds {
		results[i] = make(chan result, 1)
		go func() {
			sc := bufio.NewScanner(outs[i])
			sc.Buffer(make([]byte, 1<<16), 1<<24)
			var res result
			res.err = fmt.Errorf("node %d reported nothing: %w", i+1, ErrNodeFailed)
			for sc.Scan() {
				l := strings.TrimSpace(sc.Text())
				switch {
				case strings.HasPrefix(l, barrierPrefix):
					arrived <- l
				case strings.HasPrefix(l, "{"):
					res.err = json.Unmarshal([]byte(l), &res.rep)
				}
			}
			io.Copy(io.Discard, outs[i])
			results[i] <- res
		}()
	}
	// The barriers: once every node has reached a stage, let them all go
	// on. A node that fails before one leaves the others waiting in vain,
	// so the run has a limit and the nodes are killed at it.
	go func() {
		count := map[string]int{}
		for l := range arrived {
			if count[l]++; count[l] == nodes {
				for _, in := range ins {
					fmt.Fprintln(in, "go")
				}
			}
		}
	}()
	defer close(arrived)
	defer func() {
		for _, in := range ins {
			in.Close()
		}
	}()
	// Every node's output is read to its end before its process is
	// waited for (Wait closes the pipe); a node that hangs is killed at
	// the run's limit, which ends its output.
	res := make([]result, nodes)
	deadline := time.After(limit)
	for i := range results {
		select {
		case res[i] = <-results[i]:
		case <-deadline:
			for _, c := range cmds {
				c.Process.Kill() // only the nodes started here
			}
			res[i] = <-results[i]
		}
	}
	errs := subproc.WaitAll(cmds, 0, nil)
	reps := make([]NodeReport, 0, nodes)
	var failed []error
	for i, e := range errs {
		res := res[i]
		if e != nil {
			failed = append(failed, fmt.Errorf("node %d: %v: %w", i+1, e, ErrNodeFailed))
			continue
		}
		if res.err != nil {
			failed = append(failed, res.err)
			continue
		}
		reps = append(reps, res.rep)
	}
	if len(failed) > 0 {
		return r, errors.Join(failed...)
	}
	return MergeReports(policy, pattern, ports, frames, reps)
}

// childNode is one node: it opens its device on the medium, runs its part
// of the pattern through BenchNode and prints its report.
func childNode(args []string) error {
	if len(args) != 12 {
		return fmt.Errorf("lmmc node: want 12 arguments, got %q", args)
	}
	num := func(i int) int { v, _ := strconv.Atoi(args[i]); return v }
	me, nodes := num(3), num(4)
	policy, pattern := args[5], args[6]
	ports, frames := num(7), num(8)
	cfg := BenchConfig{Rounds: num(9), Size: num(10), Check: args[11] == "true"}
	if pattern != "paper" && pattern != "pingpong" && pattern != "hot" {
		cfg.Nodes = nodes
	}
	dev, err := ranks.Open(ranks.Options{Link: args[2], Dir: args[0], Peers: args[1], Node: uint16(me + 1),
		RegionSize: 16 << 20, LocalRanks: nodes, Check: cfg.Check})
	if err != nil {
		return err
	}
	in := bufio.NewReader(os.Stdin)
	barrier := func(stage string) error {
		fmt.Println(barrierPrefix + stage)
		_, err := in.ReadString('\n')
		return err
	}
	rep, err := BenchNode(dev.Driver, me, policy, pattern, ports, frames, cfg, barrier)
	if err != nil {
		dev.Close()
		return err
	}
	if err := dev.Close(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(rep)
}
