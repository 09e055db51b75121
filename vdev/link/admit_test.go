package link_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// A udp port opened with no peers drops a stranger's frames until Admit
// names it, then takes them; a learning port admits a stranger from its
// first frame; an Admit of a known station at another address is refused.
func TestUDPAdmitAndLearn(t *testing.T) {
	const mtu = 1500
	aAddr, bAddr, cAddr := freeUDP(t), freeUDP(t), freeUDP(t)
	ma, mb, mc := wire.NodeMAC(1), wire.NodeMAC(2), wire.NodeMAC(3)
	a, err := link.ListenUDP(aAddr, ma, nil, mtu)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := link.ListenUDP(bAddr, mb, map[string]string{ma.String(): aAddr}, mtu)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c, err := link.ListenUDP(cAddr, mc, map[string]string{ma.String(): aAddr}, mtu)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := a.(interface{ Screened() link.ScreenCounts })

	if err := b.Send(frame(b, ma, 0x88b5, []byte("before"))); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); sc.Screened().UnknownPeer == 0 && time.Now().Before(end); {
		a.Recv()
		time.Sleep(time.Millisecond)
	}
	if n := sc.Screened().UnknownPeer; n != 1 {
		t.Fatalf("a stranger's frame: %d screened as unknown, want 1", n)
	}
	if err := a.(link.Admitter).Admit(mb, bAddr); err != nil {
		t.Fatal(err)
	}
	if err := b.Send(frame(b, ma, 0x88b5, []byte("after"))); err != nil {
		t.Fatal(err)
	}
	if f := recvWait(t, a, 5*time.Second); string(f[14:]) != "after" {
		t.Fatalf("admitted station's frame: %q", f[14:])
	}
	if err := a.Send(frame(a, mb, 0x88b5, []byte("back"))); err != nil {
		t.Fatalf("send to an admitted station: %v", err)
	}
	if f := recvWait(t, b, 5*time.Second); string(f[14:]) != "back" {
		t.Fatalf("frame to an admitted station: %q", f[14:])
	}
	if err := a.(link.Admitter).Admit(mb, cAddr); !errors.Is(err, link.ErrStationMoved) {
		t.Fatalf("admit a known station elsewhere: %v, want ErrStationMoved", err)
	}

	a.(link.Learner).Learn(true)
	if err := c.Send(frame(c, ma, 0x88b5, []byte("learned"))); err != nil {
		t.Fatal(err)
	}
	if f := recvWait(t, a, 5*time.Second); string(f[14:]) != "learned" {
		t.Fatalf("learned station's frame: %q", f[14:])
	}
	if err := a.Send(frame(a, mc, 0x88b5, []byte("reply"))); err != nil {
		t.Fatalf("send to a learned station: %v", err)
	}
	if f := recvWait(t, c, 5*time.Second); string(f[14:]) != "reply" {
		t.Fatalf("frame to a learned station: %q", f[14:])
	}
}
