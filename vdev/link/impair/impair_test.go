package impair

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// counting wraps the receiving port under test and checks buffer ownership:
// every frame that leaves it (Recv, Buffer) must come back through Release
// exactly once.
type counting struct {
	link.Port
	t   *testing.T
	mu  sync.Mutex
	out map[*byte]bool
	rel int
}

func (c *counting) take(f []byte) []byte {
	if f == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := unsafe.SliceData(f[:cap(f)])
	if c.out[k] {
		c.t.Errorf("buffer %p handed out twice", k)
	}
	c.out[k] = true
	return f
}

func (c *counting) Buffer() []byte { return c.take(c.Port.Buffer()) }
func (c *counting) Recv() []byte   { return c.take(c.Port.Recv()) }
func (c *counting) Pending() bool  { return c.Port.(interface{ Pending() bool }).Pending() }

func (c *counting) Release(f []byte) {
	c.mu.Lock()
	k := unsafe.SliceData(f[:cap(f)])
	if !c.out[k] {
		c.t.Errorf("buffer %p released but not outstanding (double release?)", k)
	}
	delete(c.out, k)
	c.rel++
	c.mu.Unlock()
	c.Port.Release(f)
}

// Send takes ownership of a frame from Buffer.
func (c *counting) Send(f []byte) error {
	err := c.Port.Send(f)
	if err == nil {
		c.mu.Lock()
		delete(c.out, unsafe.SliceData(f[:cap(f)]))
		c.mu.Unlock()
	}
	return err
}

func (c *counting) outstanding() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.out) }

// pair makes sender a and a fault-wrapped receiver b on one hub.
func pair(t *testing.T, cfg Config) (a link.Port, b *Port, cnt *counting) {
	t.Helper()
	h := link.NewHub(1514, 4096)
	a, err := h.Attach(wire.NodeMAC(1))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := h.Attach(wire.NodeMAC(2))
	if err != nil {
		t.Fatal(err)
	}
	cnt = &counting{Port: rb, t: t, out: map[*byte]bool{}}
	return a, Wrap(cnt, cfg).(*Port), cnt
}

// send sends frames with Seq first..first+n-1 from a to node 2.
func send(t *testing.T, a link.Port, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Seq: uint32(i), Flags: wire.FlagSeq}
		var pl [8]byte // the sequence number twice more, to outvote a flipped bit
		binary.LittleEndian.PutUint32(pl[0:], uint32(i))
		binary.LittleEndian.PutUint32(pl[4:], uint32(i))
		f := wire.AppendFrame(a.Buffer(), wire.NodeMAC(2), a.MAC(), &h, pl[:])
		if err := a.Send(f); err != nil {
			t.Fatal(err)
		}
	}
}

// seqOf reads a frame's sequence number by majority of its three copies,
// so a frame with one corrupted bit is still recognised.
func seqOf(f []byte) int {
	h := binary.LittleEndian.Uint32(f[wire.EthHeaderLen+16:])
	p0 := binary.LittleEndian.Uint32(f[wire.FrameOverhead:])
	p1 := binary.LittleEndian.Uint32(f[wire.FrameOverhead+4:])
	if h != p0 && p0 == p1 {
		return int(p0)
	}
	return int(h)
}

// drain receives until nothing is pending and nothing arrived for quiet,
// returning the sequence numbers and releasing the frames.
func drain(p *Port, quiet time.Duration) []int {
	var got []int
	last := time.Now()
	for {
		f := p.Recv()
		if f == nil {
			if !p.Pending() && time.Since(last) >= quiet {
				return got
			}
			time.Sleep(20 * time.Microsecond)
			continue
		}
		got = append(got, seqOf(f))
		p.Release(f)
		last = time.Now()
	}
}

func checkClosed(t *testing.T, b *Port, cnt *counting) {
	t.Helper()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if n := cnt.outstanding(); n != 0 {
		t.Fatalf("%d frames never released", n)
	}
}

