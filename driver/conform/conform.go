// Package conform runs a user's driver program against a checked device
// pair in each situation a driver must survive, and judges it: the
// sandbox's conformance run (`dimmnet conform -- CMD ARGS`). Each
// situation is a fresh daemon (`dimmnet serve --check`, started through
// the Daemon function the caller gives), with the socket directory in
// DIMMNET_DIR (devices node0 and node1); the program runs once per
// situation and passes when it exits 0 in time with no violation, or,
// where the device stops or the peer is gone, exits in time with a
// message rather than hanging.
package conform

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// Situation is one set-up a driver runs in.
type Situation struct {
	Name string
	What string // what it exercises, for the table's reader
	// serve's flags for each daemon (one daemon: both nodes; two: node 0
	// and node 1 joined by UDP)
	Serve [][]string
	// Before waits before the program starts (the device falls asleep).
	Before time.Duration
	// StopAfter, when set, stops the daemons (SIGTERM) this long after the
	// program starts: the device goes away under it.
	StopAfter time.Duration
	// Failing: the situation ends the device or the peer, so a program that
	// exits non-zero with a message passes too.
	Failing bool
}

// Situations are the ones `dimmnet conform` runs, in order.
func Situations() []Situation {
	one := func(extra ...string) [][]string { return [][]string{append([]string{"--nodes", "2"}, extra...)} }
	return []Situation{
		{Name: "plain", What: "two devices on one daemon, nothing special", Serve: one()},
		{Name: "slow-completions", What: "every frame delayed 5 ms: completions come late", Serve: one("--fault", "delay=5ms")},
		{Name: "sleeping-device", What: "the device sleeps when the driver starts: a doorbell is needed", Serve: one(), Before: 300 * time.Millisecond},
		{Name: "status-ring-full", What: "2-entry status rings: the driver must consume statuses and publish its head as it goes", Serve: one("--statq", "2")},
		{Name: "ring-full-hold", What: "RINGFULL_MODE hold (the default) set by the device", Serve: one("--ringfull", "hold")},
		{Name: "ring-full-nack", What: "RINGFULL_MODE NACK set by the device", Serve: one("--ringfull", "nack")},
		{Name: "peer-unreachable", What: "node 1 drops every frame: commands to it fail UNREACHABLE", Failing: true},
		{Name: "device-stops", What: "frames delayed 100 ms, and the daemon stops 150 ms into the run: STATE 2, peer 0 leaves", Serve: one("--fault", "delay=100ms"), StopAfter: 150 * time.Millisecond, Failing: true},
	}
}

// Result is one situation's verdict (a --json record).
type Result struct {
	Situation  string   `json:"situation"`
	Pass       bool     `json:"pass"`
	Verdict    string   `json:"verdict"` // passed, failed: exit N, hung, violations
	Exit       int      `json:"exit"`    // the program's exit code (-1: killed)
	Violations uint64   `json:"violations"`
	Logged     []string `json:"logged,omitempty"` // the violation log's entries
	Seconds    float64  `json:"seconds"`
	Output     string   `json:"output,omitempty"` // the program's last lines
}

// Config is what a run needs from its caller.
type Config struct {
	// Daemon returns the command that runs `dimmnet serve ARGS`.
	Daemon func(args ...string) *exec.Cmd
	// Limit is each situation's time limit.
	Limit time.Duration
	// Program is the user's driver and its arguments.
	Program []string
}

// Run runs the program in every situation of sits.
func Run(cfg Config, sits []Situation, progress func(string)) ([]Result, error) {
	var res []Result
	for _, s := range sits {
		progress(fmt.Sprintf("situation %s: %s", s.Name, s.What))
		r, err := runOne(cfg, s)
		if err != nil {
			return res, fmt.Errorf("situation %s: %w", s.Name, err)
		}
		res = append(res, r)
	}
	return res, nil
}

// daemon is one running `dimmnet serve`.
type daemon struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
}

func (d *daemon) stop() {
	if d.cmd.ProcessState == nil {
		d.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { d.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-done
		}
	}
}

