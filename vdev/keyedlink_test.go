package vdev_test

import (
	"bytes"
	"encoding/binary"
	"sync"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// tap records every frame its port receives, as an eavesdropper on the
// medium would, to replay them later.
type tap struct {
	link.Port
	mu  sync.Mutex
	got [][]byte
}

func (t *tap) Recv() []byte {
	f := t.Port.Recv()
	if f != nil {
		t.mu.Lock()
		t.got = append(t.got, append([]byte(nil), f...))
		t.mu.Unlock()
	}
	return f
}

func (t *tap) frames() [][]byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([][]byte(nil), t.got...)
}

// keyedDevice is a device on hub whose frames are authenticated under key,
// run by its own engine, with a driver.
type keyedDevice struct {
	dev *vdev.Device
	drv *driver.Driver
	tap *tap
	eng *vdev.Engine
}

func newKeyedDevice(t *testing.T, hub *link.Hub, node uint16, key auth.Key) *keyedDevice {
	t.Helper()
	d, err := vdev.New(vdev.Config{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	hp, err := hub.Attach(d.MAC())
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{Port: hp}
	p, err := auth.Wrap(tp, key)
	if err != nil {
		t.Fatal(err)
	}
	d.AttachPort(p)
	e, err := vdev.NewEngine(d)
	if err != nil {
		t.Fatal(err)
	}
	e.Start()
	drv, err := driver.Open(driver.InProcess(d.Region(), d.DoorbellFD(), d.InterruptFD()))
	if err != nil {
		t.Fatal(err)
	}
	k := &keyedDevice{dev: d, drv: drv, tap: tp, eng: e}
	t.Cleanup(k.close)
	return k
}

func (k *keyedDevice) close() {
	if k.eng != nil {
		k.drv.Close()
		k.eng.Stop()
		k.dev.Close()
		k.eng = nil
	}
}

func (k *keyedDevice) counter(c uapi.Counter) uint64 {
	return uapi.Region(k.dev.Region()).Load64(c.Off())
}

// pushVerified PUSHes data from a to b's link memory at addr and checks
// that it arrived and completed.
func pushVerified(t *testing.T, a, b *keyedDevice, data []byte, addr uint64) {
	t.Helper()
	a.drv.CopyIn(0, data)
	if _, err := a.drv.Push(b.dev.Node(), 0, addr, uint32(len(data)), uapi.FlagSignal, 7); err != nil {
		t.Fatal(err)
	}
	if s, err := a.drv.Wait(e2eWait); err != nil || s.Type != uapi.StDone {
		for _, c := range []uapi.Counter{uapi.CtrAuthSessions, uapi.CtrAuthFail, uapi.CtrAuthReplay, uapi.CtrTimeouts, uapi.CtrDuplicates, uapi.CtrOutOfOrder, uapi.CtrRxMalformed} {
			t.Logf("%v: a %d b %d", c, a.counter(c), b.counter(c))
		}
		t.Fatalf("sender completion %v, %v", s, err)
	}
	if s, err := b.drv.Wait(e2eWait); err != nil || s.Type != uapi.StPUSH || s.Addr != addr {
		t.Fatalf("receiver status %v, %v", s, err)
	}
	if !bytes.Equal(b.drv.LinkMem()[addr:addr+uint64(len(data))], data) {
		t.Fatal("the PUSH arrived with other bytes")
	}
}

// eventually waits until cond holds (counters are mirrored into the
// register page by the engine's heartbeat).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// forged builds a frame from node src to node dst as a station without
// the key could: any header, optionally an all-zero trailer.
func forged(h wire.Header, trailer bool) []byte {
	h.Version = wire.Version1
	f := wire.AppendFrame(nil, wire.NodeMAC(h.DstNode), wire.NodeMAC(h.SrcNode), &h, nil)
	if trailer {
		binary.LittleEndian.PutUint16(f[wire.EthHeaderLen+2:], uint16(h.Flags|wire.FlagAuth))
		f = append(f, make([]byte, wire.AuthTrailerLen)...)
	}
	return f
}

func TestKeyedLinkRefusesForgeriesAndReplays(t *testing.T) {
	key, err := auth.NewKey([]byte("a pre-shared key of 32 bytes!!!!"))
	if err != nil {
		t.Fatal(err)
	}
	hub := link.NewHub(9000, 256)
	a, b := newKeyedDevice(t, hub, 1, key), newKeyedDevice(t, hub, 2, key)
	x, err := hub.Attach(wire.NodeMAC(77)) // on the medium, without the key
	if err != nil {
		t.Fatal(err)
	}
	inject := func(f []byte) {
		t.Helper()
		if err := x.Send(append(x.Buffer(), f...)); err != nil {
			t.Fatal(err)
		}
	}
	old := bytes.Repeat([]byte("old data"), 512)
	pushVerified(t, a, b, old, 4096)
	eventually(t, "a session each way", func() bool {
		return a.counter(uapi.CtrAuthSessions) == 1 && b.counter(uapi.CtrAuthSessions) == 1
	})
	// Everything the receiver got so far: the handshake and the PUSH of
	// the old data, to replay once the same bytes are overwritten.
	recorded := b.tap.frames()

	// Forged control frames to the sender, in the receiver's name, with
	// and without a made-up trailer: an ACK for numbers never sent, a NACK
	// with a code no datasheet names, a refusal, a hold, a resume.
	nacks, failA := a.counter(uapi.CtrNACKsRx), a.counter(uapi.CtrAuthFail)
	ctl := []wire.Header{
		{Type: wire.TypeAck, Flags: wire.FlagAckValid, SrcNode: 2, DstNode: 1, Ack: 1000},
		{Type: wire.TypeNack, SrcNode: 2, DstNode: 1, Seq: 5, Code: 0xBEEF},
		{Type: wire.TypeNack, SrcNode: 2, DstNode: 1, Seq: 5, Code: uint16(uapi.ERemoteAddr)},
		{Type: wire.TypeAck, Flags: wire.FlagHold, SrcNode: 2, DstNode: 1, Seq: 5},
		{Type: wire.TypeNack, Flags: wire.FlagHold, SrcNode: 2, DstNode: 1, Seq: 1},
	}
	for _, h := range ctl {
		inject(forged(h, false))
		inject(forged(h, true))
	}
	// A data frame starting a new session at the receiver, in the
	// sender's name.
	inject(forged(wire.Header{Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagFirst | wire.FlagLast, SrcNode: 1, DstNode: 2, Seq: 1, Code: 999, Addr: 4096}, true))
	eventually(t, "every forgery refused", func() bool {
		return a.counter(uapi.CtrAuthFail)-failA == uint64(2*len(ctl)) && b.counter(uapi.CtrAuthFail) >= 1
	})
	if n := a.counter(uapi.CtrNACKsRx) - nacks; n != 0 {
		t.Fatalf("%d forged NACKs reached the device", n)
	}

	fresh := bytes.Repeat([]byte("new data"), 512)
	pushVerified(t, a, b, fresh, 4096)
	replays := b.counter(uapi.CtrAuthReplay) + a.counter(uapi.CtrAuthReplay)
	dups := b.counter(uapi.CtrDuplicates)
	for _, f := range recorded {
		inject(f)
	}
	eventually(t, "every replay refused", func() bool {
		return b.counter(uapi.CtrAuthReplay)+a.counter(uapi.CtrAuthReplay)-replays == uint64(len(recorded))
	})
	if !bytes.Equal(b.drv.LinkMem()[4096:4096+len(fresh)], fresh) {
		t.Fatal("a replayed PUSH overwrote newer data")
	}
	if n := b.counter(uapi.CtrDuplicates) - dups; n != 0 {
		t.Fatalf("%d replayed frames reached the device (counted duplicates)", n)
	}
	// The session goes on at once: nothing stalled.
	pushVerified(t, a, b, old, 8192)

	// The receiver restarts: frames recorded before are refused by the new
	// process too, and a new session carries the next PUSH.
	b.close()
	b2 := newKeyedDevice(t, hub, 2, key)
	for _, f := range recorded {
		inject(f)
	}
	// The first PUSH goes under the old session, which b2 refuses; b2
	// offers a new one, and the sender, seeing its peer restarted, fails
	// what it had in flight to it at once.
	a.drv.CopyIn(0, fresh)
	if _, err := a.drv.Push(2, 0, 4096, uint32(len(fresh)), uapi.FlagSignal, 8); err != nil {
		t.Fatal(err)
	}
	if s, err := a.drv.Wait(e2eWait); err != nil || s.Type != uapi.StError || s.Err != uapi.EUnreachable {
		t.Fatalf("PUSH into the restart: %v, %v; want UNREACHABLE", s, err)
	}
	pushVerified(t, a, b2, fresh, 4096)
	if n := b2.counter(uapi.CtrRxPush); n != 1 {
		t.Fatalf("the restarted receiver placed %d PUSH packets, want 1 (replays placed?)", n)
	}
	eventually(t, "a new session after the restart", func() bool { return a.counter(uapi.CtrAuthSessions) == 2 })
}
