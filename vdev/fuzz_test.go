package vdev

import (
	"encoding/binary"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// fuzzDevice is a device on a hub with a peer port the test reads, driven
// by hand (no engine goroutine) so a fuzz iteration is deterministic.
func fuzzDevice(t testing.TB) (*Device, link.Port) {
	d, err := New(Config{Node: 1, RegionSize: 1 << 20, CmdEntries: 16, StatusEntries: 16, AMTEntries: 4, AMTATEntries: 64})
	if err != nil {
		t.Fatal(err)
	}
	hub := link.NewHub(4096+wire.FrameOverhead, 64)
	p, _ := hub.Attach(d.MAC())
	d.AttachPort(p)
	peer, _ := hub.Attach(wire.NodeMAC(2))
	t.Cleanup(func() { d.Close() })
	// ring 0 of 4 KiB for GPID 32 (node 2, process 0)
	e := d.g.AMTOff
	d.r.Store64At(e+uapi.AMTBase, 8192)
	d.r.Store64At(e+uapi.AMTCfg, 4096|uint64(uapi.AMTFlagValid)<<32)
	d.amtat[32] = uapi.AMTATValid
	return d, peer
}

// FuzzRxFrame feeds arbitrary frames addressed to the device: it never
// panics, never writes outside link memory, and every frame is accounted
// for (placed, refused, counted as malformed or foreign, or a control frame).
func FuzzRxFrame(f *testing.F) {
	good := wire.AppendFrame(nil, wire.NodeMAC(1), wire.NodeMAC(2), &wire.Header{Version: wire.Version1, Type: wire.TypePush,
		Flags: wire.FlagFirst | wire.FlagLast | wire.FlagSeq, SrcNode: 2, DstNode: 1, SrcProc: 32, Seq: 1, MsgLen: 8, Addr: 64}, make([]byte, 8))
	f.Add(good)
	ip := wire.AppendFrame(nil, wire.NodeMAC(1), wire.NodeMAC(2), &wire.Header{Version: wire.Version1, Type: wire.TypeIPush,
		Flags: wire.FlagFirst | wire.FlagLast | wire.FlagPktStatus | wire.FlagSeq, SrcNode: 2, DstNode: 1, SrcProc: 32, Seq: 1, MsgLen: 16}, make([]byte, 16))
	f.Add(ip)
	var subs []byte
	for i, a := range []uint64{64, 1 << 40, 128} { // the second outside link memory: refused alone
		subs = wire.AppendSub(subs, &wire.Sub{Addr: a, MsgID: uint32(i + 1), Len: 8, SrcProc: 32}, make([]byte, 8))
	}
	f.Add(wire.AppendFrame(nil, wire.NodeMAC(1), wire.NodeMAC(2), &wire.Header{Version: wire.Version1, Type: wire.TypePushBatch,
		Flags: wire.FlagFirst | wire.FlagLast | wire.FlagSeq, SrcNode: 2, DstNode: 1, SrcProc: 32, Seq: 1, MsgLen: 3}, subs))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, frame []byte) {
		d, _ := fuzzDevice(t)
		holdForTest(t, d)
		before := make([]byte, 0)
		before = append(before, d.r[:d.g.LinkMemOff]...)
		fr := append(d.port.Buffer(), frame...)
		if len(fr) >= 12 {
			copy(fr[0:6], d.MAC()) // make it reach the device
		}
		if len(fr) >= 14 && frame[0]&1 == 0 { // and, half the time, be ours
			binary.BigEndian.PutUint16(fr[12:], uint16(wire.EtherType))
		}
		d.handle(fr, false)
		// The register page's identity and geometry are untouched.
		for _, off := range []uint32{uapi.RegMagic, uapi.RegLinkMemOff, uapi.RegLinkMemSize, uapi.RegCmdqOff} {
			if binary.LittleEndian.Uint64(before[off:]) != d.r.Load64(off) {
				t.Fatalf("register %#x changed", off)
			}
		}
		if st := d.r.Load64(uapi.RegStatqTail); st > d.g.StatqEntries {
			t.Fatalf("status tail %d", st)
		}
	})
}

// FuzzCommand posts arbitrary descriptors: each either runs or completes
// with an ERROR status naming it, and the device keeps serving.
func FuzzCommand(f *testing.F) {
	f.Add(uint64(uapi.OpPUSH)|2<<16, uint64(8)<<32, uint64(0), uint64(64), uint64(0))
	f.Add(uint64(99), uint64(0), uint64(1), uint64(3), uint64(0))
	f.Add(uint64(uapi.OpREADDONE), uint64(0), uint64(0), uint64(7), uint64(1<<40))
	f.Fuzz(func(t *testing.T, w0, w1, w2, w3, w5 uint64) {
		d, peer := fuzzDevice(t)
		desc := uapi.DescFromWords([8]uint64{w0, w1, w2, w3, 0xc0ffee, w5})
		d.r.WriteDesc(d.g.CmdqOff, &desc, 0)
		d.r.Store64(uapi.RegCmdqTail, 1)
		var now int64
		for i := 0; i < 8; i++ {
			stepHeld(d, &now)
			for f := peer.Recv(); f != nil; f = peer.Recv() {
				peer.Release(f)
			}
		}
		if d.cmdHead != 1 {
			t.Fatalf("command not consumed")
		}
		if d.r.Load64(uapi.RegErrorCount) > 0 {
			s := d.r.ReadStatus(d.g.StatqOff)
			if s.Type != uapi.StError || s.Err == uapi.EOK || s.Cookie != 0xc0ffee || s.End != 0 || s.Opcode != desc.Opcode {
				t.Fatalf("error status %v for %+v", s, desc)
			}
		}
	})
}
