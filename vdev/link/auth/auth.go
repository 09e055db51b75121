// Package auth makes any link.Port an authenticated link: with a
// pre-shared key, two stations run a short handshake that mixes fresh
// random nonces from both sides into per-session keys, and every frame
// then carries an authentication tag under its session's key, with a
// frame counter as the nonce and a replay window per peer. A frame that
// is forged, replayed, or from a station that never proved it holds the
// key never reaches the device.
//
// Why per-session keys: a static key with counters that restart at zero
// would let frames recorded before a restart be replayed after it, and
// would reuse AES-GCM nonces. Why a wrapper: the device, the transport and
// every medium stay as they are, and a shared-memory link gets the same
// protection as UDP. The anchors are WireGuard (a handshake with an
// optional pre-shared key, a sliding replay window) and MACsec (per-frame
// AES-GCM under keys its key agreement rotates). docs/wire.md
// ("Authenticated links") is the protocol; docs/threat.md says what it
// protects against.
package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// MinKeyLen is the least secret a key file may hold: 128 bits.
const MinKeyLen = 16

// Errors of LoadKey.
var (
	// ErrKeyShort means the key file holds fewer than MinKeyLen bytes.
	ErrKeyShort = errors.New("auth: key shorter than 16 bytes")
	// ErrKeyMode means others than the owner may read the key file.
	ErrKeyMode = errors.New("auth: key file readable by group or others")
)

// Key is a pre-shared key as LoadKey read it.
type Key struct{ secret []byte }

// LoadKey reads a pre-shared key: the file's bytes (a trailing newline
// dropped), at least MinKeyLen of them, in a file only its owner may read,
// as ssh demands of a private key (`head -c 32 /dev/urandom > key; chmod
// 600 key` makes one).
func LoadKey(path string) (Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Key{}, fmt.Errorf("key %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Key{}, fmt.Errorf("key %s (mode %v): %w", path, st.Mode().Perm(), ErrKeyMode)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("key %s: %w", path, err)
	}
	b = []byte(strings.TrimSuffix(string(b), "\n"))
	if len(b) < MinKeyLen {
		return Key{}, fmt.Errorf("key %s: %d bytes: %w", path, len(b), ErrKeyShort)
	}
	return Key{secret: b}, nil
}

// LoadOptionalKey is LoadKey for a --key flag, which may be empty: "" is
// no key (nil), an unauthenticated link.
func LoadOptionalKey(path string) (*Key, error) {
	if path == "" {
		return nil, nil
	}
	k, err := LoadKey(path)
	if err != nil {
		return nil, fmt.Errorf("--key: %w", err)
	}
	return &k, nil
}

// NewKey makes a key from secret bytes (tests, and callers that hold the
// secret elsewhere).
func NewKey(secret []byte) (Key, error) {
	if len(secret) < MinKeyLen {
		return Key{}, fmt.Errorf("%d bytes: %w", len(secret), ErrKeyShort)
	}
	return Key{secret: append([]byte(nil), secret...)}, nil
}

// Protocol constants.
const (
	helloLen = 2 * wire.HelloNonceLen
	// windowBits is the replay window: a frame up to this many counters
	// behind the newest one accepted is still taken once (a medium may
	// reorder a little).
	windowBits = 1024
	// helloEvery paces the handshake messages sent to one station.
	helloEvery = 20 * time.Millisecond
	// strayOffers bounds the offers sent per second in answer to frames
	// from stations with no session at all (a peer that restarted): anyone
	// can send such frames, so they must not buy unbounded replies.
	strayOffers = 100
)

var errNoSession = errors.New("auth: no session with the station yet")

// Port is an authenticated link.Port. Its MTU is the wrapped port's less
// the trailer; it gathers no payloads (the tag covers the frame, computed
// in one piece) and lends none (a payload in shared memory could change
// between the check and the copy).
type Port struct {
	inner link.Port
	self  [6]byte
	hello []byte // HMAC key of HELLO messages, from the pre-shared key
	psk   []byte
	boot  [32]byte // this port's secret of the stray-offer nonces

	mu      sync.Mutex
	peers   map[[6]byte]*session
	strayAt int64 // start of the current stray-offer second
	strays  int   // stray offers sent in it

	authFail, replay, sessions atomic.Uint64
	down                       func(mac [6]byte) // the device's: a peer restarted (SetPeerDown)
}

