package lmmcbench

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/lmmc"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/transport"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every pattern on real devices")
	}
	for _, pattern := range Patterns {
		for _, pol := range lmmc.Policies {
			if pattern == "paper" && pol != "lru" {
				continue
			}
			r, err := Bench(pol, pattern, 8, 3, BenchConfig{Rounds: 40})
			if err != nil {
				t.Fatalf("%s/%s: %v", pol, pattern, err)
			}
			if r.Misplaced != 0 {
				t.Fatalf("%s/%s: misplaced %d", pol, pattern, r.Misplaced)
			}
			j, _ := json.Marshal(r)
			t.Logf("%s", j)
		}
	}
}

// Two runs recorded into one capture: the file holds frames sent by every
// device of both device sets, LMMC's paging requests and tagged writes
// among them, each a well-formed dimmnet frame; with tshark installed,
// the Wireshark dissector decodes every one of them, none malformed.
func TestBenchCaptureHoldsEveryDevice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lmmc.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	cw, err := capture.NewWriter(f, BenchFrameMax)
	if err != nil {
		t.Fatal(err)
	}
	// A set of two devices, then a set of three: node 3 exists only in
	// the second, and the second set's frames follow the first's.
	if _, err := Bench("lru", "pingpong", 4, 2, BenchConfig{Rounds: 16, Capture: cw}); err != nil {
		t.Fatal(err)
	}
	first := cw.Frames()
	if _, err := Bench("fifo", "neighbour", 4, 2, BenchConfig{Rounds: 8, Nodes: 3, Capture: cw}); err != nil {
		t.Fatal(err)
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}

	hdrs := readCapture(t, path)
	if len(hdrs) != cw.Frames() || first == 0 || first == len(hdrs) {
		t.Fatalf("%d frames in the file, Frames() %d, %d of them from the first set", len(hdrs), cw.Frames(), first)
	}
	for set, frames := range [][]wire.Header{hdrs[:first], hdrs[first:]} {
		senders := map[uint16]int{}
		types := map[wire.Type]int{}
		tagged := 0
		for _, h := range frames {
			senders[h.SrcNode]++
			types[h.Type]++
			if h.Type == wire.TypePush && h.Flags&wire.FlagTagged != 0 {
				tagged++
			}
		}
		for n := uint16(1); n <= uint16(2+set); n++ {
			if senders[n] == 0 {
				t.Errorf("device set %d: no frame from node %d (senders %v)", set+1, n, senders)
			}
		}
		if len(senders) != 2+set {
			t.Errorf("device set %d: frames from nodes %v", set+1, senders)
		}
		// More ports than frames: the run pages, and every write is tagged.
		if types[wire.TypePage] == 0 || tagged == 0 || types[wire.TypeAck] == 0 {
			t.Errorf("device set %d: types %v, %d tagged PUSHes: not an LMMC run", set+1, types, tagged)
		}
	}

	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Log("tshark not installed: the dissector is not checked on the capture")
		return
	}
	lua, err := filepath.Abs("../../tools/wireshark/dimmnet.lua")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tshark, "-X", "lua_script:"+lua, "-r", path, "-T", "fields", "-E", "separator=/t",
		"-e", "dimmnet.type", "-e", "dimmnet.tag", "-e", "_ws.malformed", "-e", "_ws.col.Info")
	cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+t.TempDir(), "LC_ALL=C")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(hdrs) {
		t.Fatalf("tshark printed %d lines for %d frames", len(lines), len(hdrs))
	}
	for i, line := range lines {
		f := strings.Split(line, "\t")
		h := hdrs[i]
		if len(f) != 4 || f[0] != strconv.Itoa(int(h.Type)) || f[1] != strconv.Itoa(int(h.Tag)) || f[2] != "" ||
			!strings.HasPrefix(f[3], h.Type.String()+" ") {
			t.Errorf("frame %d (%v %v tag %d): tshark says %q", i+1, h.Type, h.Flags, h.Tag, line)
		}
	}
}

