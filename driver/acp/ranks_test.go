package acp_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/acp"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// The tests here run ranks as real processes of this test binary, each
// embedding its device on one shared-memory link, with the rank in Open
// MPI's environment variables as mpirun sets them.

const roleRank = "acp-test-rank"

func TestMain(m *testing.M) {
	subproc.Register(roleRank, rankMain)
	subproc.Main()
	os.Exit(m.Run())
}

// rank is one rank's part of a test between processes, by the name its
// test starts it with (rankBodies).
type rank struct {
	run func(c *acp.ACP) error
	// again, if set, runs after Finalize on the same device and returns
	// the ACP it made (Init again: the first Init's resources released).
	again func(d *driver.Driver, rank, procs int) (*acp.ACP, error)
	// deviceAtomics: with ACP_TEST_DEVICE_ATOMICS, a rank's Add8 and CAS8
	// must have been done by a device (rank 0 does none).
	deviceAtomics bool
}

// rankBodies are the ranks the tests below start.
var rankBodies = map[string]rank{
	// The paper's section 7, its result printed for sameResults.
	"conformance": {run: conformance, deviceAtomics: true},
	// Reset renumbers the ranks; after Finalize a second Init on the same
	// device copies around the ring again.
	"reset": {run: resetAndReinit, again: initAgain},
}

// rankMain is a rank process: it opens its device and ACP from the
// launcher's environment and runs the rank body args[0] names.
func rankMain(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want a rank body's name, have %q", args)
	}
	body, ok := rankBodies[args[0]]
	if !ok {
		return fmt.Errorf("no rank body %q", args[0])
	}
	l, ok, err := ranks.FromEnv()
	if err != nil || !ok {
		return fmt.Errorf("launch environment: ok %v: %v", ok, err)
	}
	dev, err := ranks.Open(ranks.Options{Link: os.Getenv("ACP_TEST_LINK"), Dir: os.Getenv("ACP_TEST_DIR"),
		Peers: os.Getenv("ACP_TEST_PEERS"), Node: uint16(l.Rank + 1), RegionSize: 8 << 20})
	if err != nil {
		return err
	}
	defer dev.Close()
	atomics := os.Getenv("ACP_TEST_DEVICE_ATOMICS") != ""
	c, err := acp.Init(dev.Driver, acp.Options{Rank: l.Rank, Procs: l.Size, DeviceAtomics: atomics})
	if err != nil {
		return err
	}
	if err := body.run(c); err != nil {
		return fmt.Errorf("rank %d: %w", l.Rank, err)
	}
	if err := c.Finalize(); err != nil {
		return fmt.Errorf("rank %d: %w", l.Rank, err)
	}
	if body.again != nil {
		if c, err = body.again(dev.Driver, l.Rank, l.Size); err != nil {
			return fmt.Errorf("rank %d: %w", l.Rank, err)
		}
	}
	if s := c.Stats(); s.Protocol != 0 {
		return fmt.Errorf("rank %d: %d protocol violations", l.Rank, s.Protocol)
	}
	// As in TestDeviceAtomicsInProcess: the device did them, or the run
	// proved nothing about device atomics on this link.
	if n := c.Stats().DeviceAtomics; atomics && body.deviceAtomics && l.Rank != 0 && n < 2 {
		return fmt.Errorf("rank %d had %d atomics done by a device, want its Add8 and CAS8", l.Rank, n)
	}
	if d, ok := results.Load(l.Rank); ok {
		fmt.Printf("result %x\n", d)
	}
	fmt.Println("rank", l.Rank, "ok")
	return nil
}

// initAgain inits ACP again on d after Finalize and copies around the
// ring: everything the first Init made was released.
func initAgain(d *driver.Driver, rank, procs int) (*acp.ACP, error) {
	c, err := acp.Init(d, acp.Options{Rank: rank, Procs: procs})
	if err != nil {
		return nil, fmt.Errorf("init after finalize: %w", err)
	}
	if err := ringCopy(c); err != nil {
		return nil, fmt.Errorf("after re-init: %w", err)
	}
	return c, c.Finalize()
}

// ringCopy copies 8 bytes naming this rank into the next rank's starter
// memory and checks what the previous rank wrote into ours.
func ringCopy(c *acp.ACP) error {
	me, n := c.Rank(), c.Procs()
	st := c.StarterGA(me)
	sm, err := c.QueryAddress(st)
	if err != nil {
		return err
	}
	sm[0] = byte(me + 1)
	if err := c.Sync(); err != nil {
		return err
	}
	h, err := c.Copy(c.StarterGA((me+1)%n)+8, st, 8, acp.HandleNull)
	if err != nil {
		return err
	}
	if err := c.Complete(h); err != nil {
		return err
	}
	if err := c.Sync(); err != nil {
		return err
	}
	if want := byte((me+n-1)%n + 1); sm[8] != want {
		return fmt.Errorf("rank %d: the previous rank wrote %d, want %d", me, sm[8], want)
	}
	return nil
}

// resetAndReinit reverses the ranks with Reset: registrations go, the
// starter memory is zeroed, and addresses name the new ranks.
func resetAndReinit(c *acp.ACP) error {
	old, n := c.Rank(), c.Procs()
	buf, err := c.Malloc(64)
	if err != nil {
		return err
	}
	k, err := c.RegisterMemory(buf, 0)
	if err != nil {
		return err
	}
	sm, err := c.QueryAddress(c.StarterGA(old))
	if err != nil {
		return err
	}
	sm[100] = 1
	if err := c.Reset(n - 1 - old); err != nil {
		return err
	}
	if c.Rank() != n-1-old {
		return fmt.Errorf("rank %d after Reset(%d)", c.Rank(), n-1-old)
	}
	if err := c.UnregisterMemory(k); err == nil {
		return fmt.Errorf("a registration survived Reset")
	}
	if sm[100] != 0 {
		return fmt.Errorf("starter memory not zeroed by Reset")
	}
	return ringCopy(c)
}

