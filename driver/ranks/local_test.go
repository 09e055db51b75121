package ranks

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/internal/subproc"
)

func init() {
	subproc.Register("ranks-test-job", func([]string) error {
		if os.Getenv("PMI_RANK") == "1" {
			fmt.Fprintln(os.Stderr, "rank 1 saw the barrier time out")
			return errors.New("gave up")
		}
		return nil
	})
}

func TestMain(m *testing.M) {
	subproc.Main()
	os.Exit(m.Run())
}

// TestFailedRankQuotesItsStderr: a job whose caller discards what the
// ranks print still says why a rank failed, so a failure seen once (under
// load, in CI) can be read from the error alone.
func TestFailedRankQuotesItsStderr(t *testing.T) {
	_, err := RunLocal(LocalJob{Role: "ranks-test-job", NP: 2, Link: "shm", Args: func(string, string) []string { return nil }})
	if !errors.Is(err, ErrRankFailed) {
		t.Fatalf("RunLocal: %v, want %v", err, ErrRankFailed)
	}
	for _, want := range []string{"rank 1", "the barrier time out", "gave up"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// TestTailKeepsTheEnd: the quoted tail is the last tailBytes written,
// however the writes are cut.
func TestTailKeepsTheEnd(t *testing.T) {
	var tl tail
	var all []byte
	for i := range 500 {
		s := []byte(fmt.Sprintf("line %d\n", i))
		all = append(all, s...)
		tl.Write(s)
	}
	if want := all[len(all)-tailBytes:]; string(tl.b) != string(want) {
		t.Fatalf("tail %q..., want %q...", tl.b[:40], want[:40])
	}
}
