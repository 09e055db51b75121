package auth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

var testKey, _ = NewKey([]byte("0123456789abcdef0123456789abcdef"))

// recorder keeps a copy of every frame its port receives: what an
// eavesdropper on the medium would record, to replay later.
type recorder struct {
	link.Port
	got [][]byte
}

func (r *recorder) Recv() []byte {
	f := r.Port.Recv()
	if f != nil {
		r.got = append(r.got, append([]byte(nil), f...))
	}
	return f
}

// station is one keyed port on a hub and what it received.
type station struct {
	*Port
	rec *recorder
	rx  [][]byte
}

func attach(t testing.TB, hub *link.Hub, node uint16, key Key) *station {
	t.Helper()
	p, err := hub.Attach(wire.NodeMAC(node))
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Port: p}
	a, err := Wrap(rec, key)
	if err != nil {
		t.Fatal(err)
	}
	return &station{Port: a, rec: rec}
}

// pump lets every station receive until nothing moves.
func pump(ss ...*station) {
	for range 100 {
		moved := false
		for _, s := range ss {
			for f := s.Recv(); f != nil; f = s.Recv() {
				s.rx = append(s.rx, append([]byte(nil), f...))
				s.Release(f)
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}

// frame is a data frame from node src to node dst with payload p.
func frame(s *station, src, dst uint16, seq uint32, p []byte) []byte {
	h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagFirst | wire.FlagLast,
		SrcNode: src, DstNode: dst, Seq: seq, MsgLen: uint32(len(p))}
	return wire.AppendFrame(s.Buffer(), wire.NodeMAC(dst), wire.NodeMAC(src), &h, p)
}

// sendUntil sends a frame, running the handshake while the port says the
// link is full (no session yet).
func sendUntil(t testing.TB, from *station, mk func() []byte, all ...*station) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := from.Send(mk())
		if err == nil {
			pump(all...)
			return
		}
		if !errors.Is(err, link.ErrFull) || time.Now().After(deadline) {
			t.Fatalf("send: %v", err)
		}
		pump(all...)
		time.Sleep(helloEvery)
	}
}

func TestHandshakeCarriesFramesIntact(t *testing.T) {
	hub := link.NewHub(2048, 64)
	a, b := attach(t, hub, 1, testKey), attach(t, hub, 2, testKey)
	payload := []byte("authenticated payload, 8-aligned")
	sendUntil(t, a, func() []byte { return frame(a, 1, 2, 1, payload) }, a, b)
	if len(b.rx) != 1 {
		t.Fatalf("b received %d frames, want 1", len(b.rx))
	}
	want := frame(a, 1, 2, 1, payload)
	got := b.rx[0]
	// The receiver sees the frame as sent, the trailer stripped and the
	// Auth flag set.
	if len(got) != len(want) || !bytes.Equal(got[wire.FrameOverhead:], payload) || !bytes.Equal(got[:frameFlags], want[:frameFlags]) {
		t.Fatalf("frame changed on the way:\n got %x\nwant %x", got, want)
	}
	if f := wire.Flags(uint16(got[frameFlags]) | uint16(got[frameFlags+1])<<8); f&wire.FlagAuth == 0 {
		t.Fatalf("flags %v: no Auth", f)
	}
	if !a.KnowsPeer([6]byte(wire.NodeMAC(2))) || !b.KnowsPeer([6]byte(wire.NodeMAC(1))) {
		t.Fatal("a session each way was not established")
	}
	if n := a.Screened().AuthSessions + b.Screened().AuthSessions; n != 2 {
		t.Fatalf("sessions established: %d, want 2 (one per side)", n)
	}
	// And back, on the same session.
	sendUntil(t, b, func() []byte { return frame(b, 2, 1, 1, payload) }, a, b)
	if len(a.rx) != 1 {
		t.Fatalf("a received %d frames, want 1", len(a.rx))
	}
}

func TestReplayedAndForgedFramesAreRefused(t *testing.T) {
	hub := link.NewHub(2048, 64)
	a, b := attach(t, hub, 1, testKey), attach(t, hub, 2, testKey)
	x, err := hub.Attach(wire.NodeMAC(9)) // on the medium, without the key
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		sendUntil(t, a, func() []byte { return frame(a, 1, 2, uint32(i+1), []byte("12345678")) }, a, b)
	}
	if len(b.rx) != 3 {
		t.Fatalf("b received %d frames, want 3", len(b.rx))
	}
	recorded := b.rec.got
	base, baseA := b.Screened(), a.Screened()
	inject := func(f []byte) {
		t.Helper()
		if err := x.Send(append(x.Buffer(), f...)); err != nil {
			t.Fatal(err)
		}
		pump(a, b)
	}
	// Every frame b ever received, HELLOs included, again.
	for _, f := range recorded {
		inject(f)
	}
	if len(b.rx) != 3 {
		t.Fatalf("replays delivered: b has %d frames, want 3", len(b.rx))
	}
	// Data and confirms are refused by b; a replayed offer is answered
	// with a fresh challenge, which a refuses (it answers an old nonce).
	after := b.Screened()
	if n := after.AuthReplay - base.AuthReplay + a.Screened().AuthReplay - baseA.AuthReplay; n != uint64(len(recorded)) {
		t.Fatalf("AUTH_REPLAY moved by %d for %d replayed frames", n, len(recorded))
	}
	if after.AuthSessions != base.AuthSessions || a.Screened().AuthSessions != baseA.AuthSessions {
		t.Fatal("a replayed handshake changed the session")
	}
	// Forgeries from a station without the key: a frame with no trailer,
	// one with a made-up trailer, one whose payload was changed in flight.
	plain := frame(b, 1, 2, 4, []byte("forged!!"))
	inject(plain)
	withTag := frame(b, 1, 2, 4, []byte("forged!!"))
	binary.LittleEndian.PutUint16(withTag[frameFlags:], binary.LittleEndian.Uint16(withTag[frameFlags:])|uint16(wire.FlagAuth))
	inject(append(withTag, make([]byte, wire.AuthTrailerLen)...))
	last := append([]byte(nil), recorded[len(recorded)-1]...)
	last[wire.FrameOverhead] ^= 1
	inject(last)
	if len(b.rx) != 3 {
		t.Fatalf("forgeries delivered: b has %d frames, want 3", len(b.rx))
	}
	if n := b.Screened().AuthFail - after.AuthFail; n != 3 {
		t.Fatalf("AUTH_FAIL moved by %d for 3 forgeries", n)
	}
	// The session still works.
	sendUntil(t, a, func() []byte { return frame(a, 1, 2, 4, []byte("87654321")) }, a, b)
	if len(b.rx) != 4 {
		t.Fatalf("after the attack b has %d frames, want 4", len(b.rx))
	}
}

