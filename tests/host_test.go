package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/uapi"
	"golang.org/x/sys/unix"
)

// dimmnetBin is the CLI built once for the tests that run it as separate
// processes (the daemon, the ping-pong pair, the FUSE view).
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func dimmnet(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dimmnet-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "dimmnet")
		out, err := exec.Command("go", "build", "-o", binPath, "../cmd/dimmnet").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// daemon is a running `dimmnet serve`.
type daemon struct {
	dir    string
	cmd    *exec.Cmd
	stderr *syncBuffer
	ready  []string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func (d *daemon) sock(n int) string { return filepath.Join(d.dir, fmt.Sprintf("node%d.sock", n)) }

// startDaemon runs dimmnet serve with n nodes and waits for its ready lines.
// Cleanup stops it with SIGTERM and checks it exits 0 and leaves nothing.
func startDaemon(t *testing.T, n int, extra ...string) *daemon {
	t.Helper()
	dir := t.TempDir()
	return startDaemonIn(t, dir, nil, n, append([]string{"--dir", dir}, extra...)...)
}

// startDaemonIn runs dimmnet serve as startDaemon does, with env added to
// the environment and the arguments as given: dir is where its sockets
// will be (serve's default directory when args name none).
func startDaemonIn(t *testing.T, dir string, env []string, n int, args ...string) *daemon {
	t.Helper()
	d := &daemon{dir: dir, stderr: &syncBuffer{}}
	d.cmd = exec.Command(dimmnet(t), append([]string{"serve", "--nodes", fmt.Sprint(n)}, args...)...)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stderr = d.stderr
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for len(d.ready) < n && sc.Scan() {
		d.ready = append(d.ready, sc.Text())
	}
	if len(d.ready) < n {
		d.cmd.Process.Kill()
		d.cmd.Wait()
		t.Fatalf("daemon printed %d ready lines: %q\nstderr:\n%s", len(d.ready), d.ready, d.stderr)
	}
	go func() { // keep draining
		for sc.Scan() {
		}
	}()
	t.Cleanup(func() { d.stop(t) })
	return d
}

func (d *daemon) stop(t *testing.T) {
	if d.cmd.ProcessState != nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("daemon exit: %v\n%s", err, d.stderr)
		}
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		t.Errorf("daemon did not stop on SIGTERM\n%s", d.stderr)
	}
	for i := range d.ready {
		if _, err := os.Stat(d.sock(i)); err == nil {
			t.Errorf("socket %s left behind", d.sock(i))
		}
	}
	if left, _ := filepath.Glob(fmt.Sprintf("/dev/shm/dimmnet-%d-node*", d.cmd.Process.Pid)); len(left) > 0 {
		t.Errorf("regions left behind: %v", left)
	}
}

