package fmpl_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver/fmpl"
)

// No rank leaves a barrier before every member has entered it: each rank
// notes its arrival in a file all share before it enters, late ranks
// changing from round to round, and checks on leaving that every member's
// note for that round is there. On the world (5 ranks, not a power of
// two) and on a communicator of the odd ranks.
var barrierRanks = map[string]rank{
	"barrierorder": {run: func(w *fmpl.World) error {
		f, err := os.OpenFile(os.Getenv("FMPL_TEST_BARFILE"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		p, me := w.Size(), w.Rank()
		key := fmpl.NoKey
		if me%2 == 1 {
			key = 1
		}
		odd, err := w.CommCreate(key)
		if err != nil {
			return err
		}
		round := func(name string, i int, c fmpl.Comm, members []int) error {
			if (i+me)%len(members) == 0 { // someone else is late each round
				time.Sleep(3 * time.Millisecond)
			}
			if _, err := fmt.Fprintf(f, "%s %d %d\n", name, i, me); err != nil {
				return err
			}
			if err := w.Barrier(c); err != nil {
				return fmt.Errorf("%s barrier %d: %w", name, i, err)
			}
			b, err := os.ReadFile(f.Name())
			if err != nil {
				return err
			}
			for _, r := range members {
				if !strings.Contains(string(b), fmt.Sprintf("%s %d %d\n", name, i, r)) {
					return fmt.Errorf("rank %d left %s barrier %d before rank %d entered it", me, name, i, r)
				}
			}
			return nil
		}
		var all, odds []int
		for r := 0; r < p; r++ {
			all = append(all, r)
			if r%2 == 1 {
				odds = append(odds, r)
			}
		}
		for i := 0; i < 12; i++ {
			if err := round("world", i, fmpl.CommWorld, all); err != nil {
				return err
			}
			if odd != fmpl.CommNull {
				if err := round("odd", i, odd, odds); err != nil {
					return err
				}
			}
		}
		if st := w.LastStages(); me%2 == 1 && st.Up != 1 { // two odd ranks: one round
			return fmt.Errorf("barrier of 2 took %d rounds, want 1", st.Up)
		}
		return w.Barrier(fmpl.CommWorld)
	}},
}

func TestBarrierWaitsForEveryMember(t *testing.T) {
	file := filepath.Join(t.TempDir(), "arrivals")
	mustContain(t, runRanks(t, 5, "barrierorder", "FMPL_TEST_BARFILE="+file), "ok")
}
