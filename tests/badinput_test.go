package tests

import (
	"encoding/binary"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// TestBadCommands posts descriptors the device must refuse. Each completes
// with an ERROR status naming the command and the reason, the ERROR register
// and the error counters move, nothing goes on the wire, and the device then
// still serves a normal PUSH.
func TestBadCommands(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	lms := a.Geometry().LinkMemSize
	cases := []struct {
		name string
		desc uapi.Desc
		want uapi.Errno
	}{
		{"opcode 0", uapi.Desc{Opcode: 0, DstNode: 2, Length: 8}, uapi.EBadOpcode},
		{"opcode 99", uapi.Desc{Opcode: 99, DstNode: 2, Length: 8}, uapi.EBadOpcode},
		{"opcode NumOpcodes", uapi.Desc{Opcode: uapi.NumOpcodes, DstNode: 2, Length: 8}, uapi.EBadOpcode},
		{"length 0", uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, Length: 0}, uapi.EBadLength},
		{"length MaxXfer+1", uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, Length: uapi.MaxXfer + 1}, uapi.EBadLength},
		{"PULL length 0", uapi.Desc{Opcode: uapi.OpPULL, DstNode: 2, Length: 0}, uapi.EBadLength},
		{"IPUSH length max", uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 2, Length: 0xffffffff}, uapi.EBadLength},
		{"unaligned local", uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, Length: 64, LocalAddr: 4}, uapi.EBadAlign},
		{"unaligned remote", uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, Length: 64, RemoteAddr: 1<<20 + 1}, uapi.EBadAlign},
		{"PULL unaligned remote", uapi.Desc{Opcode: uapi.OpPULL, DstNode: 2, Length: 64, RemoteAddr: 12}, uapi.EBadAlign},
		{"IPUSH unaligned local", uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 2, Length: 64, LocalAddr: 2}, uapi.EBadAlign},
		{"local past link memory", uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, Length: 64, LocalAddr: lms - 8}, uapi.EBadAddr},
		{"local far outside", uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 2, Length: 64, LocalAddr: 1 << 40}, uapi.EBadAddr},
		{"local wraps", uapi.Desc{Opcode: uapi.OpPULL, DstNode: 2, Length: 4096, LocalAddr: ^uint64(0) &^ 7}, uapi.EBadAddr},
		{"destination is self", uapi.Desc{Opcode: uapi.OpPUSH, DstNode: 1, Length: 64}, uapi.EBadNode},
		{"IPUSH to self", uapi.Desc{Opcode: uapi.OpIPUSH, DstNode: 1, Length: 64}, uapi.EBadNode},
		{"unknown flag 0x80", uapi.Desc{Opcode: uapi.OpPUSH, Flags: 0x80, DstNode: 2, Length: 64}, uapi.EBadFlags},
		{"unknown flag 0x08", uapi.Desc{Opcode: uapi.OpNOP, Flags: 0x08 | uapi.FlagSignal}, uapi.EBadFlags},
		{"DIRECT_AMT on PUSH", uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagDirectAMT, DstNode: 2, Length: 64}, uapi.EBadFlags},
		{"READ_DONE bad AMT", uapi.Desc{Opcode: uapi.OpREADDONE, RemoteAddr: 1 << 20}, uapi.EBadAMT},
	}
	for i, c := range cases {
		c.desc.Cookie = 0xBAD00 + uint64(i)
		c.desc.SrcProc = a.GPID()
		errs, errCount := a.Counter(uapi.CtrCmdErrors), a.Region().Load64(uapi.RegErrorCount)
		idx := post(t, a, &c.desc)
		s := wait(t, a)
		if s.Type != uapi.StError || s.Opcode != c.desc.Opcode || s.CmdIndex() != idx || s.Cookie != c.desc.Cookie || s.Err != c.want {
			t.Errorf("%s: got %v, want ERROR cmd#%d %v cookie %#x: %v", c.name, s, idx, c.desc.Opcode, c.desc.Cookie, c.want)
		}
		e, op, ei := a.LastError()
		if e != c.want || op != c.desc.Opcode || ei != uint32(idx) {
			t.Errorf("%s: ERROR register says %v op %v cmd#%d, want %v op %v cmd#%d", c.name, e, op, ei, c.want, c.desc.Opcode, idx)
		}
		if got := a.Counter(uapi.CtrCmdErrors) - errs; got != 1 {
			t.Errorf("%s: CMD_ERRORS moved by %d, want 1", c.name, got)
		}
		if got := a.Region().Load64(uapi.RegErrorCount) - errCount; got != 1 {
			t.Errorf("%s: ERROR_COUNT moved by %d, want 1", c.name, got)
		}
	}
	noStatus(t, a)
	noStatus(t, b)
	if n := a.Counter(uapi.CtrTxPkts); n != 0 {
		t.Errorf("refused commands sent %d packets", n)
	}
	if n := a.Counter(uapi.CtrCmds); n != uint64(len(cases)) {
		t.Errorf("CMDS = %d, want %d", n, len(cases))
	}
	// The device keeps serving, and an error does not fake a completion.
	goodPush(t, a, b, 1<<20, 9)
	if n := a.Counter(uapi.CtrCmdErrors); n != uint64(len(cases)) {
		t.Errorf("CMD_ERRORS = %d after a good PUSH, want %d", n, len(cases))
	}
	noStatus(t, a)
}