// readCapture reads every frame of a pcap file, each of which must be a
// valid dimmnet frame.
func readCapture(t *testing.T, path string) []wire.Header {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := capture.NewReader(f) // pcapng or pcap
	if err != nil {
		t.Fatal(err)
	}
	p := wire.NewParser()
	var hs []wire.Header
	for {
		data, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			return hs
		}
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := p.Parse(data)
		if err != nil {
			t.Fatalf("frame %d: %v", len(hs)+1, err)
		}
		if src, ok := wire.MACNode(p.SrcMAC()); !ok || src != h.SrcNode {
			t.Fatalf("frame %d: source MAC %v for node %d", len(hs)+1, p.SrcMAC(), h.SrcNode)
		}
		hs = append(hs, *h)
	}
}

// TestPollLetsWaitingGoroutinesRun: a receiver's poll loop must hand the
// processor to the goroutines that deliver what it waits for. With one
// processor, a goroutine made runnable before the poll runs at its first
// yield; a loop that never yields would poll until the runtime preempts
// it (10-20 ms, hundreds of thousands of polls).
func TestPollLetsWaitingGoroutinesRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var done atomic.Bool
	polls := 0
	go done.Store(true)
	if err := poll(func() (bool, error) { polls++; return done.Load(), nil }); err != nil {
		t.Fatalf("poll: %v", err)
	}
	if polls > 100 {
		t.Errorf("the waiting goroutine ran after %d polls; want it to run at the first yield", polls)
	}
}

// TestBenchFourNodesPagesWithoutTimers runs the 4-node patterns, where
// every node pages towards two or three others at once, on the lossless
// in-memory link with 2 processors (this project's machines): four
// polling receivers, four management goroutines and the engine share
// them. The link loses nothing, so a retransmission timeout there means a
// sender waited 5 ms (the lossless RTO) for a receiver whose paging hold
// lasted that long: the goroutine that ends the hold (the management
// goroutine posting PAGE_DONE, the engine taking it) had no processor.
// Receivers polling without yielding starved them for the Go runtime's
// 10-20 ms preemption period, and one paging write in six met a timeout.
// A busy machine can also keep a thread of ours off its core that long;
// the timeouts are judged only when this process's threads waited less
// than the RTO in all for a processor (the kernel's run-queue delay).
func TestBenchFourNodesPagesWithoutTimers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	for _, pattern := range []string{"neighbour", "alltoall"} {
		before, known := runQueueWait()
		r, err := Bench("lru", pattern, 8, 3, BenchConfig{Rounds: 40})
		if err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		after, _ := runQueueWait()
		if r.Faults == 0 || r.PagesCopied == 0 {
			t.Fatalf("%s: %d faults, %d pages copied: the pattern did not page", pattern, r.Faults, r.PagesCopied)
		}
		if r.Misplaced != 0 {
			t.Errorf("%s: %d writes misplaced", pattern, r.Misplaced)
		}
		switch waited := after - before; {
		case r.Timeouts == 0:
		case !known || waited >= transport.LosslessRTO:
			t.Logf("%s: %d retransmission timeouts in %d paging writes, not judged: our threads waited %v for a processor (known: %v)", pattern, r.Timeouts, r.Faults, time.Duration(waited), known)
		default:
			t.Errorf("%s: %d retransmission timeouts in %d paging writes on a lossless link, our threads waiting only %v for a processor; want none", pattern, r.Timeouts, r.Faults, time.Duration(waited))
		}
	}
}

// runQueueWait is the time this process's threads have spent runnable but
// waiting for a processor, in ns, from /proc/self/task/*/schedstat; ok is
// false where the kernel does not say.
func runQueueWait() (ns int64, ok bool) {
	files, _ := filepath.Glob("/proc/self/task/*/schedstat")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			return 0, false
		}
		v, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, false
		}
		ns += v
		ok = true
	}
	return ns, ok
}

// The LMMC manager's driver keeps to the datasheet: on checked devices,
// paging under every pattern raises no violation (Bench fails on one).
func TestBenchOnCheckedDevices(t *testing.T) {
	for _, pattern := range []string{"pingpong", "alltoall"} {
		r, err := Bench("lru", pattern, 8, 3, BenchConfig{Rounds: 30, Check: true})
		if err != nil {
			t.Fatalf("%s: %v", pattern, err)
		}
		if r.Faults == 0 {
			t.Fatalf("%s: no paging happened, so nothing was checked", pattern)
		}
	}
}