func TestRestartedPeerGetsNewSessionAndOldFramesStayDead(t *testing.T) {
	hub := link.NewHub(2048, 64)
	a, b := attach(t, hub, 1, testKey), attach(t, hub, 2, testKey)
	sendUntil(t, a, func() []byte { return frame(a, 1, 2, 1, []byte("before!!")) }, a, b)
	recorded := b.rec.got
	// b restarts: a new process on the same address knows nothing.
	b.Close()
	b2 := attach(t, hub, 2, testKey)
	x, err := hub.Attach(wire.NodeMAC(9))
	if err != nil {
		t.Fatal(err)
	}
	// a still sends under the old session; b2 refuses and offers a new
	// one, which a takes.
	sendUntil(t, a, func() []byte { return frame(a, 1, 2, 2, []byte("lost....")) }, a, b2)
	if len(b2.rx) != 0 {
		t.Fatal("b2 took a frame of the session before its restart")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(b2.rx) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no new session after the restart")
		}
		if err := a.Send(frame(a, 1, 2, 3, []byte("after!!!"))); err != nil && !errors.Is(err, link.ErrFull) {
			t.Fatal(err)
		}
		pump(a, b2)
		time.Sleep(helloEvery)
	}
	got := len(b2.rx)
	for _, f := range recorded { // the old session's frames and handshake
		if err := x.Send(append(x.Buffer(), f...)); err != nil {
			t.Fatal(err)
		}
		pump(a, b2)
	}
	if len(b2.rx) != got {
		t.Fatalf("frames recorded before the restart were delivered after it: %d, want %d", len(b2.rx), got)
	}
}

func TestWrongKeyNeverGetsASession(t *testing.T) {
	other, _ := NewKey([]byte("another key, also 32 bytes long!"))
	hub := link.NewHub(2048, 64)
	a, b := attach(t, hub, 1, testKey), attach(t, hub, 2, other)
	for range 10 {
		if err := a.Send(frame(a, 1, 2, 1, []byte("12345678"))); !errors.Is(err, link.ErrFull) {
			t.Fatalf("send without a session: %v, want ErrFull", err)
		}
		pump(a, b)
		time.Sleep(helloEvery)
	}
	if b.Screened().AuthFail == 0 || len(b.rx) != 0 || b.KnowsPeer([6]byte(wire.NodeMAC(1))) {
		t.Fatalf("a station with another key: AUTH_FAIL %d, frames %d", b.Screened().AuthFail, len(b.rx))
	}
}

func TestReplayWindow(t *testing.T) {
	var w window
	for _, c := range []uint64{1, 2, 5, 4, 3} {
		if !w.accept(c) {
			t.Fatalf("counter %d refused the first time", c)
		}
	}
	for _, c := range []uint64{0, 1, 3, 5} {
		if w.accept(c) {
			t.Fatalf("counter %d accepted twice", c)
		}
	}
	if !w.accept(5 + windowBits) {
		t.Fatal("a jump ahead was refused")
	}
	if w.accept(5) || w.accept(4) {
		t.Fatal("a counter behind the window was accepted")
	}
	if !w.accept(7 + windowBits - 1) { // inside the window, never seen
		t.Fatal("a late counter inside the window was refused")
	}
}

func TestLoadKeyRefusesWeakFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string, mode uint32) string {
		p := dir + "/" + name
		if err := writeFile(p, s, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if _, err := LoadKey(write("short", "too short\n", 0o600)); !errors.Is(err, ErrKeyShort) {
		t.Fatalf("short key: %v", err)
	}
	if _, err := LoadKey(write("open", "0123456789abcdef0123", 0o644)); !errors.Is(err, ErrKeyMode) {
		t.Fatalf("world-readable key: %v", err)
	}
	if _, err := LoadKey(write("good", "0123456789abcdef0123\n", 0o600)); err != nil {
		t.Fatalf("good key: %v", err)
	}
	// The --key flag's form: empty is no key, a weak file is named.
	if k, err := LoadOptionalKey(""); k != nil || err != nil {
		t.Fatalf("no --key: %v, %v", k, err)
	}
	if _, err := LoadOptionalKey(dir + "/open"); !errors.Is(err, ErrKeyMode) || !strings.HasPrefix(err.Error(), "--key: ") {
		t.Fatalf("world-readable --key: %v", err)
	}
}