// TestRemotePushOutsideWindow: the receiver refuses a PUSH outside the window
// it exposes; the sender's command fails with REMOTE_ADDR and nothing lands
// outside the window, even for a PUSH that starts inside and runs past it.
func TestRemotePushOutsideWindow(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	const winBase, winSize = 1 << 20, 64 << 10
	b.SetWindow(winBase, winSize)
	lm := b.LinkMem()
	const fill = 0xEE
	for i := uint64(0); i < 4<<20; i++ {
		lm[i] = fill
	}
	data := pattern(8192, 5)
	a.CopyIn(0, data)

	// Entirely outside.
	bad := b.Counter(uapi.CtrRxBadAddr)
	idx, err := a.Push(2, 0, 2<<20, 4096, 0, 0x51)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, a, uapi.OpPUSH, idx, 0x51, uapi.ERemoteAddr)
	if got := b.Counter(uapi.CtrRxBadAddr) - bad; got != 1 {
		t.Errorf("receiver RX_BAD_ADDR moved by %d, want 1", got)
	}
	// Below the window.
	idx, err = a.Push(2, 0, winBase-4096, 4096, uapi.FlagSignal, 0x52)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, a, uapi.OpPUSH, idx, 0x52, uapi.ERemoteAddr)
	// Straddling the window's end: the first packet is inside, the second not.
	bad = b.Counter(uapi.CtrRxBadAddr)
	idx, err = a.Push(2, 0, winBase+winSize-4096, 8192, uapi.FlagSignal, 0x53)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, a, uapi.OpPUSH, idx, 0x53, uapi.ERemoteAddr)
	if got := b.Counter(uapi.CtrRxBadAddr) - bad; got != 1 {
		t.Errorf("receiver RX_BAD_ADDR moved by %d for the straddling PUSH, want 1", got)
	}
	noStatus(t, b) // a refused message gives the receiver no PUSH status
	if e, op, _ := a.LastError(); e != uapi.ERemoteAddr || op != uapi.OpPUSH {
		t.Errorf("ERROR register %v %v, want REMOTE_ADDR PUSH", e, op)
	}
	if !allBytes(lm[:winBase], fill) || !allBytes(lm[winBase+winSize:4<<20], fill) {
		t.Fatal("bytes outside the window were written")
	}
	// The device and the peer's sequence stay usable.
	goodPush(t, a, b, winBase, 6)
	if !allBytes(lm[:winBase], fill) || !allBytes(lm[winBase+winSize:4<<20], fill) {
		t.Fatal("bytes outside the window were written")
	}
}