// session is what the port keeps of one station that proved it holds the
// key (or that this port sends to).
type session struct {
	mac [6]byte

	// the established session (tx == nil: none yet)
	tx, rx   cipher.AEAD
	txCtr    uint64
	win      window
	mine     [32]byte // the nonces it was made of
	theirs   [32]byte
	pending  [32]byte // our nonce of a handshake under way (zero: none)
	cand     cipher.AEAD
	candFrom [32]byte // the peer's nonce cand was made with (pending and this)
	helloAt  int64    // last HELLO sent to it
	tag      [16]byte // Send's tag, computed apart from the frame
}

// Wrap authenticates every frame of p under sessions keyed from key.
func Wrap(p link.Port, key Key) (*Port, error) {
	if len(key.secret) < MinKeyLen {
		return nil, ErrKeyShort
	}
	if p.MTU() < wire.FrameOverhead+wire.AuthTrailerLen+8 {
		return nil, fmt.Errorf("auth: link MTU %d leaves no payload after the trailer", p.MTU())
	}
	hk, err := hkdf.Key(sha256.New, key.secret, nil, "dimmnet v1 hello", 32)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	a := &Port{inner: p, hello: hk, psk: key.secret, peers: map[[6]byte]*session{}}
	copy(a.self[:], p.MAC())
	if _, err := rand.Read(a.boot[:]); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return a, nil
}

// Keyed authenticates p under key, or returns p as it is when key is nil:
// what a command or a rank with an optional key does with each port it
// opens. On an error p is closed.
func Keyed(p link.Port, key *Key) (link.Port, error) {
	if key == nil {
		return p, nil
	}
	a, err := Wrap(p, *key)
	if err != nil {
		p.Close()
		return nil, err
	}
	return a, nil
}

// Unwrap is the wrapped port.
func (a *Port) Unwrap() link.Port { return a.inner }

// MTU leaves room for the trailer.
func (a *Port) MTU() int { return a.inner.MTU() - wire.AuthTrailerLen }

// MAC is the wrapped port's.
func (a *Port) MAC() net.HardwareAddr { return a.inner.MAC() }

// Buffer is the wrapped port's (its capacity holds the trailer too).
func (a *Port) Buffer() []byte { return a.inner.Buffer() }

// Release returns a frame to the wrapped port.
func (a *Port) Release(f []byte) { a.inner.Release(f) }

// SetNotify is the wrapped port's.
func (a *Port) SetNotify(f func()) { a.inner.SetNotify(f) }

// Close closes the wrapped port.
func (a *Port) Close() error { return a.inner.Close() }

// NeedsCRC is false: the tag covers every byte the checksum would, and
// more strongly.
func (a *Port) NeedsCRC() bool { return false }

// KnowsPeer reports whether the station holds a session: with a key, only
// a station that proved it holds the key is a peer.
func (a *Port) KnowsPeer(mac [6]byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.peers[mac]
	return s != nil && s.rx != nil
}

// Vouches is true: with a key, a peer is a station that proved it holds
// it.
func (a *Port) Vouches() bool { return true }

// Screened counts the wrapped port's refusals and this port's.
func (a *Port) Screened() link.ScreenCounts {
	c := link.ScreenCounts{AuthFail: a.authFail.Load(), AuthReplay: a.replay.Load(), AuthSessions: a.sessions.Load()}
	if s, ok := a.inner.(link.Screener); ok {
		c = c.Add(s.Screened())
	}
	return c
}

// Send tags the frame and sends it. To a station with no session yet it
// starts (or paces) the handshake and reports link.ErrFull: the device
// keeps the frame's command and tries again, as for a full link.
func (a *Port) Send(f []byte) error {
	if len(f) < wire.FrameOverhead || cap(f)-len(f) < wire.AuthTrailerLen {
		return fmt.Errorf("auth: frame of %d bytes (capacity %d) leaves no room for the trailer", len(f), cap(f))
	}
	dst := [6]byte(f[0:6])
	a.mu.Lock()
	s := a.peers[dst]
	if s == nil {
		s = &session{mac: dst}
		a.peers[dst] = s
	}
	if s.tx == nil {
		a.offer(s)
		a.mu.Unlock()
		return fmt.Errorf("auth: %v: %w (%w)", net.HardwareAddr(dst[:]), link.ErrFull, errNoSession)
	}
	flags := binary.LittleEndian.Uint16(f[frameFlags:])
	binary.LittleEndian.PutUint16(f[frameFlags:], flags|uint16(wire.FlagAuth))
	s.txCtr++
	n := len(f)
	f = binary.LittleEndian.AppendUint64(f, s.txCtr)
	var nonce [12]byte
	copy(nonce[4:], f[n:n+8])
	// The tag goes into a buffer of its own: Seal's dst must not overlap
	// its additional data, the frame.
	tag := s.tx.Seal(s.tag[:0], nonce[:], nil, f[:n+8])
	f = append(f, tag...)
	a.mu.Unlock()
	return a.inner.Send(f)
}

