package fmpl_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver/fmpl"
	"github.com/dimmnet/dimmnet/driver/ranks"
	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/uapi"
)

// Every test here runs its ranks as real processes of this test binary,
// each embedding its device on one shared-memory link, with the rank in
// Open MPI's environment variables as mpirun would set them.

const roleRank = "fmpl-test-rank"

func TestMain(m *testing.M) {
	subproc.Register(roleRank, rankMain)
	subproc.Main()
	os.Exit(m.Run())
}

// rank is one rank's part of a test: it runs on the rank's World and
// returns an error to fail. A test file declares its ranks in a table of
// its own, by the name its tests start them with (runRanks).
type rank struct {
	run func(w *fmpl.World) error
	// noFinalize: the rank ends without Finalize (a rank that dies on
	// purpose, or one that found a deadlock).
	noFinalize bool
}

// rankTables are the test files' tables; a name is in one of them only.
var rankTables = []map[string]rank{allocRanks, anySourceRanks, badInputRanks, barrierRanks, collectiveRanks, matchingRanks, sendModeRanks}

// lookup finds the rank body called name in the tables.
func lookup(name string) (rank, error) {
	var found []rank
	for _, tab := range rankTables {
		if r, ok := tab[name]; ok {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		return rank{}, fmt.Errorf("rank body %q is in %d tables, want 1", name, len(found))
	}
	return found[0], nil
}

// TestRankNamesUnique: every rank body is found by its name, so no two
// test files declare the same one.
func TestRankNamesUnique(t *testing.T) {
	for _, tab := range rankTables {
		for name := range tab {
			if _, err := lookup(name); err != nil {
				t.Error(err)
			}
		}
	}
}

// rankMain is a rank process: it opens its device and World from the
// launcher's environment and runs the rank body args[0] names.
func rankMain(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want a rank body's name")
	}
	body, err := lookup(args[0])
	if err != nil {
		return err
	}
	l, ok, err := ranks.FromEnv()
	if err != nil || !ok {
		return fmt.Errorf("launch environment: ok %v: %v", ok, err)
	}
	dev, err := ranks.Open(ranks.Options{Dir: os.Getenv("FMPL_TEST_DIR"), Link: os.Getenv("FMPL_TEST_LINK"),
		Peers: os.Getenv("FMPL_TEST_PEERS"), Node: uint16(l.Rank + 1), RegionSize: 16 << 20})
	if err != nil {
		return err
	}
	w, err := fmpl.Init(dev.Driver, fmpl.Config{Rank: l.Rank, Size: l.Size, Count: 16})
	if err != nil {
		dev.Close()
		return err
	}
	if err := body.run(w); err != nil {
		return fmt.Errorf("rank %d: %w", l.Rank, err)
	}
	if !body.noFinalize {
		if err := w.Finalize(); err != nil {
			return fmt.Errorf("rank %d: %w", l.Rank, err)
		}
	}
	if s := w.Stats(); s.Protocol != 0 {
		return fmt.Errorf("rank %d: %d protocol violations", l.Rank, s.Protocol)
	}
	if os.Getenv("DIMMNET_KEY") != "" { // the key was used: sessions were made (mirrored within 10 ms)
		for end := time.Now().Add(2 * time.Second); dev.Driver.Counter(uapi.CtrAuthSessions) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(end) {
				return fmt.Errorf("rank %d: keyed, but no authenticated session was made", l.Rank)
			}
		}
	}
	fmt.Println("rank", l.Rank, "ok")
	if body.noFinalize {
		return nil // a goroutine may still use the device: the process exit takes it down
	}
	return dev.Close()
}

// hangGuard bounds a test's processes: a test that hangs fails with the
// ranks' output instead of running into the package's timeout. It is no
// performance assertion: a correct run takes a fraction of it.
const hangGuard = 90 * time.Second

// runRanks runs the rank body name on n rank processes and returns each
// rank's stdout; it fails the test if any rank fails.
func runRanks(t *testing.T, n int, name string, env ...string) []string {
	t.Helper()
	outs, errs := startRanks(t, n, name, env...)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d of %s: %v\nstdout: %s", r, name, err, outs[r])
		}
	}
	return outs
}

func startRanks(t *testing.T, n int, name string, env ...string) ([]string, []error) {
	t.Helper()
	return startRanksOn(t, nil, n, name, env...)
}

// startRanksOn is startRanks with the ranks started inside seg's network
// namespace (nil: this process's), rank r on seg's interface r.
func startRanksOn(t *testing.T, seg *netsetup.Segment, n int, name string, env ...string) ([]string, []error) {
	t.Helper()
	if _, err := lookup(name); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() + "/shm"
	cmds := make([]*exec.Cmd, n)
	bufs := make([]*bytes.Buffer, n)
	for r := 0; r < n; r++ {
		c, err := subproc.Command(roleRank, name)
		if err != nil {
			t.Fatal(err)
		}
		c.Env = append(c.Env, "FMPL_TEST_DIR="+dir, "OMPI_COMM_WORLD_RANK="+strconv.Itoa(r),
			"OMPI_COMM_WORLD_SIZE="+strconv.Itoa(n), "OMPI_COMM_WORLD_LOCAL_RANK="+strconv.Itoa(r))
		c.Env = append(c.Env, env...)
		bufs[r] = &bytes.Buffer{}
		c.Stdout = bufs[r]
		cmds[r] = c
	}
	if err := ranks.StartRanks(seg, cmds); err != nil {
		t.Fatal(err)
	}
	hung := false
	errs := subproc.WaitAll(cmds, hangGuard, func() {
		hung = true
		for _, c := range cmds {
			c.Process.Kill() // only the processes this test started
		}
	})
	if hung {
		t.Fatalf("%s: ranks still running after %v", name, hangGuard)
	}
	outs := make([]string, n)
	for r := range outs {
		outs[r] = bufs[r].String()
	}
	return outs, errs
}

// pattern fills b with bytes that depend on who sent it and when.
func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*31 + i*7 + i>>8)
	}
}

func checkPattern(b []byte, seed int) error {
	want := make([]byte, len(b))
	pattern(want, seed)
	if !bytes.Equal(b, want) {
		i := 0
		for i < len(b) && b[i] == want[i] {
			i++
		}
		return fmt.Errorf("content differs at byte %d of %d (seed %d)", i, len(b), seed)
	}
	return nil
}

func mustContain(t *testing.T, outs []string, s string) {
	t.Helper()
	for r, o := range outs {
		if !strings.Contains(o, s) {
			t.Errorf("rank %d: no %q in output %q", r, s, o)
		}
	}
}