func TestLossAll(t *testing.T) {
	a, b, cnt := pair(t, Config{Loss: 1})
	send(t, a, 0, 100)
	if got := drain(b, 5*time.Millisecond); len(got) != 0 {
		t.Fatalf("loss=1 delivered %v", got)
	}
	if s := b.Stats(); s != (Stats{Dropped: 100}) {
		t.Fatalf("stats %+v", s)
	}
	if cnt.rel != 100 {
		t.Fatalf("%d of 100 dropped frames released", cnt.rel)
	}
	checkClosed(t, b, cnt)
}

func TestLossSeedRepeats(t *testing.T) {
	run := func(cfg Config) []int {
		a, b, cnt := pair(t, cfg)
		send(t, a, 0, 500)
		got := drain(b, 5*time.Millisecond)
		if s := b.Stats(); len(got) != 500-int(s.Dropped)+int(s.Duplicated) {
			t.Fatalf("dropped %d, delivered %d of 500", s.Dropped, len(got))
		}
		checkClosed(t, b, cnt)
		return got
	}
	first := run(Config{Loss: 0.3, Seed: 42})
	second := run(Config{Loss: 0.3, Seed: 42})
	if !slices.Equal(first, second) {
		t.Fatalf("same seed, different drops:\n%v\n%v", first, second)
	}
	if n := len(first); n < 300 || n > 400 {
		t.Fatalf("loss=0.3 delivered %d of 500", n)
	}
	if !slices.IsSorted(first) {
		t.Fatal("loss alone reordered frames")
	}
	// Turning on other faults leaves the drop pattern alone.
	withDup := run(Config{Loss: 0.3, Dup: 0.5, Corrupt: 0.5, Seed: 42})
	if !slices.Equal(first, slices.Compact(withDup)) {
		t.Fatal("dup and corrupt changed which frames were lost")
	}
	if other := run(Config{Loss: 0.3, Seed: 43}); slices.Equal(first, other) {
		t.Fatal("seeds 42 and 43 dropped the same frames")
	}
}

func TestDupDeliversTwice(t *testing.T) {
	a, b, cnt := pair(t, Config{Dup: 1})
	send(t, a, 0, 5)
	got := drain(b, 5*time.Millisecond)
	if want := []int{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}; !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	if s := b.Stats(); s != (Stats{Duplicated: 5}) {
		t.Fatalf("stats %+v", s)
	}
	checkClosed(t, b, cnt)
}

func TestReorderSwapsNeighbours(t *testing.T) {
	a, b, cnt := pair(t, Config{Reorder: 1})
	send(t, a, 0, 7)
	start := time.Now()
	var got []int
	for len(got) < 6 {
		f := b.Recv()
		if f == nil {
			t.Fatalf("only %v arrived", got)
		}
		got = append(got, seqOf(f))
		b.Release(f)
	}
	if want := []int{1, 0, 3, 2, 5, 4}; !slices.Equal(got, want) {
		t.Fatalf("got %v want %v", got, want)
	}
	// The odd one out has no successor: it comes after MaxHold.
	if !b.Pending() {
		t.Fatal("held frame not pending")
	}
	var f []byte
	for f == nil {
		f = b.Recv()
	}
	if seqOf(f) != 6 || time.Since(start) < MaxHold {
		t.Fatalf("held frame %d after %v", seqOf(f), time.Since(start))
	}
	b.Release(f)
	if s := b.Stats(); s != (Stats{Reordered: 4}) {
		t.Fatalf("stats %+v", s)
	}
	checkClosed(t, b, cnt)
}

