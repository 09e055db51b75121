package vdev

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
)

// Two nodes paging towards each other, each with its command queue
// blocked (node 1 by a FENCE behind data node 2 holds, node 2 by
// MAX_INFLIGHT with its paging requests node 1 holds): each PAGE_DONE is
// posted behind the blocked command and runs ahead of it (docs/lmmc.md).
// Run in turn, such PAGE_DONEs deadlocked the pair (fuzz corpus
// 7fc6332d7c99b76e).
func TestPageDoneRunsAheadOfBlockedCommands(t *testing.T) {
	s := pfBegin(0x0b, 0x26)                               // window 16, hold mode, MAX_INFLIGHT 2
	s = s.page(1, 0).page(1, 1).page(1, 2)                 // node 2: a third request waits for flight room
	s = s.page(0, 0).push(0, 0, 0, 0).fence(0)             // node 1: its data behind its request, then a FENCE
	s = s.push(0, 0, 1, 1)                                 // and a command behind the FENCE
	s = s.both(4).consume(0).consume(1).both(8)            // each driver answers the request it got
	s = s.consume(0).consume(1).both(8).consume(0).both(8) // and the next ones
	r := pairScript(t, s)
	for n := range 2 {
		d := r.dev[n]
		dones := 0
		for _, c := range r.cmds[n] {
			if c.stats != 1 || c.err != uapi.EOK {
				t.Fatalf("node %d #%d (%s) ended %v after %d statuses", n+1, c.idx, c.desc.Opcode, c.err, c.stats)
			}
			if c.desc.Opcode == uapi.OpPAGEDONE {
				dones++
			}
		}
		if n == 0 && dones != 3 || n == 1 && dones != 1 {
			t.Fatalf("node %d posted %d PAGE_DONEs", n+1, dones)
		}
		// Each command was taken once: a slot run ahead is skipped, not run
		// again, when the head gets there.
		if got, want := d.r.Counter(uapi.CtrCmds), uint64(len(r.cmds[n])); got != want {
			t.Fatalf("node %d counted %d commands taken, %d posted", n+1, got, want)
		}
		if got := d.r.Load64(uapi.RegCmdqHead); got != uint64(len(r.cmds[n])) || len(d.cmdAhead.taken) != 0 {
			t.Fatalf("node %d CMDQ_HEAD %d of %d, %d slots still marked run ahead", n+1, got, len(r.cmds[n]), len(d.cmdAhead.taken))
		}
	}
	// Node 1's PAGE_DONE for node 2's first request completed before the
	// FENCE it was posted behind.
	var fence, pageDone *pfCmd
	for _, c := range r.cmds[0] {
		switch {
		case c.desc.Opcode == uapi.OpFENCE:
			fence = c
		case c.desc.Opcode == uapi.OpPAGEDONE && pageDone == nil:
			pageDone = c
		}
	}
	if pageDone.idx < fence.idx || pageDone.statAt > fence.statAt {
		t.Fatalf("PAGE_DONE #%d (status %d) did not run ahead of FENCE #%d (status %d)", pageDone.idx, pageDone.statAt, fence.idx, fence.statAt)
	}
}
