package lmmcbench

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/lmmc"
)

func TestMain(m *testing.M) {
	subproc.Main()
	os.Exit(m.Run())
}

// Each node a process, paging over shared memory and over UDP: every
// message of every round arrives (a lost or misplaced write would time
// the run out), the devices count no misplaced write, every node's tables
// hold, and the pair check holds between every sender and receiver, as in
// one process. The patterns page (faults and page copies happen), and the
// paper's measurements come back from two processes' clocks.
func TestProcsAcrossMedia(t *testing.T) {
	cases := []struct {
		link, pattern, policy string
	}{
		{"shm", "pingpong", "lru"}, {"shm", "alltoall", "comm"},
		{"udp", "neighbour", "fifo"}, {"udp", "paper", "lru"},
	}
	for _, c := range cases {
		r, err := Procs(c.policy, c.pattern, 8, 3, BenchConfig{Rounds: 20}, c.link)
		if err != nil {
			t.Fatalf("%s %s/%s: %v", c.link, c.pattern, c.policy, err)
		}
		j, _ := json.Marshal(r)
		t.Logf("%s: %s", c.link, j)
		if r.Misplaced != 0 {
			t.Errorf("%s %s: %d misplaced", c.link, c.pattern, r.Misplaced)
		}
		if r.Faults == 0 || r.Writes == 0 {
			t.Errorf("%s %s: %d writes, %d faults: nothing paged", c.link, c.pattern, r.Writes, r.Faults)
		}
		if c.pattern == "paper" {
			if r.FirstMsgUs <= 0 || r.SecondMsgUs <= 0 || len(r.OneWay) == 0 || r.WriteRoutineUs <= 0 || r.ArrivalToLinkMemUs <= 0 {
				t.Errorf("%s paper: figures missing: %+v", c.link, r)
			}
			continue
		}
		if r.PagesCopied == 0 {
			t.Errorf("%s %s: no page copied", c.link, c.pattern)
		}
	}
}

// The pair check across processes fails by name when a sender's and a
// receiver's tables disagree.
func TestMergeCatchesTableMismatch(t *testing.T) {
	reps := []NodeReport{
		{Node: 1, Send: map[uint16]lmmc.FrameTable{2: {Base: 0, Ports: []uint16{3, 4}}}, Recv: map[uint16]lmmc.FrameTable{2: {Base: 2, Ports: []uint16{1, 0}}}},
		{Node: 2, Send: map[uint16]lmmc.FrameTable{1: {Base: 2, Ports: []uint16{1, 0}}}, Recv: map[uint16]lmmc.FrameTable{1: {Base: 0, Ports: []uint16{4, 3}}}},
	}
	if _, err := MergeReports("lru", "pingpong", 2, 2, reps); !errors.Is(err, lmmc.ErrPairMismatch) {
		t.Fatalf("swapped frames: %v, want ErrPairMismatch", err)
	}
	reps[1].Recv[1] = lmmc.FrameTable{Base: 0, Ports: []uint16{3, 4}}
	if _, err := MergeReports("lru", "pingpong", 2, 2, reps); err != nil {
		t.Fatalf("agreeing tables: %v", err)
	}
}

func TestUnknownLink(t *testing.T) {
	if _, err := Procs("lru", "pingpong", 2, 1, BenchConfig{}, "carrier-pigeon"); !errors.Is(err, ErrLink) {
		t.Fatalf("%v, want ErrLink", err)
	}
}