func TestCorruptFlipsOneBitPastEthernet(t *testing.T) {
	a, b, cnt := pair(t, Config{Corrupt: 1, Seed: 3})
	const n = 200
	var sent [][]byte
	for i := range n {
		h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Seq: uint32(i), Flags: wire.FlagCRC}
		f := wire.AppendFrame(a.Buffer(), wire.NodeMAC(2), a.MAC(), &h, bytes.Repeat([]byte{byte(i)}, 40))
		sent = append(sent, slices.Clone(f))
		if err := a.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	p := wire.NewParser()
	for i := range n {
		f := b.Recv()
		if f == nil {
			t.Fatalf("frame %d missing", i)
		}
		if len(f) != len(sent[i]) {
			t.Fatalf("frame %d length changed", i)
		}
		diff := 0
		for j := range f {
			d := bits.OnesCount8(f[j] ^ sent[i][j])
			if d != 0 && j < wire.EthHeaderLen {
				t.Fatalf("frame %d: Ethernet header byte %d changed", i, j)
			}
			diff += d
		}
		if diff != 1 {
			t.Fatalf("frame %d: %d bits differ, want 1", i, diff)
		}
		if _, _, err := p.Parse(f); err == nil {
			t.Fatalf("frame %d: corrupted frame passed the parser", i)
		}
		b.Release(f)
	}
	if s := b.Stats(); s != (Stats{Corrupted: n}) {
		t.Fatalf("stats %+v", s)
	}
	checkClosed(t, b, cnt)
}

// A corrupted frame that is also duplicated is delivered twice with its
// flipped bit, so it counts as two corrupted frames: the receiver's CRC
// must fail both, and a test comparing CRC failures with Corrupted needs
// them counted that way.
func TestCorruptDuplicateCountsBothCopies(t *testing.T) {
	a, b, cnt := pair(t, Config{Corrupt: 1, Dup: 1, Seed: 3})
	const n = 20
	p := wire.NewParser()
	for i := range n {
		h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Seq: uint32(i), Flags: wire.FlagCRC}
		f := wire.AppendFrame(a.Buffer(), wire.NodeMAC(2), a.MAC(), &h, bytes.Repeat([]byte{byte(i)}, 40))
		if err := a.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 * n {
		f := b.Recv()
		if f == nil {
			t.Fatalf("copy %d missing", i)
		}
		if _, _, err := p.Parse(f); err == nil {
			t.Fatalf("copy %d: a corrupted frame's copy passed the parser", i)
		}
		b.Release(f)
	}
	if s := b.Stats(); s != (Stats{Corrupted: 2 * n, Duplicated: n}) {
		t.Fatalf("stats %+v, want %d corrupted copies of %d duplicated frames", s, 2*n, n)
	}
	checkClosed(t, b, cnt)
}

