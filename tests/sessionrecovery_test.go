package tests

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// ctlPort lets a test black-hole receives or refuse sends at run time.
type ctlPort struct {
	link.Port
	dropRx   atomic.Bool
	failSend atomic.Bool
}

func (p *ctlPort) Recv() []byte {
	for {
		f := p.Port.Recv()
		if f == nil || !p.dropRx.Load() {
			return f
		}
		p.Port.Release(f)
	}
}

// Lossless is the hub's: timeouts wait the lossless floor (5 ms), so an
// engine kept off its core by a loaded machine is not taken for a peer
// that stopped answering before the test makes it stop.
func (p *ctlPort) Lossless() bool { return true }

func (p *ctlPort) Send(f []byte) error {
	if p.failSend.Load() {
		return link.ErrFull
	}
	return p.Port.Send(f)
}

func ctlPair(t *testing.T, cfg vdev.Config, n int) ([]*driver.Driver, []*ctlPort) {
	var cps []*ctlPort
	_, ds := wrappedCluster(t, cfg, 1024, n, func(_ *vdev.Device, p link.Port) link.Port {
		c := &ctlPort{Port: p}
		cps = append(cps, c)
		return c
	})
	return ds, cps
}

// After UNREACHABLE the sender starts a new session (new epoch, sequence 1);
// the receiver, which still expected N, follows the new epoch, so a later
// PUSH is placed whole before it completes (it once completed unplaced).
func TestResyncAfterUnreachable(t *testing.T) {
	ds, cps := ctlPair(t, vdev.Config{MaxTimeouts: 5}, 2)
	a, b := ds[0], ds[1]
	for i := 0; i < 3; i++ { // b now expects seq 4 from a
		goodPush(t, a, b, 1<<20, byte(i))
	}
	cps[1].dropRx.Store(true)
	a.CopyIn(0, pattern(64, 1))
	idx := post(t, a, &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: a.GPID(), Length: 64, RemoteAddr: 2 << 20, Cookie: 7})
	expectError(t, a, uapi.OpPUSH, idx, 7, uapi.EUnreachable)
	cps[1].dropRx.Store(false)
	data := pattern(12000, 77)
	a.CopyIn(0, data)
	idx = post(t, a, &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: a.GPID(), Length: 12000, RemoteAddr: 3 << 20, Cookie: 8})
	expectDone(t, a, uapi.OpPUSH, idx, 8)
	if got := b.LinkMem()[3<<20 : 3<<20+12000]; !bytes.Equal(got, data) {
		t.Fatalf("PUSH completed DONE but the receiver has different bytes at %s", firstDiff(got, data))
	}
}

// A link that refuses sends (ErrFull) for a few ms while a retransmission
// is due: every 100us retry counts as a timeout and the peer is declared
// unreachable although it never stopped answering.
func TestErrFullCountsAsTimeouts(t *testing.T) {
	ds, cps := ctlPair(t, vdev.Config{}, 2)
	a := ds[0]
	cps[1].dropRx.Store(true)
	a.CopyIn(0, pattern(64, 1))
	idx := post(t, a, &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: a.GPID(), Length: 64, RemoteAddr: 2 << 20, Cookie: 7})
	eventually(t, "sent", func() bool { return a.Counter(uapi.CtrTxPkts) >= 1 })
	cps[0].failSend.Store(true)
	time.Sleep(20 * time.Millisecond)
	cps[0].failSend.Store(false)
	cps[1].dropRx.Store(false)
	s := wait(t, a)
	t.Logf("status %v, timeouts %d", s, a.Counter(uapi.CtrTimeouts))
	if s.Type != uapi.StDone || s.CmdIndex() != idx {
		t.Errorf("a 20 ms busy link made the peer unreachable: %v (idx %d)", s, idx)
	}
}

// Two peers: node 1 stalls on a full ring at node 2 (hold mode) while node
// 3's messages keep being placed in another ring. One RING_FULL per stall?
func TestOneRingFullPerStallTwoPeers(t *testing.T) {
	ds, _ := ctlPair(t, vdev.Config{}, 3)
	a, b, c := ds[0], ds[1], ds[2]
	b.SetRingFullMode(uapi.RingFullHold)
	_, err := b.SetRing(0, 1<<20, 4096, false)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := b.SetRing(1, 2<<20, 64<<10, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(c.GPID(), 1); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ { // 6 KiB into a 4 KiB ring nobody drains
		a.CopyIn(uint64(i)<<12, pattern(1024, byte(i)))
		post(t, a, &uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 2, DstProc: uapi.GPID(2, 0), SrcProc: a.GPID(), Length: 1024, LocalAddr: uint64(i) << 12})
	}
	eventually(t, "a stall", func() bool { return b.Counter(uapi.CtrRingFullHolds) >= 1 })
	rf := 0
	for i := 0; i < 200; i++ {
		c.CopyIn(0, pattern(64, byte(i)))
		post(t, c, &uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 2, DstProc: uapi.GPID(2, 0), SrcProc: c.GPID(), Length: 64})
		for {
			s := wait(t, b)
			if s.Type == uapi.StRingFull {
				rf++
				continue
			}
			if s.Type == uapi.StIPUSHMsg && s.AMT == 1 {
				rc.ReleaseTo(s.End)
				break
			}
		}
	}
	t.Logf("RING_FULL statuses %d, RINGFULL_HOLDS %d, HOLDS %d", rf, b.Counter(uapi.CtrRingFullHolds), b.Counter(uapi.CtrHolds))
	if rf > 1 {
		t.Errorf("one stall of node 1 raised %d RING_FULL statuses while node 3's messages were placed", rf)
	}
}