func attach(t *testing.T, sock string) *driver.Driver {
	t.Helper()
	tr, err := driver.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	d, err := driver.Open(tr)
	if err != nil {
		tr.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Two processes attached to a running daemon ping-pong through it; the
// records are the core issue's, with path "process".
func TestTwoProcessPingPong(t *testing.T) {
	d := startDaemon(t, 2)
	out, err := exec.Command(dimmnet(t), "pingpong", "--attach", d.sock(0)+","+d.sock(1),
		"--json", "-q", "--max", "4096", "--iters", "50", "--raw-time", "50ms").Output()
	if err != nil {
		t.Fatalf("pingpong: %v\n%s", err, d.stderr)
	}
	var all []pingpong.Result
	if err := json.Unmarshal(out, &all); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	recs, raw := splitRaw(all)
	if len(recs) != 10*4 {
		t.Fatalf("%d records, want 40 (10 sizes x PUSH/IPUSH x linkmem/hostcopy)", len(recs))
	}
	for _, r := range recs {
		if r.Path != "process" || r.Iters != 50 || r.RTTHalfUs <= 0 || r.MBps <= 0 {
			t.Fatalf("record %+v", r)
		}
	}
	checkRaw(t, raw)
	// the devices really carried them: 40 runs x (50 + warm-up) round trips each way
	a := attach(t, d.sock(0))
	if got := a.Counter(uapi.CtrRxPkts); got < 40*50 {
		t.Fatalf("node 0 placed %d packets", got)
	}
}

// splitRaw separates an attached run's device records from its raw
// baselines (mode "raw").
func splitRaw(all []pingpong.Result) (device, raw []pingpong.Result) {
	for _, r := range all {
		if r.Mode == pingpong.ModeRaw {
			raw = append(raw, r)
		} else {
			device = append(device, r)
		}
	}
	return device, raw
}

// checkRaw wants one record of each raw baseline, with positive and
// finite RTT/2 figures.
func checkRaw(t *testing.T, raw []pingpong.Result) {
	t.Helper()
	if len(raw) != len(pingpong.RawConditions) {
		t.Fatalf("%d raw records, want %d: %+v", len(raw), len(pingpong.RawConditions), raw)
	}
	for i, r := range raw {
		ok := func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }
		if r.Condition != pingpong.RawConditions[i] || r.Size != 8 || r.Iters < 1 || !ok(r.RTTHalfUs) || !ok(r.RTTHalfP50Us) {
			t.Errorf("raw record %+v", r)
		}
	}
}

// The text of an attached run sets the device beside every raw baseline
// of the same run and the hand-off limit.
func TestAttachedRunPrintsRawBaselines(t *testing.T) {
	d := startDaemon(t, 2)
	out, err := exec.Command(dimmnet(t), "pingpong", "--attach", d.sock(0)+","+d.sock(1),
		"-q", "--max", "8", "--iters", "20", "--raw-time", "50ms").Output()
	if err != nil {
		t.Fatalf("pingpong: %v\n%s", err, d.stderr)
	}
	for _, want := range append([]string{"raw baselines, same run", "hand-off limit", "x the hand-off limit", "x UDP loopback"}, pingpong.RawConditions...) {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A host process attaches over the ivshmem protocol and moves real bytes to
// another; the daemon's devices are the same as in-process ones.
func TestHostAttachPushAndStop(t *testing.T) {
	d := startDaemon(t, 2)
	a, b := attach(t, d.sock(0)), attach(t, d.sock(1))
	if a.Node() != 0 || b.Node() != 1 {
		t.Fatalf("nodes %d, %d", a.Node(), b.Node())
	}
	data := pattern(10000, 7)
	a.CopyIn(0, data)
	if _, err := a.Push(1, 0, 1<<20, uint32(len(data)), uapi.FlagSignal, 3); err != nil {
		t.Fatal(err)
	}
	s := wait(t, b)
	if s.Type != uapi.StPUSH || !bytes.Equal(b.LinkMem()[1<<20:1<<20+len(data)], data) {
		t.Fatalf("receiver %v, bytes equal %v", s, bytes.Equal(b.LinkMem()[1<<20:1<<20+len(data)], data))
	}
	if s := wait(t, a); s.Type != uapi.StDone || s.Cookie != 3 {
		t.Fatalf("sender %v", s)
	}
	// Shutdown: the driver learns the device stopped, by name.
	d.stop(t)
	_, err := b.WaitTail(2e9)
	if !errors.Is(err, driver.ErrDeviceStopped) {
		t.Fatalf("after shutdown: %v, want ErrDeviceStopped", err)
	}
	if !strings.Contains(d.stderr.String(), "shutting down") {
		t.Fatalf("no shutdown log:\n%s", d.stderr)
	}
}

// A second daemon on the same directory is refused with a clear error.
func TestSecondDaemonRefused(t *testing.T) {
	d := startDaemon(t, 1)
	out, err := exec.Command(dimmnet(t), "serve", "--dir", d.dir, "--nodes", "1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another dimmnet serve is running") {
		t.Fatalf("second daemon: %v: %s", err, out)
	}
}

// rawClient speaks the ivshmem protocol by hand, to see what the server sends.
type rawClient struct {
	c *net.UnixConn
}

func dialRaw(t *testing.T, sock string) *rawClient {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawClient{c}
}

// next reads one message: value and whether it carried an fd (closed here).
func (r *rawClient) next(t *testing.T) (int64, bool) {
	t.Helper()
	var b [8]byte
	oob := make([]byte, unix.CmsgSpace(4))
	r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, oobn, _, _, err := r.c.ReadMsgUnix(b[:], oob)
	if err != nil || n != 8 {
		t.Fatalf("read message: %v (%d bytes)", err, n)
	}
	fd := false
	if oobn > 0 {
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			fds, _ := unix.ParseUnixRights(&m)
			for _, f := range fds {
				unix.Close(f)
				fd = true
			}
		}
	}
	return int64(binary.LittleEndian.Uint64(b[:])), fd
}

// setup reads a new client's set-up and returns its id: version 0, id, shm,
// peers' eventfds, own eventfds (vectors 1), in QEMU's order.
func (r *rawClient) setup(t *testing.T, others []int64) int64 {
	t.Helper()
	if v, fd := r.next(t); v != 0 || fd {
		t.Fatalf("version message %d fd %v", v, fd)
	}
	id, fd := r.next(t)
	if fd || id < 1 {
		t.Fatalf("id message %d fd %v", id, fd)
	}
	if v, fd := r.next(t); v != -1 || !fd {
		t.Fatalf("shm message %d fd %v", v, fd)
	}
	for _, want := range append([]int64{0}, others...) { // the device is peer 0
		if v, fd := r.next(t); v != want || !fd {
			t.Fatalf("peer message %d fd %v, want %d with fd", v, fd, want)
		}
	}
	if v, fd := r.next(t); v != id || !fd {
		t.Fatalf("own vector message %d fd %v, want %d", v, fd, id)
	}
	return id
}

// Clients that vanish, send garbage, or crowd one socket do not disturb the
// daemon: each gets its own id, the others are told of joins and leaves,
// and the daemon says what happened and keeps serving.
func TestDaemonBadClients(t *testing.T) {
	d := startDaemon(t, 2)
	// connect and vanish at once
	for i := 0; i < 3; i++ {
		c, err := net.Dial("unix", d.sock(0))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// the server notices them on its own goroutines: wait, so the next
	// client's set-up lists no peer but the device
	departures := func() int { // every reason the server drops a client for
		l := d.stderr.String()
		return strings.Count(l, "client left") + strings.Count(l, "client connection failed") + strings.Count(l, "; dropping it")
	}
	eventually(t, "the vanished clients to be dropped", func() bool { return departures() >= 3 })
	// many clients: distinct ids, and each earlier one is told of the later
	c1 := dialRaw(t, d.sock(0))
	id1 := c1.setup(t, nil)
	c2 := dialRaw(t, d.sock(0))
	id2 := c2.setup(t, []int64{id1})
	if id2 == id1 {
		t.Fatalf("two clients got id %d", id1)
	}
	if v, fd := c1.next(t); v != id2 || !fd {
		t.Fatalf("client %d was told %d fd %v about the new peer %d", id1, v, fd, id2)
	}
	// garbage from client 2: it is dropped and client 1 is told it left
	if _, err := c2.c.Write([]byte("hello, server")); err != nil {
		t.Fatal(err)
	}
	if v, fd := c1.next(t); v != id2 || fd {
		t.Fatalf("after garbage, client %d was told %d fd %v, want %d without fd", id1, v, fd, id2)
	}
	// a driver still works through the same device
	a, b := attach(t, d.sock(0)), attach(t, d.sock(1))
	goodPush(t, a, b, 1<<20, 5)
	// a ping-pong pair killed mid-run does not disturb the daemon
	joins := func() int { return strings.Count(d.stderr.String(), "client joined") }
	joined := joins()
	pp := exec.Command(dimmnet(t), "pingpong", "--attach", d.sock(0)+","+d.sock(1), "-q", "--max", "65536", "--iters", "100000")
	if err := pp.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it mid-run, not before it attached: on a busy machine a fixed
	// sleep could end before the new process reached the daemon at all.
	eventually(t, "the ping-pong's two clients to join", func() bool { return joins() >= joined+2 })
	time.Sleep(100 * time.Millisecond)
	before := departures()
	pp.Process.Kill()
	pp.Wait()
	eventuallyOr(t, "the killed ping-pong's clients to be gone", func() bool { return departures() >= before+2 },
		func() string { return fmt.Sprintf("departures %d before the kill; daemon log:\n%s", before, d.stderr) })
	log := d.stderr.String()
	for _, want := range []string{"client sent data", "client left", "client joined"} {
		if !strings.Contains(log, want) {
			t.Errorf("daemon log lacks %q:\n%s", want, log)
		}
	}
	// and a new pair still runs (its responder drains what the dead one left)
	out, err := exec.Command(dimmnet(t), "pingpong", "--attach", d.sock(0)+","+d.sock(1), "--json", "-q", "--max", "64", "--iters", "20", "--raw-time", "50ms").CombinedOutput()
	if err != nil {
		t.Fatalf("ping-pong after a crash: %v\n%s\n%s", err, out, d.stderr)
	}
}

// QEMU's own ivshmem-doorbell device attaches to the daemon unchanged and
// shows up on the guest's PCI bus as 1af4:1110 with the region as BAR2.
func TestQEMUAttaches(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed (.ci/run installs qemu-system-x86)")
	}
	d := startDaemon(t, 1)
	cmd := exec.Command(qemu, "-machine", "q35,accel=tcg", "-S", "-display", "none", "-nodefaults", "-monitor", "stdio",
		"-chardev", "socket,path="+d.sock(0)+",id=c", "-device", "ivshmem-doorbell,chardev=c,vectors=1")
	cmd.Stdin = strings.NewReader("info pci\nquit\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("qemu: %v\n%s", err, out)
	}
	s := string(out)
	if !strings.Contains(s, "PCI device 1af4:1110") || !strings.Contains(s, "BAR2: 64 bit prefetchable memory") {
		t.Fatalf("no ivshmem device in info pci:\n%s", s)
	}
	if !strings.Contains(s, "[0x00fffffe]") { // a 16 MiB BAR2: the daemon's region
		t.Fatalf("BAR2 is not the 16 MiB region:\n%s", s)
	}
	eventually(t, "QEMU to join and leave", func() bool {
		l := d.stderr.String()
		return strings.Contains(l, "client joined") && strings.Contains(l, "client left")
	})
}

// The FUSE view of a running daemon shows what the drivers see, and
// unmounts cleanly on Ctrl-C.
func TestFSViewOfDaemon(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	d := startDaemon(t, 2)
	a, b := attach(t, d.sock(0)), attach(t, d.sock(1))
	goodPush(t, a, b, 1<<20, 11)
	mnt := t.TempDir()
	fsCmd := exec.Command(dimmnet(t), "fs", "--dir", d.dir, mnt)
	var fsOut syncBuffer
	fsCmd.Stdout, fsCmd.Stderr = &fsOut, &fsOut
	if err := fsCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if fsCmd.ProcessState == nil {
			fsCmd.Process.Kill()
			fsCmd.Wait()
			unix.Unmount(mnt, unix.MNT_DETACH)
		}
	}()
	eventually(t, "the view to be mounted", func() bool {
		_, err := os.Stat(filepath.Join(mnt, "node1", "info"))
		return err == nil
	})
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(mnt, p))
		if err != nil {
			t.Fatalf("read %s: %v", p, err)
		}
		return string(b)
	}
	if got := read("node1/registers/NODE_ID"); got != "1\n" {
		t.Fatalf("NODE_ID = %q", got)
	}
	if got, want := read("node0/counters/TX_PKTS"), fmt.Sprintf("%d\n", a.Counter(uapi.CtrTxPkts)); got != want || want == "0\n" {
		t.Fatalf("TX_PKTS = %q, driver says %q", got, want)
	}
	if got, want := read("node1/counters/RX_PUSH"), fmt.Sprintf("%d\n", b.Counter(uapi.CtrRxPush)); got != want {
		t.Fatalf("RX_PUSH = %q, driver says %q", got, want)
	}
	f, err := os.Open(filepath.Join(mnt, "node1", "linkmem"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := f.ReadAt(buf, 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if !bytes.Equal(buf, b.LinkMem()[1<<20:1<<20+64]) {
		t.Fatal("linkmem through FUSE differs from what the driver maps")
	}
	if err := os.WriteFile(filepath.Join(mnt, "node0", "registers", "TRACE_CTRL"), []byte("1\n"), 0); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("write on a read-only view: %v, want EACCES", err)
	}
	fsCmd.Process.Signal(syscall.SIGINT)
	exited := make(chan error, 1)
	go func() { exited <- fsCmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("fs exit: %v\n%s", err, fsOut.String())
		}
	case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
		fsCmd.Process.Kill()
		<-exited
		unix.Unmount(mnt, unix.MNT_DETACH)
		t.Fatalf("dimmnet fs did not exit within a minute of Ctrl-C\n%s", fsOut.String())
	}
	if mounts, _ := os.ReadFile("/proc/self/mounts"); strings.Contains(string(mounts), mnt) {
		t.Fatal("still mounted after Ctrl-C")
	}
}