// TestIPushNoAMTEntry: an IPUSH from a sender the receiver's AMT Address
// Table does not map is refused there, and the sender learns why.
func TestIPushNoAMTEntry(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	if _, err := b.SetRing(0, 1<<20, 64<<10, false); err != nil {
		t.Fatal(err)
	}
	a.CopyIn(0, pattern(1000, 1))
	idx, err := a.IPush(2, uapi.GPID(2, 0), 0, 1000, uapi.FlagSignal, 0, 0x71)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, a, uapi.OpIPUSH, idx, 0x71, uapi.ENoAMTEntry)
	if n := b.Counter(uapi.CtrIPushNoEntry); n != 1 {
		t.Errorf("receiver IPUSH_NOENTRY = %d, want 1", n)
	}
	if n := b.Counter(uapi.CtrRxIPush); n != 0 {
		t.Errorf("receiver placed %d IPUSH packets", n)
	}
	noStatus(t, b)
	// Mapped, the same IPUSH goes through.
	if err := b.MapSender(a.GPID(), 0); err != nil {
		t.Fatal(err)
	}
	idx, err = a.IPush(2, uapi.GPID(2, 0), 0, 1000, uapi.FlagSignal, 0, 0x72)
	if err != nil {
		t.Fatal(err)
	}
	s := waitType(t, b, uapi.StIPUSHMsg)
	if s.Length != 1000 || s.SrcProc != a.GPID() {
		t.Fatalf("receiver status %v", s)
	}
	expectDone(t, a, uapi.OpIPUSH, idx, 0x72)
	// Unmapped again: refused again.
	if err := b.UnmapSender(a.GPID()); err != nil {
		t.Fatal(err)
	}
	idx, err = a.IPush(2, uapi.GPID(2, 0), 0, 1000, 0, 0, 0x73)
	if err != nil {
		t.Fatal(err)
	}
	expectError(t, a, uapi.OpIPUSH, idx, 0x73, uapi.ENoAMTEntry)
	if n := b.Counter(uapi.CtrIPushNoEntry); n != 2 {
		t.Errorf("receiver IPUSH_NOENTRY = %d, want 2", n)
	}
}

// TestPullOutsideWindow: a PULL of a range the remote node does not expose
// fails with REMOTE_ADDR and brings nothing back.
func TestPullOutsideWindow(t *testing.T) {
	_, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	const winBase, winSize = 1 << 20, 64 << 10
	b.SetWindow(winBase, winSize)
	b.CopyIn(0, pattern(4<<20, 3))
	for i, r := range []struct{ remote, n uint64 }{
		{2 << 20, 4096},                  // beyond
		{0, 4096},                        // below
		{winBase + winSize - 4096, 8192}, // straddling the end
		{winBase - 8, 16},                // straddling the start
	} {
		cookie := uint64(0x9000 + i)
		idx, err := a.Pull(2, 0, r.remote, uint32(r.n), cookie)
		if err != nil {
			t.Fatal(err)
		}
		expectError(t, a, uapi.OpPULL, idx, cookie, uapi.ERemoteAddr)
		if got := b.Counter(uapi.CtrRxBadAddr); got != uint64(i+1) {
			t.Errorf("pull %d: receiver RX_BAD_ADDR = %d, want %d", i, got, i+1)
		}
	}
	if !allBytes(a.LinkMem()[:16<<10], 0) {
		t.Fatal("a refused PULL wrote local link memory")
	}
	if n := b.Counter(uapi.CtrRxPull); n != 0 {
		t.Errorf("RX_PULL = %d, want 0", n)
	}
	// Inside the window it works.
	idx, err := a.Pull(2, 0, winBase, 4096, 0x9100)
	if err != nil {
		t.Fatal(err)
	}
	s := waitType(t, a, uapi.StPULLDone)
	if s.Cookie != 0x9100 || s.CmdIndex() != idx || s.Length != 4096 {
		t.Fatalf("PULL_DONE %v", s)
	}
	if got, want := a.LinkMem()[:4096], b.LinkMem()[winBase:winBase+4096]; string(got) != string(want) {
		t.Fatalf("pulled data differs at %s", firstDiff(got, want))
	}
}

