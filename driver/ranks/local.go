package ranks

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/dimmnet/dimmnet/internal/subproc"
)

// ErrRankFailed reports a rank of a RunLocal job that failed (wrapped,
// naming the rank and how it ended).
var ErrRankFailed = errors.New("ranks: a rank failed")

// LocalJob is np rank processes of this binary on one host, each running
// the subproc role Role, on the link Link: what the benchmarks that launch
// their own ranks (mpbench, its figures, acp-bench) start.
type LocalJob struct {
	Role     string
	NP       int
	Link     string
	NSPrefix string // prefix of the namespace of an afpacket segment (LocalMedium)
	// ChildEnv is set to 1 in every rank's environment, so the rank tells
	// this launch from an outside launcher's (mpirun) by it.
	ChildEnv string
	// Args gives the role's arguments, from the job's shared-memory
	// directory and the udp peers file ("" on other links).
	Args   func(shmDir, peers string) []string
	Stderr io.Writer // every rank's standard error; nil discards it (a failed rank's error quotes its last KiB either way)
}

// RunLocal makes the job's directory and medium (LocalMedium), starts its
// ranks (StartRanks) with the launch environment FromEnv reads
// (PMI_RANK, PMI_SIZE, MPI_LOCALNRANKS), waits for all of them, and
// returns rank 0's standard output, where the benchmarks print their
// records. A rank that fails is ErrRankFailed, naming it.
func RunLocal(j LocalJob) ([]byte, error) {
	dir, err := os.MkdirTemp("", "dimmnet-"+j.Role+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	peers, seg, err := LocalMedium(j.Link, dir, j.NSPrefix, j.NP)
	if err != nil {
		return nil, err
	}
	if seg != nil {
		defer seg.Close()
	}
	cmds := make([]*exec.Cmd, j.NP)
	tails := make([]*tail, j.NP)
	var out0 bytes.Buffer
	for r := range cmds {
		c, err := subproc.Command(j.Role, j.Args(dir+"/shm", peers)...)
		if err != nil {
			return nil, err
		}
		c.Env = append(c.Env, "PMI_RANK="+strconv.Itoa(r), "PMI_SIZE="+strconv.Itoa(j.NP), "MPI_LOCALNRANKS="+strconv.Itoa(j.NP))
		if j.ChildEnv != "" {
			c.Env = append(c.Env, j.ChildEnv+"=1")
		}
		if r == 0 {
			c.Stdout = &out0
		}
		tails[r] = &tail{}
		c.Stderr = tails[r]
		if j.Stderr != nil {
			c.Stderr = io.MultiWriter(tails[r], j.Stderr)
		}
		c.WaitDelay = stderrDrain // a child's child holding the pipe cannot hold Wait
		cmds[r] = c
	}
	if err := StartRanks(seg, cmds); err != nil {
		return nil, err
	}
	for r, e := range subproc.WaitAll(cmds, 0, nil) {
		if e != nil {
			return nil, fmt.Errorf("%s rank %d: %v (its stderr ends %q): %w", j.Role, r, e, tails[r].b, ErrRankFailed)
		}
	}
	return out0.Bytes(), nil
}

// stderrDrain bounds how long a rank's Wait waits, once the rank has
// exited, for its standard error's pipe to close.
const stderrDrain = 10 * time.Second

// tailBytes is how much of a rank's standard error a failure quotes: a
// rank that fails once under load (a test's flake) then says why even
// when the job's caller discards what the ranks print.
const tailBytes = 1024

// tail keeps the last tailBytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > tailBytes {
		t.b = append(t.b[:0], t.b[len(t.b)-tailBytes:]...)
	}
	return len(p), nil
}