// hangGuard bounds a test's processes so a hang fails with the ranks'
// output; a correct run takes a fraction of it.
const hangGuard = 90 * time.Second

func runRanks(t *testing.T, n int, name string, env ...string) []string {
	t.Helper()
	return runRanksOn(t, nil, n, name, env...)
}

// runRanksOn is runRanks with the ranks started inside seg's network
// namespace (nil: this process's), rank r on seg's interface r. It
// returns each rank's output.
func runRanksOn(t *testing.T, seg *netsetup.Segment, n int, name string, env ...string) []string {
	t.Helper()
	if _, ok := rankBodies[name]; !ok {
		t.Fatalf("no rank body %q", name)
	}
	dir := t.TempDir() + "/shm"
	cmds := make([]*exec.Cmd, n)
	bufs := make([]*bytes.Buffer, n)
	for r := range n {
		c, err := subproc.Command(roleRank, name)
		if err != nil {
			t.Fatal(err)
		}
		c.Env = append(c.Env, "ACP_TEST_DIR="+dir, "OMPI_COMM_WORLD_RANK="+strconv.Itoa(r),
			"OMPI_COMM_WORLD_SIZE="+strconv.Itoa(n), "OMPI_COMM_WORLD_LOCAL_RANK="+strconv.Itoa(r))
		c.Env = append(c.Env, env...)
		bufs[r] = &bytes.Buffer{}
		c.Stdout, c.Stderr = bufs[r], bufs[r]
		cmds[r] = c
	}
	if err := ranks.StartRanks(seg, cmds); err != nil {
		t.Fatal(err)
	}
	hung := false
	errs := subproc.WaitAll(cmds, hangGuard, func() {
		hung = true
		for _, c := range cmds {
			c.Process.Signal(syscall.SIGQUIT) // only the processes this test started: their stacks, then exit
		}
		time.AfterFunc(5*time.Second, func() {
			for _, c := range cmds {
				c.Process.Kill() // those that ignored it
			}
		})
	})
	if hung {
		for r := range cmds {
			t.Logf("rank %d:\n%s", r, bufs[r])
		}
		t.Fatalf("%s: ranks still running after %v", name, hangGuard)
	}
	outs := make([]string, n)
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d of %s: %v\n%s", r, name, err, bufs[r])
		}
		outs[r] = bufs[r].String()
	}
	return outs
}

// sameResults checks that each rank process printed the conformance
// result the same rank had in-process: identical results on every
// transport, not only the same checks passed.
func sameResults(t *testing.T, outs []string) {
	t.Helper()
	ref := reference(t)
	for r, o := range outs {
		want := fmt.Sprintf("result %x\n", ref[r])
		if !strings.Contains(o, want) {
			t.Errorf("rank %d: its result differs from in-process (%q):\n%s", r, strings.TrimSpace(want), o)
		}
	}
}

// TestConformanceBetweenProcesses is the paper's section 7 on the
// shared-memory link: the same program as in-process, same results.
func TestConformanceBetweenProcesses(t *testing.T) { sameResults(t, runRanks(t, 3, "conformance")) }

// TestConformanceOverUDP is the same program with the ranks' devices on
// UDP sockets (loopback), as ranks on different hosts would be: the
// paper's section 7 runs one program on two transports.
func TestConformanceOverUDP(t *testing.T) {
	sameResults(t, runRanks(t, 3, "conformance", "ACP_TEST_LINK=udp", "ACP_TEST_PEERS="+loopbackPeers(t, 3)))
}

// TestDeviceAtomicsOverUDP is the conformance program with Add8 and CAS8
// done by the target's device, its requests and old values crossing UDP.
func TestDeviceAtomicsOverUDP(t *testing.T) {
	sameResults(t, runRanks(t, 3, "conformance", "ACP_TEST_LINK=udp", "ACP_TEST_DEVICE_ATOMICS=1", "ACP_TEST_PEERS="+loopbackPeers(t, 3)))
}

// loopbackPeers writes a peers file giving nodes 1..n free loopback UDP
// ports for one test.
func loopbackPeers(t *testing.T, n int) string {
	t.Helper()
	peers := t.TempDir() + "/peers"
	if err := link.WriteLoopbackPeers(peers, ranks.Nodes(n)...); err != nil {
		t.Fatal(err)
	}
	return peers
}

// TestDeviceAtomicsBetweenProcesses is the conformance program with Add8
// and CAS8 done by the target's device, on the shared-memory link.
func TestDeviceAtomicsBetweenProcesses(t *testing.T) {
	sameResults(t, runRanks(t, 3, "conformance", "ACP_TEST_DEVICE_ATOMICS=1"))
}

// TestResetAndReinitBetweenProcesses: Reset renumbers the ranks and
// Finalize releases what Init made, so Init runs again in one process.
func TestResetAndReinitBetweenProcesses(t *testing.T) { runRanks(t, 3, "reset") }

// TestResetAndReinitInProcess runs the Reset rank body without processes.
func TestResetAndReinitInProcess(t *testing.T) { inProcess(t, 3, resetAndReinit) }