// frameFlags is where a frame holds the header's Flags.
const frameFlags = wire.EthHeaderLen + 2

// Recv returns the next frame that passes: tag valid under its sender's
// session, never seen before. HELLOs are consumed here.
func (a *Port) Recv() []byte {
	for range 64 {
		f := a.inner.Recv()
		if f == nil {
			return nil
		}
		if g := a.admit(f); g != nil {
			return g
		}
		a.inner.Release(f)
	}
	return nil
}

// admit checks one frame; nil: dropped (counted).
func (a *Port) admit(f []byte) []byte {
	if len(f) < wire.FrameOverhead || [2]byte(f[12:14]) != [2]byte{0x88, 0xb5} {
		return f // not dimmnet: the device counts it foreign
	}
	pl := uint64(binary.LittleEndian.Uint32(f[wire.EthHeaderLen+36:]))
	flags := wire.Flags(binary.LittleEndian.Uint16(f[frameFlags:]))
	end := uint64(wire.FrameOverhead) + pl
	if flags&wire.FlagAuth == 0 || uint64(len(f)) < end+wire.AuthTrailerLen {
		a.authFail.Add(1)
		return nil
	}
	f = f[:end+wire.AuthTrailerLen]
	src := [6]byte(f[6:12])
	if wire.Type(f[wire.EthHeaderLen+1]) == wire.TypeHello {
		a.hello1(f, src, int(end))
		return nil
	}
	ctr := binary.LittleEndian.Uint64(f[end:])
	var nonce [12]byte
	copy(nonce[4:], f[end:end+8])
	tag := f[end+8:]
	aad := f[:end+8]
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.peers[src]
	if s != nil && s.rx != nil {
		if _, err := s.rx.Open(nil, nonce[:], tag, aad); err == nil {
			if !s.win.accept(ctr) {
				a.replay.Add(1)
				return nil
			}
			return f[:end]
		}
	}
	if s != nil && s.cand != nil {
		// The peer took the session of our answer and its confirm was
		// lost: its first frame under the new keys confirms it.
		if _, err := s.cand.Open(nil, nonce[:], tag, aad); err == nil {
			a.commit(s, s.candFrom, s.pending)
			s.win.accept(ctr)
			return f[:end]
		}
	}
	a.authFail.Add(1)
	if s == nil || s.rx == nil {
		// A station with no session here sends as if it had one: this
		// port restarted. Offer a handshake (paced, and bounded in all).
		a.strayOffer(src, s)
	}
	return nil
}

// hello1 handles one HELLO message (f ends at its payload, end).
func (a *Port) hello1(f []byte, src [6]byte, end int) {
	if !a.helloValid(f, end) || end-wire.FrameOverhead != helloLen ||
		[6]byte(f[0:6]) != a.self {
		a.authFail.Add(1)
		return
	}
	step := binary.LittleEndian.Uint16(f[wire.EthHeaderLen+56:])
	var theirs, echo [32]byte
	copy(theirs[:], f[wire.FrameOverhead:])
	copy(echo[:], f[wire.FrameOverhead+32:])
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.peers[src]
	if s == nil {
		s = &session{mac: src} // it holds the key: a peer
		a.peers[src] = s
	}
	switch {
	case step == wire.HelloOffer:
		if s.pending == ([32]byte{}) {
			s.pending = fresh()
		}
		if s.cand != nil && s.candFrom == theirs && monotime.Now()-s.helloAt < int64(helloEvery) {
			a.replay.Add(1) // a repeat of the offer just answered, sooner than offers are paced
			return
		}
		a.prepare(s, theirs)
		a.send(s, wire.HelloAnswer, s.pending, theirs)
	case echo == s.pending && echo != ([32]byte{}) || echo == a.strayNonce(src) && s.rx == nil:
		// It answers our fresh nonce: the message is fresh, and so is the
		// session both nonces make.
		mine := echo
		a.commit(s, theirs, mine)
		if step == wire.HelloAnswer {
			a.send(s, wire.HelloConfirm, mine, theirs)
		}
	default:
		// It answers a nonce we no longer wait on: recorded earlier (or a
		// confirm repeated after we took its session).
		a.replay.Add(1)
	}
}