// dimmnet stat prints one device's registers and counters.
func TestStatCommand(t *testing.T) {
	d := startDaemon(t, 1)
	out, err := exec.Command(dimmnet(t), "stat", d.sock(0)).CombinedOutput()
	if err != nil {
		t.Fatalf("stat: %v\n%s", err, out)
	}
	for _, want := range []string{"NODE_ID", "STATE", "1 running", "RX_PKTS", "MAGIC"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("stat output lacks %q:\n%s", want, out)
		}
	}
}

// udpPeersFile writes a peers file giving nodes 0 and 1 a free loopback
// UDP port each (a comment line included, as users write them) and
// returns its path.
func udpPeersFile(t *testing.T) string {
	t.Helper()
	var ports [2]string
	for i := range ports {
		l, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.LocalAddr().String()
		l.Close()
	}
	peers := filepath.Join(t.TempDir(), "peers")
	if err := os.WriteFile(peers, []byte(fmt.Sprintf("# two daemons\nnode 0 %s\nnode 1 %s\n", ports[0], ports[1])), 0o644); err != nil {
		t.Fatal(err)
	}
	return peers
}

// Two daemons (as on two hosts) joined by UDP: their devices ping-pong
// through real sockets, the peers file naming every node.
func TestTwoDaemonsOverUDP(t *testing.T) {
	peers := udpPeersFile(t)
	a := startDaemon(t, 1, "--link", "udp", "--peers", peers, "--node-base", "0")
	b := startDaemon(t, 1, "--link", "udp", "--peers", peers, "--node-base", "1")
	out, err := exec.Command(dimmnet(t), "pingpong", "--attach", a.sock(0)+","+filepath.Join(b.dir, "node1.sock"),
		"--json", "-q", "--max", "64", "--iters", "20", "--raw-time", "50ms").Output()
	if err != nil {
		t.Fatalf("pingpong over UDP: %v\n%s\n%s", err, a.stderr, b.stderr)
	}
	var all []pingpong.Result
	err = json.Unmarshal(out, &all)
	if recs, _ := splitRaw(all); err != nil || len(recs) != 4*4 {
		t.Fatalf("records %d: %v\n%s", len(recs), err, out)
	}
	d := attach(t, a.sock(0))
	if d.Counter(uapi.CtrRxPkts) == 0 || d.Counter(uapi.CtrCRCFail) != 0 {
		t.Fatalf("node 0: RX_PKTS %d CRC_FAIL %d", d.Counter(uapi.CtrRxPkts), d.Counter(uapi.CtrCRCFail))
	}
}