// TestMalformedFrames injects raw frames through the hub: garbage, a frame of
// another EtherType and truncated or inconsistent dimmnet frames. The device
// counts and drops them and keeps serving.
func TestMalformedFrames(t *testing.T) {
	l, ds := cluster(t, vdev.Config{}, 4096, 2)
	a, b := ds[0], ds[1]
	port, err := l.Hub.Attach(wire.NodeMAC(77))
	if err != nil {
		t.Fatal(err)
	}
	defer port.Close()
	dst, src := wire.NodeMAC(2), wire.NodeMAC(77)
	eth := func(etype uint16, body []byte) []byte {
		f := append(append(append([]byte{}, dst...), src...), byte(etype>>8), byte(etype))
		return append(f, body...)
	}
	good := func(h wire.Header, payload []byte) []byte {
		return wire.AppendFrame(nil, dst, src, &h, payload)
	}
	hdr := wire.Header{Version: wire.Version1, Type: wire.TypePush, SrcNode: 77, DstNode: 2, Seq: 1,
		MsgLen: 64, Addr: 1 << 20, Flags: wire.FlagFirst | wire.FlagLast | wire.FlagSeq}
	junk := pattern(200, 0x5A)

	send := func(what string, f []byte) {
		t.Helper()
		if err := port.Send(f); err != nil {
			t.Fatalf("inject %s: %v", what, err)
		}
	}
	var malformed, foreign uint64
	send("garbage", eth(0x88B5, junk)) // version byte 0x5A
	malformed++
	send("IPv6", eth(0x86DD, junk))
	foreign++
	send("ARP", eth(0x0806, junk[:28]))
	foreign++
	f := good(hdr, pattern(64, 1))
	send("truncated header", f[:wire.EthHeaderLen+30])
	malformed++
	f = good(hdr, pattern(64, 1))
	send("truncated payload", f[:len(f)-10]) // PayloadLen claims more than the frame holds
	malformed++
	send("ethertype only", eth(0x88B5, nil))
	malformed++
	bt := hdr
	bt.Type = 42
	send("bad type", good(bt, nil))
	malformed++
	bv := hdr
	bv.Version = 9
	send("bad version", good(bv, nil))
	malformed++
	other := hdr
	other.DstNode = 1 // addressed to node 2's MAC but to node 1 in the header
	send("wrong destination node", good(other, pattern(64, 1)))
	malformed++
	self := hdr
	self.SrcNode = 2
	send("from itself", good(self, pattern(64, 1)))
	malformed++
	f = good(hdr, pattern(64, 1))
	f[wire.EthHeaderLen+2] |= byte(wire.FlagCRC) // claims a CRC it does not carry
	binary.LittleEndian.PutUint32(f[wire.EthHeaderLen+60:], 0xdeadbeef)
	send("bad CRC", f)
	crcFail := uint64(1)

	// The hub queues per destination in order: once a PUSH sent after the
	// injected frames has landed, every injected frame has been handled.
	goodPush(t, a, b, 2<<20, 4)
	if n := b.Counter(uapi.CtrRxMalformed); n != malformed {
		t.Errorf("RX_MALFORMED = %d, want %d", n, malformed)
	}
	if n := b.Counter(uapi.CtrRxForeign); n != foreign {
		t.Errorf("RX_FOREIGN = %d, want %d", n, foreign)
	}
	if n := b.Counter(uapi.CtrCRCFail); n != crcFail {
		t.Errorf("CRC_FAIL = %d, want %d", n, crcFail)
	}
	if !allBytes(b.LinkMem()[1<<20:1<<20+4096], 0) {
		t.Error("a malformed frame's payload was placed")
	}
	if n := b.Counter(uapi.CtrRxPkts); n != 1 {
		t.Errorf("RX_PKTS = %d, want only the good PUSH's 1", n)
	}
	noStatus(t, b)
	if p := port.Recv(); p != nil {
		t.Errorf("the device answered a malformed frame with %d bytes", len(p))
	}
	goodPush(t, a, b, 3<<20, 8)
}