// helloValid checks a HELLO's tag: HMAC-SHA256 under the key's hello key
// over the frame and its counter, first 16 bytes.
func (a *Port) helloValid(f []byte, end int) bool {
	m := hmac.New(sha256.New, a.hello)
	m.Write(f[:end+8])
	return hmac.Equal(m.Sum(nil)[:16], f[end+8:end+wire.AuthTrailerLen])
}

// offer starts (or repeats, paced) a handshake with s.
func (a *Port) offer(s *session) {
	if s.pending == ([32]byte{}) {
		s.pending = fresh()
	}
	a.send(s, wire.HelloOffer, s.pending, [32]byte{})
}

// strayOffer offers a handshake to a station with no session here, with
// a nonce derived from this port's secret instead of one kept: the sender
// may be anyone, so nothing is kept for it until it answers with the key.
func (a *Port) strayOffer(src [6]byte, s *session) {
	now := monotime.Now()
	if now-a.strayAt >= int64(time.Second) {
		a.strayAt, a.strays = now, 0
	}
	if a.strays >= strayOffers {
		return
	}
	a.strays++
	if s != nil {
		a.offer(s)
		return
	}
	a.sendHello(src, wire.HelloOffer, a.strayNonce(src), [32]byte{})
}

// strayNonce is this port's offer nonce for a station it keeps nothing of.
func (a *Port) strayNonce(src [6]byte) [32]byte {
	m := hmac.New(sha256.New, a.boot[:])
	m.Write(src[:])
	return [32]byte(m.Sum(nil))
}

// send sends a HELLO to s, paced by helloEvery except for a reply to a
// confirm-worthy answer.
func (a *Port) send(s *session, step uint16, mine, theirs [32]byte) {
	now := monotime.Now()
	if step == wire.HelloOffer && now-s.helloAt < int64(helloEvery) {
		return
	}
	s.helloAt = now
	a.sendHello(s.mac, step, mine, theirs)
}

// sendHello frames and sends one HELLO; a full link loses it (the
// handshake repeats).
func (a *Port) sendHello(dst [6]byte, step uint16, mine, theirs [32]byte) {
	h := wire.Header{Version: wire.Version1, Type: wire.TypeHello, Flags: wire.FlagAuth, Code: step,
		SrcNode: nodeOf(a.self), DstNode: nodeOf(dst)}
	var payload [helloLen]byte
	copy(payload[:], mine[:])
	copy(payload[32:], theirs[:])
	f := wire.AppendFrame(a.inner.Buffer(), dst[:], a.self[:], &h, payload[:])
	var ctr [8]byte
	if _, err := rand.Read(ctr[:]); err != nil {
		a.inner.Release(f)
		return
	}
	f = append(f, ctr[:]...)
	m := hmac.New(sha256.New, a.hello)
	m.Write(f)
	f = append(f, m.Sum(nil)[:16]...)
	if a.inner.Send(f) != nil {
		a.inner.Release(f)
	}
}

func nodeOf(mac [6]byte) uint16 { return uint16(mac[4])<<8 | uint16(mac[5]) }

// prepare derives the keys of the session our pending nonce and theirs
// would make, so the peer's first frame under them can confirm it.
func (a *Port) prepare(s *session, theirs [32]byte) {
	if s.cand != nil && s.candFrom == theirs {
		return
	}
	_, rx := a.keys(s.mac, s.pending, theirs)
	s.cand, s.candFrom = rx, theirs
}

// commit makes the session of nonces mine and theirs the current one. A
// session replacing one we had means the peer lost its own (a station
// never renews a live session): it restarted, and the device is told at
// once, as a shared-memory link tells it of a peer that exited, so the
// commands it lost fail UNREACHABLE instead of timing out.
func (a *Port) commit(s *session, theirs, mine [32]byte) {
	if s.rx != nil && a.down != nil {
		a.down(s.mac)
	}
	s.tx, s.rx = a.keys(s.mac, mine, theirs)
	s.txCtr, s.win = 0, window{}
	s.mine, s.theirs = mine, theirs
	s.pending, s.cand, s.candFrom = [32]byte{}, nil, [32]byte{}
	a.sessions.Add(1)
}

