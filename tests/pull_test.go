package tests

import (
	"bytes"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// TestPull: a PULL brings remote bytes back byte for byte and completes with
// PULL_DONE carrying the cookie; small and large (many-packet) transfers.
func TestPull(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	remote := pattern(3<<20, 17)
	b.CopyIn(1<<20, remote)
	cases := []struct {
		name          string
		local, remote uint64
		n             int
	}{
		{"8 bytes", 0, 1 << 20, 8},
		{"odd length", 4096, 1<<20 + 8, 1001},
		{"one packet", 8192, 1<<20 + 4096, 4096},
		{"1 MiB", 1 << 20, 1<<20 + 8, 1 << 20},
		{"3 MiB minus 8", 4 << 20, 1<<20 + 8, 3<<20 - 8},
	}
	for i, c := range cases {
		cookie := uint64(0xABC000 + i)
		pkts, served := a.Counter(uapi.CtrRxPkts), b.Counter(uapi.CtrRxPull)
		idx, err := a.Pull(2, c.local, c.remote, uint32(c.n), cookie)
		if err != nil {
			t.Fatal(err)
		}
		s := waitType(t, a, uapi.StPULLDone)
		if s.Cookie != cookie || s.CmdIndex() != idx || s.Opcode != uapi.OpPULL || s.Length != uint32(c.n) ||
			s.Addr != c.local || s.SrcNode != 2 {
			t.Fatalf("%s: PULL_DONE %v, want cmd#%d cookie %#x len %d addr %#x", c.name, s, idx, cookie, c.n, c.local)
		}
		want := b.LinkMem()[c.remote : c.remote+uint64(c.n)]
		if got := a.LinkMem()[c.local : c.local+uint64(c.n)]; !bytes.Equal(got, want) {
			t.Fatalf("%s: pulled data differs at %s", c.name, firstDiff(got, want))
		}
		if got, want := a.Counter(uapi.CtrRxPkts)-pkts, uint64((c.n+4095)/4096); got != want {
			t.Errorf("%s: %d response packets placed, want %d", c.name, got, want)
		}
		if got := b.Counter(uapi.CtrRxPull) - served; got != 1 {
			t.Errorf("%s: RX_PULL moved by %d, want 1", c.name, got)
		}
		noStatus(t, b) // the remote side's driver hears nothing of a PULL
	}
	// Bytes just past the last PULL's target were not written.
	if !allBytes(a.LinkMem()[4<<20+3<<20-8:8<<20], 0) {
		t.Error("PULL wrote past its target range")
	}
	noStatus(t, a)
}

// TestPullsInFlight: several PULLs posted back to back each complete once
// with their own cookie and data.
func TestPullsInFlight(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	b.CopyIn(0, pattern(1<<20, 23))
	const n = 8
	idx := make([]uint64, n)
	for i := range idx {
		var err error
		if idx[i], err = a.Pull(2, uint64(i)<<17, uint64(i)<<17, 100_000+uint32(i)*8, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]bool{}
	for range n {
		s := waitType(t, a, uapi.StPULLDone)
		i := s.Cookie
		if i >= n || seen[i] || s.CmdIndex() != idx[i] {
			t.Fatalf("PULL_DONE %v: unknown, duplicate or wrong index", s)
		}
		seen[i] = true
		m := uint64(100_000 + i*8)
		if got, want := a.LinkMem()[i<<17:i<<17+m], b.LinkMem()[i<<17:i<<17+m]; !bytes.Equal(got, want) {
			t.Fatalf("PULL %d differs at %s", i, firstDiff(got, want))
		}
	}
	noStatus(t, a)
}

// TestDevHeadRing: in device-head mode the driver releases with READ_DONE
// and the device moves the AMT head; a READ_DONE that would move the head
// outside [head, tail], or on a ring not in that mode, fails with BAD_HEAD.
func TestDevHeadRing(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 1024, 2)
	a, b := ds[0], ds[1]
	const base, size = 1 << 20, 4096
	ring, err := b.SetRing(3, base, size, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 3); err != nil {
		t.Fatal(err)
	}
	// sync posts a signaled NOP on b: commands run in order, so its DONE
	// means every READ_DONE before it has executed.
	sync := func(cookie uint64) {
		t.Helper()
		idx := post(t, b, &uapi.Desc{Opcode: uapi.OpNOP, Flags: uapi.FlagSignal, Cookie: cookie})
		expectDone(t, b, uapi.OpNOP, idx, cookie)
	}
	// Four times the ring's size in lock step: only a moving head lets it through.
	for i := 0; i < 16; i++ {
		data := pattern(1000, byte(i))
		a.CopyIn(0, data)
		post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 2, DstProc: uapi.GPID(2, 0), SrcProc: a.GPID(), Length: 1000, Imm: uint64(i)})
		s := waitType(t, b, uapi.StIPUSHMsg)
		if s.Imm != uint64(i) || s.AMT != 3 {
			t.Fatalf("status %v", s)
		}
		if got := ring.Data(&s); !bytes.Equal(got, data) {
			t.Fatalf("message %d differs at %s", i, firstDiff(got, data))
		}
		before := ring.Head()
		if err := ring.ReleaseTo(s.End); err != nil {
			t.Fatal(err)
		}
		sync(uint64(i))
		if h := ring.Head(); h != s.End || h == before {
			t.Fatalf("message %d: head %d after READ_DONE to %d (was %d)", i, h, s.End, before)
		}
	}
	if ring.Tail() < 3*size {
		t.Fatalf("tail %d: the ring did not wrap", ring.Tail())
	}
	// Beyond the tail.
	head, tail := ring.Head(), ring.Tail()
	errs := b.Counter(uapi.CtrCmdErrors)
	idx := post(t, b, &uapi.Desc{Opcode: uapi.OpREADDONE, RemoteAddr: 3, Imm: tail + 8, Cookie: 0xD1})
	expectError(t, b, uapi.OpREADDONE, idx, 0xD1, uapi.EBadHead)
	if e, op, ei := b.LastError(); e != uapi.EBadHead || op != uapi.OpREADDONE || ei != uint32(idx) {
		t.Fatalf("ERROR register %v %v cmd#%d", e, op, ei)
	}
	// Behind the head.
	idx = post(t, b, &uapi.Desc{Opcode: uapi.OpREADDONE, RemoteAddr: 3, Imm: head - 8, Cookie: 0xD2})
	expectError(t, b, uapi.OpREADDONE, idx, 0xD2, uapi.EBadHead)
	if h := ring.Head(); h != head {
		t.Fatalf("a refused READ_DONE moved the head to %d from %d", h, head)
	}
	if got := b.Counter(uapi.CtrCmdErrors) - errs; got != 2 {
		t.Errorf("CMD_ERRORS moved by %d, want 2", got)
	}
	// On a ring the driver owns.
	if _, err := b.SetRing(4, 2<<20, size, false); err != nil {
		t.Fatal(err)
	}
	idx = post(t, b, &uapi.Desc{Opcode: uapi.OpREADDONE, RemoteAddr: 4, Imm: 0, Cookie: 0xD3})
	expectError(t, b, uapi.OpREADDONE, idx, 0xD3, uapi.EBadHead)
	// A signaled, valid READ_DONE (to the same position) completes with DONE.
	idx = post(t, b, &uapi.Desc{Opcode: uapi.OpREADDONE, Flags: uapi.FlagSignal, RemoteAddr: 3, Imm: tail, Cookie: 0xD4})
	expectDone(t, b, uapi.OpREADDONE, idx, 0xD4)
	noStatus(t, b)
}
