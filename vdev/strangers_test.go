package vdev

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// segment is a port that cannot vouch for its senders (a shared Ethernet
// segment without a key): the hub's KnowsPeer is hidden.
type segment struct{ link.Port }

// On a medium that cannot vouch for its senders, the device keeps at most
// maxStrangers of them; the rest are dropped and counted with nothing
// kept, and a stranger idle past strangerIdle gives its place to a new
// one.
func TestStrangersAreBoundedAndForgotten(t *testing.T) {
	d, err := New(Config{Node: 1, RegionSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	now := int64(1 << 40)
	d.clock = func() int64 { return now }
	hub := link.NewHub(2048, 1024)
	p, err := hub.Attach(d.MAC())
	if err != nil {
		t.Fatal(err)
	}
	d.AttachPort(segment{p})
	x, err := hub.Attach(wire.NodeMAC(9999))
	if err != nil {
		t.Fatal(err)
	}
	push := func(src uint16) {
		h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagFirst | wire.FlagLast,
			SrcNode: src, DstNode: 1, Seq: 1, MsgLen: 8, Code: 7}
		if err := x.Send(wire.AppendFrame(x.Buffer(), wire.NodeMAC(1), wire.NodeMAC(src), &h, []byte("stranger"))); err != nil {
			t.Fatal(err)
		}
	}
	const extra = 44
	for n := range maxStrangers + extra {
		push(uint16(100 + n))
		if n%200 == 199 {
			d.pollRx()
		}
	}
	for d.pollRx() {
	}
	ctr := func(c uapi.Counter) uint64 { d.mirrorScreen(); return d.r.Load64(c.Off()) }
	if got := ctr(uapi.CtrRxPush); got != maxStrangers {
		t.Fatalf("RX_PUSH %d, want %d: one per admitted stranger", got, maxStrangers)
	}
	if got := ctr(uapi.CtrRxUnknownPeer); got != extra {
		t.Fatalf("RX_UNKNOWN_PEER %d, want %d", got, extra)
	}
	if len(d.peers) != maxStrangers || d.strangers != maxStrangers {
		t.Fatalf("%d peers kept (%d strangers), want %d", len(d.peers), d.strangers, maxStrangers)
	}
	// Their ACKs have nowhere to go (the hub has no such stations): dropped.
	for range 4 {
		var t0 int64
		d.step(&t0)
	}
	if ctr(uapi.CtrOwedDropped) == 0 {
		t.Fatal("ACKs owed to unroutable strangers were not dropped")
	}
	// A spoofed frame: Ethernet source and header disagree.
	h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagFirst | wire.FlagLast, SrcNode: 5, DstNode: 1, Seq: 1, MsgLen: 8}
	if err := x.Send(wire.AppendFrame(x.Buffer(), wire.NodeMAC(1), wire.NodeMAC(6), &h, []byte("spoofed!"))); err != nil {
		t.Fatal(err)
	}
	for d.pollRx() {
	}
	if got := ctr(uapi.CtrRxSpoofed); got != 1 {
		t.Fatalf("RX_SPOOFED %d, want 1", got)
	}
	// Past the idle time, a new stranger takes an old one's place.
	now += strangerIdle + 1
	push(5000)
	for d.pollRx() {
	}
	if got := ctr(uapi.CtrRxPush); got != maxStrangers+1 {
		t.Fatalf("RX_PUSH %d after the idle time, want %d", got, maxStrangers+1)
	}
	if len(d.peers) != maxStrangers || d.peers[5000] == nil {
		t.Fatalf("%d peers after eviction, the new stranger kept: %v", len(d.peers), d.peers[5000] != nil)
	}
}

// A wrapper (faults, a capture) vouches for its senders exactly when the
// port under it does, so a daemon of many nodes with --fault or --pcap
// does not take its own devices for strangers.
func TestWrappersVouchAsTheirPort(t *testing.T) {
	hub := link.NewHub(2048, 16)
	for _, tc := range []struct {
		name  string
		port  func(p link.Port) link.Port
		wants bool
	}{
		{"hub", func(p link.Port) link.Port { return p }, true},
		{"faults on the hub", func(p link.Port) link.Port { return impair.Wrap(p, impair.Config{Loss: 0.1}) }, true},
		{"faults on a segment", func(p link.Port) link.Port { return impair.Wrap(segment{p}, impair.Config{Loss: 0.1}) }, false},
	} {
		p, err := hub.Attach(wire.NodeMAC(uint16(len(tc.name))))
		if err != nil {
			t.Fatal(err)
		}
		if got := link.VouchesFor(tc.port(p)) != nil; got != tc.wants {
			t.Errorf("%s: vouches %v, want %v", tc.name, got, tc.wants)
		}
	}
}
