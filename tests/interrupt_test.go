package tests

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// TestInterruptedRunsEndCleanly stops measurement runs on every medium
// with SIGINT or SIGTERM at random moments: each must exit 130 (or 0, if
// it finished first) having torn down, never die in a fault on link
// memory the teardown unmapped under a side still writing it (a
// `pingpong --link udp --fault ... --pcap` run stopped by timeout(1) did),
// and leave no network namespace behind.
func TestInterruptedRunsEndCleanly(t *testing.T) {
	bin := dimmnet(t)
	type run struct {
		name string
		args []string
	}
	pcap := t.TempDir() + "/run.pcap"
	runs := []run{
		{"pingpong mem", []string{"pingpong", "--max", "65536", "--time", "10s"}},
		{"pingpong mem verify", []string{"pingpong", "--max", "65536", "--time", "10s", "--verify"}},
		{"pingpong udp fault pcap", []string{"pingpong", "--link", "udp", "--fault", "loss=0.02,dup=0.01,reorder=0.02,seed=3", "--pcap", pcap, "--max", "65536", "--time", "10s"}},
		{"pingpong shm", []string{"pingpong", "--link", "shm", "--max", "65536", "--time", "10s", "--raw-time", "2s"}},
		{"perf mem", []string{"perf", "--no-peers", "--max", "65536", "--time", "300ms"}},
		{"perf udp", []string{"perf", "--no-peers", "--link", "udp", "--max", "65536", "--time", "300ms"}},
		{"perf shm", []string{"perf", "--no-peers", "--link", "shm", "--max", "65536", "--time", "300ms"}},
	}
	if os.Geteuid() == 0 {
		runs = append(runs,
			run{"pingpong afpacket", []string{"pingpong", "--link", "afpacket", "--max", "65536", "--time", "10s"}},
			run{"pingpong tap", []string{"pingpong", "--link", "tap", "--fault", "loss=0.01,seed=2", "--max", "65536", "--time", "10s"}})
	}
	rounds := 3
	if testing.Short() {
		rounds = 1
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, r := range runs {
		for i := range rounds {
			sig := []syscall.Signal{syscall.SIGINT, syscall.SIGTERM}[(i+rng.IntN(2))%2]
			after := time.Duration(50+rng.IntN(1500)) * time.Millisecond
			t.Run(fmt.Sprintf("%s/%v@%v", r.name, sig, after), func(t *testing.T) {
				// The moment is counted from the run's first progress
				// line: a signal before the program's handler exists
				// ends it as it ends any program.
				var stderr syncBuffer
				cmd := exec.Command(bin, r.args...)
				cmd.Dir = t.TempDir()
				pipe, err := cmd.StderrPipe()
				if err != nil {
					t.Fatal(err)
				}
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				pid := cmd.Process.Pid
				started := make(chan struct{})
				copied := make(chan struct{})
				go func() {
					defer close(copied)
					sc := bufio.NewScanner(pipe)
					first := true
					for sc.Scan() {
						stderr.Write(append(sc.Bytes(), '\n'))
						if first {
							first = false
							close(started)
						}
					}
				}()
				go func() {
					select {
					case <-started:
						time.Sleep(after)
						cmd.Process.Signal(sig)
					case <-copied:
					}
				}()
				done := make(chan error, 1)
				go func() { <-copied; done <- cmd.Wait() }()
				select {
				case err = <-done:
				case <-time.After(60 * time.Second):
					cmd.Process.Kill()
					<-done
					t.Fatalf("still running 60 s after %v: %s", sig, stderr.String())
				}
				code := 0
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					t.Fatal(err)
				}
				out := stderr.String()
				for _, bad := range []string{"SIGSEGV", "panic:", "fatal error", "unexpected fault"} {
					if strings.Contains(out, bad) {
						t.Fatalf("%v at %v: %s in stderr:\n%s", sig, after, bad, out)
					}
				}
				switch code {
				case 130:
					// torn down after the measurement stopped, or nothing
					// was measuring (start-up, the raw floors' children)
					if !strings.Contains(out, "interrupted; devices and links torn down") && !strings.Contains(out, "with no measurement running") {
						t.Errorf("exit 130 without saying why:\n%s", out)
					}
				case 0: // it finished before the signal
				default:
					t.Fatalf("%v at %v: exit %d:\n%s", sig, after, code, out)
				}
				if h, err := netns.GetFromName(fmt.Sprintf("dimmnet-pp-%d", pid)); err == nil {
					h.Close()
					t.Errorf("network namespace dimmnet-pp-%d left behind", pid)
				}
			})
		}
	}
}