// start runs serve with args in dir and waits for its n ready lines.
func start(cfg Config, dir string, n int, args ...string) (*daemon, error) {
	d := &daemon{cmd: cfg.Daemon(append([]string{"--dir", dir, "--check"}, args...)...)}
	d.cmd.Stderr = &d.stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	for ready := 0; ready < n; {
		if !sc.Scan() {
			d.cmd.Wait()
			return nil, fmt.Errorf("serve %v: exited before it was ready: %s", args, strings.TrimSpace(d.stderr.String()))
		}
		if strings.Contains(sc.Text(), " ready: ") {
			ready++
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return d, nil
}

func runOne(cfg Config, s Situation) (Result, error) {
	dir, err := os.MkdirTemp("", "dimmnet-conform-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	var ds []*daemon
	defer func() {
		for _, d := range ds {
			d.stop()
		}
	}()
	serve := s.Serve
	if s.Name == "peer-unreachable" {
		peers := filepath.Join(dir, "peers")
		if err := link.WriteLoopbackPeers(peers, 0, 1); err != nil {
			return Result{}, err
		}
		common := []string{"--nodes", "1", "--link", "udp", "--peers", peers}
		serve = [][]string{append(common, "--node-base", "0"), append(common, "--node-base", "1", "--fault", "loss=1")}
	}
	for i, args := range serve {
		sub := dir
		if len(serve) > 1 {
			sub = filepath.Join(dir, fmt.Sprintf("d%d", i))
		}
		d, err := start(cfg, sub, 3-len(serve), args...)
		if err != nil {
			return Result{}, err
		}
		ds = append(ds, d)
	}
	if len(serve) > 1 { // one directory with node0.sock and node1.sock, as a user's driver expects
		for i := range serve {
			if err := os.Symlink(filepath.Join(dir, fmt.Sprintf("d%d", i), fmt.Sprintf("node%d.sock", i)), filepath.Join(dir, fmt.Sprintf("node%d.sock", i))); err != nil {
				return Result{}, err
			}
		}
	}
	// An observer of each device's register page, which outlives a
	// stopped daemon, to read the violations after the program.
	var obs []driver.Attachment
	for n := range 2 {
		t, err := driver.Dial(filepath.Join(dir, fmt.Sprintf("node%d.sock", n)))
		if err != nil {
			return Result{}, fmt.Errorf("observe node %d: %w", n, err)
		}
		defer t.Close()
		obs = append(obs, t)
	}
	time.Sleep(s.Before)

	ctx, cancel := context.WithTimeout(context.Background(), cfg.Limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, cfg.Program[0], cfg.Program[1:]...)
	cmd.Env = append(os.Environ(), "DIMMNET_DIR="+dir)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return Result{}, fmt.Errorf("start %s: %w", cfg.Program[0], err)
	}
	stopped := make(chan struct{})
	if s.StopAfter > 0 {
		timer := time.AfterFunc(s.StopAfter, func() {
			for _, d := range ds {
				d.cmd.Process.Signal(syscall.SIGTERM)
			}
			close(stopped)
		})
		defer timer.Stop()
	}
	err = cmd.Wait()
	early := false
	if s.StopAfter > 0 {
		select {
		case <-stopped:
		default:
			early = true // it finished before the device stopped
		}
	}
	r := Result{Situation: s.Name, Seconds: time.Since(t0).Seconds(), Exit: cmd.ProcessState.ExitCode()}
	for _, t := range obs {
		reg := uapi.Region(t.Region())
		r.Violations += reg.Load64(uapi.CtrViolations.Off())
		for _, v := range reg.ReadViolations() {
			r.Logged = append(r.Logged, fmt.Sprintf("node %d: %v (datasheet: %s)", reg.Load64(uapi.RegNodeID), v, section(v.Kind)))
		}
	}
	r.Output = tail(out.String(), 5)
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		r.Verdict = fmt.Sprintf("hung: killed after %v", cfg.Limit)
		r.Exit = -1
	case r.Violations > 0:
		r.Verdict = fmt.Sprintf("%d violations", r.Violations)
	case err == nil && early:
		r.Pass, r.Verdict = true, "passed (finished before the device stopped)"
	case err == nil:
		r.Pass, r.Verdict = true, "passed"
	case errors.As(err, &ee) && s.Failing && strings.TrimSpace(out.String()) != "":
		r.Pass, r.Verdict = true, fmt.Sprintf("passed: exit %d with a message", r.Exit)
	case errors.As(err, &ee):
		r.Verdict = fmt.Sprintf("failed: exit %d", r.Exit)
		if s.Failing {
			r.Verdict += " without a message"
		}
	default:
		return r, err
	}
	return r, nil
}

func section(k uapi.ViolationKind) string {
	if k >= 1 && k < uapi.NumViolationKinds {
		return uapi.ViolationDocs[k-1].Section
	}
	return "?"
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
