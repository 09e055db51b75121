package tests

import (
	"bytes"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
)

// lossyPair is two devices whose receive sides are faulted.
func lossyPair(t *testing.T, cfg vdev.Config, payload int, fc impair.Config) (*vdev.Local, *driver.Driver, *driver.Driver, []*impair.Port) {
	t.Helper()
	var fps []*impair.Port
	l, ds := wrappedCluster(t, cfg, payload, 2, func(d *vdev.Device, p link.Port) link.Port {
		c := fc
		c.Seed += int64(d.Node())
		fp := impair.Wrap(p, c).(*impair.Port)
		fps = append(fps, fp)
		return fp
	})
	return l, ds[0], ds[1], fps
}

// Under loss, duplication, reordering and corruption every byte of every
// transfer arrives exactly once and in order: PUSH content, and IPUSH
// per-packet statuses showing each packet exactly once, in sequence.
func TestLossyLinkDeliversExactlyOnce(t *testing.T) {
	for _, spec := range []string{
		"loss=0.01,seed=1",
		"loss=0.1,seed=2",
		"loss=0.3,seed=3",
		"reorder=0.05,dup=0.05,seed=4",
		"loss=0.05,dup=0.02,reorder=0.05,corrupt=0.02,seed=5",
	} {
		t.Run(spec, func(t *testing.T) {
			fc, err := impair.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			_, a, b, fps := lossyPair(t, vdev.Config{}, 1024, fc)
			ring, err := b.SetRing(0, 4<<20, 1<<20, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.MapSender(a.GPID(), 0); err != nil {
				t.Fatal(err)
			}
			// PUSH: 256 KiB in 1 KiB packets
			data := pattern(256<<10, 9)
			a.CopyIn(0, data)
			idx := post(t, a, &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: a.GPID(), Length: uint32(len(data)), RemoteAddr: 1 << 20, Cookie: 1})
			if s := waitType(t, b, uapi.StPUSH); s.Length != uint32(len(data)) {
				t.Fatalf("PUSH status %v", s)
			}
			if !bytes.Equal(b.LinkMem()[1<<20:1<<20+len(data)], data) {
				t.Fatal("PUSH data differs after recovery")
			}
			expectDone(t, a, uapi.OpPUSH, idx, 1)
			// IPUSH with per-packet statuses: 100 packets, each exactly once, in order
			msg := pattern(100<<10, 3)
			a.CopyIn(512<<10, msg)
			post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagPktStatus, DstNode: 2, DstProc: b.GPID(), SrcProc: a.GPID(), LocalAddr: 512 << 10, Length: uint32(len(msg))})
			ra := driver.NewReassembler()
			var off uint32
			for done := false; !done; {
				s := waitType(t, b, uapi.StIPUSHPkt)
				if s.Offset != off {
					t.Fatalf("packet at offset %d, want %d: a packet came twice, late or not at all", s.Offset, off)
				}
				off += s.Length
				var m *driver.Message
				m, done = ra.Add(&s, ring.Data(&s))
				ring.ReleaseTo(s.End)
				if done && !bytes.Equal(m.Data, msg) {
					t.Fatal("IPUSH message differs after recovery")
				}
			}
			noStatus(t, b)
			stats := func() (st impair.Stats) {
				for _, fp := range fps {
					s := fp.Stats()
					st.Dropped += s.Dropped
					st.Duplicated += s.Duplicated
					st.Corrupted += s.Corrupted
				}
				return st
			}
			// A frame is counted corrupted when the impairment takes it in,
			// and may still be held back (reordered) when the transfers
			// end: the last ACKs. Every corrupted frame is caught once it
			// is delivered; wait for the held ones (a bound, not a timing).
			crcFail := func() uint64 { return a.Counter(uapi.CtrCRCFail) + b.Counter(uapi.CtrCRCFail) }
			for end := time.Now().Add(10 * time.Second); crcFail() != stats().Corrupted && time.Now().Before(end); {
				time.Sleep(5 * time.Millisecond)
			}
			st := stats()
			retx := a.Counter(uapi.CtrRetransmits) + b.Counter(uapi.CtrRetransmits)
			if st.Dropped > 0 && retx == 0 {
				t.Fatalf("%d frames dropped but no retransmission", st.Dropped)
			}
			if st.Duplicated > 0 && a.Counter(uapi.CtrDuplicates)+b.Counter(uapi.CtrDuplicates) == 0 {
				t.Fatalf("%d frames duplicated but no duplicate counted", st.Duplicated)
			}
			if crc := crcFail(); crc != st.Corrupted {
				t.Fatalf("CRC_FAIL %d, but %d frames corrupted: every one must be caught", crc, st.Corrupted)
			}
			t.Logf("%s: dropped %d dup %d corrupted %d -> retransmits %d timeouts %d duplicates %d crc %d", spec,
				st.Dropped, st.Duplicated, st.Corrupted, retx, a.Counter(uapi.CtrTimeouts)+b.Counter(uapi.CtrTimeouts),
				a.Counter(uapi.CtrDuplicates)+b.Counter(uapi.CtrDuplicates), a.Counter(uapi.CtrCRCFail)+b.Counter(uapi.CtrCRCFail))
		})
	}
}

// A peer that stops answering yields UNREACHABLE after MaxTimeouts, not a hang.
func TestUnreachablePeer(t *testing.T) {
	_, a, _, _ := lossyPair(t, vdev.Config{MaxTimeouts: 5}, 1024, impair.Config{Loss: 1, Seed: 1})
	a.CopyIn(0, pattern(4096, 1))
	idx := post(t, a, &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: a.GPID(), Length: 4096, RemoteAddr: 1 << 20, Cookie: 77})
	s := expectError(t, a, uapi.OpPUSH, idx, 77, uapi.EUnreachable)
	if n := a.Counter(uapi.CtrTimeouts); n != 5 {
		t.Fatalf("TIMEOUTS = %d, want 5 (MaxTimeouts) before %v", n, s)
	}
	fence := post(t, a, &uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal, Cookie: 1})
	expectDone(t, a, uapi.OpFENCE, fence, 1)
}