// keys derives the two directions' AES-128-GCM keys of a session:
// HKDF-SHA256 of the pre-shared key, salted with both nonces in the order
// of the stations' addresses, so both sides derive the same two keys.
func (a *Port) keys(peer [6]byte, mine, theirs [32]byte) (tx, rx cipher.AEAD) {
	lo, hi := a.self, peer
	nlo, nhi := mine, theirs
	if string(hi[:]) < string(lo[:]) {
		lo, hi, nlo, nhi = hi, lo, nhi, nlo
	}
	salt := append(append([]byte{}, nlo[:]...), nhi[:]...)
	info := "dimmnet v1 session " + net.HardwareAddr(lo[:]).String() + " " + net.HardwareAddr(hi[:]).String()
	k, err := hkdf.Key(sha256.New, a.psk, salt, info, 32)
	if err != nil {
		panic("auth: hkdf: " + err.Error()) // only for lengths HKDF cannot give
	}
	up, down := gcm(k[:16]), gcm(k[16:])
	if lo == a.self {
		return up, down
	}
	return down, up
}

func gcm(k []byte) cipher.AEAD {
	b, err := aes.NewCipher(k)
	if err != nil {
		panic("auth: " + err.Error()) // 16-byte keys only
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		panic("auth: " + err.Error())
	}
	return g
}

// fresh is a new random nonce.
func fresh() [32]byte {
	var n [32]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic("auth: no randomness: " + err.Error())
	}
	return n
}

// window is a sliding replay window over frame counters.
type window struct {
	top  uint64 // newest counter accepted (0: none yet)
	bits [windowBits / 64]uint64
}

// accept reports whether ctr is new (and records it): newer than top, or
// within the window behind it and not seen.
func (w *window) accept(ctr uint64) bool {
	if ctr == 0 {
		return false
	}
	if ctr > w.top {
		shift := ctr - w.top
		if shift >= windowBits {
			w.bits = [windowBits / 64]uint64{}
		} else {
			for i := w.top + 1; i <= ctr; i++ {
				w.bits[(i/64)%(windowBits/64)] &^= 1 << (i % 64)
			}
		}
		w.top = ctr
		w.bits[(ctr/64)%(windowBits/64)] |= 1 << (ctr % 64)
		return true
	}
	if w.top-ctr >= windowBits {
		return false
	}
	word, bit := &w.bits[(ctr/64)%(windowBits/64)], uint64(1)<<(ctr%64)
	if *word&bit != 0 {
		return false
	}
	*word |= bit
	return true
}

// What the device asks of a port beyond link.Port is the wrapped port's
// answer, or the answer of a port that cannot tell.

// Pending peeks the wrapped port (true when it cannot tell: do not sleep).
func (a *Port) Pending() bool {
	if p, ok := a.inner.(interface{ Pending() bool }); ok {
		return p.Pending()
	}
	return true
}

// WaitFrame is the wrapped port's (link.FrameWaiter); false at once over
// a port that cannot block.
func (a *Port) WaitFrame(timeoutNs int64) bool {
	if w := link.FrameWaiterOf(a.inner); w != nil {
		return w.WaitFrame(timeoutNs)
	}
	return false
}

// WaitsFrames is the wrapped port's.
func (a *Port) WaitsFrames() bool { return link.FrameWaiterOf(a.inner) != nil }

// Lossless is the wrapped port's.
func (a *Port) Lossless() bool {
	l, ok := a.inner.(interface{ Lossless() bool })
	return ok && l.Lossless()
}

// CrossProcess is the wrapped port's.
func (a *Port) CrossProcess() bool {
	c, ok := a.inner.(interface{ CrossProcess() bool })
	return ok && c.CrossProcess()
}

// Dropped is the wrapped port's.
func (a *Port) Dropped() uint64 {
	if c, ok := a.inner.(interface{ Dropped() uint64 }); ok {
		return c.Dropped()
	}
	return 0
}

// TxErrors is the wrapped port's.
func (a *Port) TxErrors() uint64 {
	if c, ok := a.inner.(interface{ TxErrors() uint64 }); ok {
		return c.TxErrors()
	}
	return 0
}

// Backlog is the wrapped port's (none when it sends at once).
func (a *Port) Backlog(dst [6]byte) (queued int, lastSent int64) {
	if b, ok := a.inner.(link.Backlogger); ok {
		return b.Backlog(dst)
	}
	return 0, 0
}

// Park is the wrapped port's.
func (a *Port) Park(sleeping bool) {
	if p, ok := a.inner.(link.Parker); ok {
		p.Park(sleeping)
	}
}

// SetPeerDown installs fn for the wrapped port's reports and for peers
// this port sees restart (a new session replacing a live one).
func (a *Port) SetPeerDown(fn func(mac [6]byte)) {
	a.mu.Lock()
	a.down = fn
	a.mu.Unlock()
	if w, ok := a.inner.(link.PeerWatcher); ok {
		w.SetPeerDown(fn)
	}
}