func TestDelayHoldsFrames(t *testing.T) {
	const delay = 20 * time.Millisecond
	a, b, cnt := pair(t, Config{Delay: delay})
	notified := 0
	b.SetNotify(func() { notified++ })
	sentAt := time.Now()
	send(t, a, 0, 3)
	if notified != 3 {
		t.Fatalf("notify passed through %d times for 3 frames", notified)
	}
	if f := b.Recv(); f != nil {
		t.Fatal("frame delivered before its delay")
	}
	if !b.Pending() {
		t.Fatal("delayed frames not pending")
	}
	var got []int
	for len(got) < 3 {
		f := b.Recv()
		if f == nil {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		if el := time.Since(sentAt); el < delay {
			t.Fatalf("frame after %v, delay is %v", el, delay)
		}
		got = append(got, seqOf(f))
		b.Release(f)
	}
	if !slices.Equal(got, []int{0, 1, 2}) {
		t.Fatalf("got %v", got)
	}
	if b.Pending() {
		t.Fatal("pending after all delivered")
	}
	if s := b.Stats(); s != (Stats{Delayed: 3}) {
		t.Fatalf("stats %+v", s)
	}
	checkClosed(t, b, cnt)
}

// TestMixedAccountsForEveryFrame runs all faults at once and checks that
// the counters explain what arrived and that every buffer is released once,
// including frames still held or delayed when the port closes.
func TestMixedAccountsForEveryFrame(t *testing.T) {
	a, b, cnt := pair(t, Config{Loss: 0.2, Dup: 0.2, Reorder: 0.2, Corrupt: 0.1, Delay: 50 * time.Microsecond, Seed: 9})
	const n = 2000
	send(t, a, 0, n)
	got := drain(b, 5*time.Millisecond)
	s := b.Stats()
	if len(got) != n-int(s.Dropped)+int(s.Duplicated) {
		t.Fatalf("%d arrived; stats %+v", len(got), s)
	}
	if s.Dropped == 0 || s.Duplicated == 0 || s.Reordered == 0 || s.Corrupted == 0 || s.Delayed != uint64(len(got)) {
		t.Fatalf("stats %+v for %d delivered", s, len(got))
	}
	seen := map[int]int{}
	for _, q := range got {
		seen[q]++
	}
	if len(seen) != n-int(s.Dropped) {
		t.Fatalf("%d distinct frames, want %d", len(seen), n-int(s.Dropped))
	}
	if slices.IsSorted(got) {
		t.Fatal("no frame out of order")
	}
	// Leave frames inside the wrapper and close: they must be released.
	send(t, a, n, 50)
	b.Recv()
	if f := b.Recv(); f != nil {
		b.Release(f)
	}
	checkClosed(t, b, cnt)
}

func TestPassThrough(t *testing.T) {
	a, b, cnt := pair(t, Config{Loss: 0.5})
	if !b.NeedsCRC() {
		t.Fatal("NeedsCRC false")
	}
	if !bytes.Equal(b.MAC(), wire.NodeMAC(2)) || b.MTU() != 1514 {
		t.Fatalf("MAC %v MTU %d", b.MAC(), b.MTU())
	}
	if b.Pending() {
		t.Fatal("pending with nothing sent")
	}
	// Send goes out unfaulted.
	h := wire.Header{Version: wire.Version1, Type: wire.TypeAck}
	for range 20 {
		if err := b.Send(wire.AppendFrame(b.Buffer(), wire.NodeMAC(1), b.MAC(), &h, nil)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		f := a.Recv()
		if f == nil {
			t.Fatalf("send through the wrapper lost frame %d", i)
		}
		a.Release(f)
	}
	if st, ok := StatsOf(struct{ link.Port }{b}); ok || st != (Stats{}) {
		t.Fatal("StatsOf saw through a wrapper without Unwrap")
	}
	if _, ok := StatsOf(unwrapper{b}); !ok {
		t.Fatal("StatsOf did not follow Unwrap")
	}
	if b.Unwrap() != link.Port(cnt) || b.Config().Loss != 0.5 {
		t.Fatal("Unwrap/Config")
	}
	checkClosed(t, b, cnt)
	if b.Recv() != nil {
		t.Fatal("Recv after Close")
	}
	if err := a.Send(wire.AppendFrame(a.Buffer(), wire.NodeMAC(2), a.MAC(), &h, nil)); err == nil {
		t.Fatal("inner port not closed")
	}
}

type unwrapper struct{ link.Port }

func (u unwrapper) Unwrap() link.Port { return u.Port }

func TestParse(t *testing.T) {
	c, err := Parse("loss=0.1, dup=0.01,reorder=5%,corrupt=0.001,delay=50us,seed=1")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Loss: 0.1, Dup: 0.01, Reorder: 0.05, Corrupt: 0.001, Delay: 50 * time.Microsecond, Seed: 1}
	if c != want {
		t.Fatalf("got %+v", c)
	}
	if back, err := Parse(c.String()); err != nil || back != c {
		t.Fatalf("String %q does not parse back: %+v %v", c.String(), back, err)
	}
	if c, err := Parse(""); err != nil || c != (Config{}) || c.Active() || c.String() != "" {
		t.Fatalf("empty spec: %+v %v", c, err)
	}
	for spec, mention := range map[string]string{
		"loss=2":            "loss=2",
		"loss=-0.1":         "loss=-0.1",
		"dup=abc":           "dup=abc",
		"reorder=NaN":       "reorder=NaN",
		"delay=5":           "delay=5",
		"delay=-1ms":        "delay=-1ms",
		"seed=1.5":          "seed=1.5",
		"jitter=1ms":        `"jitter"`,
		"loss":              `"loss"`,
		"loss=":             `"loss="`,
		"loss=0.1,loss=0.2": `"loss"`,
	} {
		_, err := Parse(spec)
		if err == nil || !strings.Contains(err.Error(), mention) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", spec, err, mention)
		}
	}
}
