package shmring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/internal/release"
	"golang.org/x/sys/unix"
)

// pair makes the two ends of a link between "a" and "b" in this process:
// each creates its segment and maps the other's read-only, as two
// processes do after trading fds.
func pair(t testing.TB, slots, maxFrame int) (a, b *Pair) {
	t.Helper()
	sa, err := Create("a", slots, maxFrame)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := Create("b", slots, maxFrame)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := Map(sa.FD())
	if err != nil {
		t.Fatal(err)
	}
	rb, err := Map(sb.FD())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sa.Close(); sb.Close(); ra.Close(); rb.Close() })
	return &Pair{Mine: sa, Theirs: rb}, &Pair{Mine: sb, Theirs: ra}
}

// Frames arrive whole and in order, around the ring many times.
func TestFramesArriveInOrder(t *testing.T) {
	a, b := pair(t, 4, 256)
	buf := make([]byte, 0, b.Theirs.MaxFrame())
	for i := 0; i < 50; i++ {
		head := []byte{byte(i), 1, 2}
		payload := bytes.Repeat([]byte{byte(i)}, i*3)
		if _, err := a.Put(head, payload); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		if !b.Pending() {
			t.Fatalf("frame %d published but not pending", i)
		}
		f, err := b.Get(buf)
		if err != nil || f == nil {
			t.Fatalf("get %d: %v %v", i, f, err)
		}
		if want := append(append([]byte{}, head...), payload...); !bytes.Equal(f, want) {
			t.Fatalf("frame %d: got % x, want % x", i, f, want)
		}
	}
	if f, err := b.Get(buf); f != nil || err != nil {
		t.Fatalf("empty ring gave %v, %v", f, err)
	}
}

// A full ring refuses with ErrFull until the consumer frees a slot; nothing
// already in it is overwritten.
func TestRingFull(t *testing.T) {
	a, b := pair(t, 2, 64)
	for i := 0; i < 2; i++ {
		if _, err := a.Put([]byte{byte(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Put([]byte{9}, nil); !errors.Is(err, ErrFull) {
		t.Fatalf("third put on a 2-slot ring: %v, want ErrFull", err)
	}
	buf := make([]byte, 0, 64)
	f, _ := b.Get(buf)
	if len(f) != 1 || f[0] != 0 {
		t.Fatalf("first frame %v", f)
	}
	if _, err := a.Put([]byte{2}, nil); err != nil {
		t.Fatalf("put after a slot was freed: %v", err)
	}
	for _, want := range []byte{1, 2} {
		f, _ := b.Get(buf)
		if len(f) != 1 || f[0] != want {
			t.Fatalf("frame %v, want [%d]", f, want)
		}
	}
}

// A frame larger than a slot is refused, not truncated.
func TestFrameTooBig(t *testing.T) {
	a, _ := pair(t, 2, 64)
	n := a.Mine.MaxFrame()
	if _, err := a.Put(make([]byte, n+1), nil); !errors.Is(err, ErrTooBig) {
		t.Fatalf("%d bytes into slots of %d: %v, want ErrTooBig", n+1, n, err)
	}
	if _, err := a.Put(make([]byte, n-10), make([]byte, 10)); err != nil {
		t.Fatalf("a frame of exactly a slot: %v", err)
	}
}

// The producer learns that the consumer sleeps from the word it stores.
func TestWakeOnlyWhenAsleep(t *testing.T) {
	a, b := pair(t, 4, 64)
	if wake, _ := a.Put([]byte{1}, nil); wake {
		t.Fatal("producer asked to wake an awake consumer")
	}
	b.Mine.SetSleeping(true)
	if wake, _ := a.Put([]byte{2}, nil); !wake {
		t.Fatal("producer not asked to wake a sleeping consumer")
	}
}

// A torn or hostile slot word or index from the peer is named ErrCorrupt,
// never read past.
func TestCorruptIndexes(t *testing.T) {
	a, b := pair(t, 4, 64)
	buf := make([]byte, 0, 64)
	slot := func(i int) *uint64 { return a.Mine.word(HeaderSize + i*a.Mine.slotSize) }
	// A ticket that is neither this lap's, the last lap's nor "never written".
	atomic.StoreUint64(slot(0), 99<<32|1)
	if !b.Pending() {
		t.Fatal("a corrupt slot word is not reported pending: Get would never say so")
	}
	if _, err := b.Get(buf); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ticket out of range: %v, want ErrCorrupt", err)
	}
	atomic.StoreUint64(slot(0), 0)
	// A slot claiming more bytes than a slot has.
	a.Put([]byte{1}, nil)
	atomic.StoreUint64(slot(0), 1<<32|1<<20)
	if _, err := b.Get(buf); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("oversized length: %v, want ErrCorrupt", err)
	}
	// A slot of the second lap cleared to "never written".
	atomic.StoreUint64(slot(0), 1<<32|1)
	for i := 0; i < 4; i++ {
		if f, err := b.Get(buf); f == nil || err != nil {
			t.Fatalf("get %d: %v %v", i, f, err)
		}
		if i < 3 {
			a.Put([]byte{1}, nil)
		}
	}
	atomic.StoreUint64(slot(0), 0)
	if _, err := b.Get(buf); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("cleared slot on the second lap: %v, want ErrCorrupt", err)
	}
	// The consumer's head runs ahead of what we published (seen when the
	// ring looks full and the producer looks at it again).
	atomic.StoreUint64(b.Mine.word(offHead), 7)
	a.Mine.peerHead = a.Mine.tail - a.Mine.slots
	if _, err := a.Put([]byte{1}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("head ahead of tail: %v, want ErrCorrupt", err)
	}
}

// The consumer publishes its head only every quarter ring; the producer
// never overwrites a slot not consumed, finds the ring full only when at
// most a quarter of it was consumed unannounced, and goes on around the
// ring many times with the consumer lagging by any amount.
func TestLazyHeadFillsTheRing(t *testing.T) {
	a, b := pair(t, 16, 64)
	buf := make([]byte, 0, 64)
	sent, got := 0, 0
	for lag := 0; lag < 40; lag++ {
		for {
			_, err := a.Put([]byte{byte(sent)}, []byte{byte(sent >> 8)})
			if errors.Is(err, ErrFull) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			sent++
		}
		if sent-got > 16 || sent-got <= 16-4 {
			t.Fatalf("ring full with %d frames in it, want 13 to 16", sent-got)
		}
		for i := 0; i <= lag%17 && got < sent; i++ {
			f, err := b.Get(buf)
			if err != nil || len(f) != 2 || f[0] != byte(got) || f[1] != byte(got>>8) {
				t.Fatalf("frame %d: % x %v", got, f, err)
			}
			got++
		}
	}
	for got < sent {
		if f, err := b.Get(buf); err != nil || len(f) != 2 || f[0] != byte(got) {
			t.Fatalf("frame %d: % x %v", got, f, err)
		}
		got++
	}
	if b.Pending() {
		t.Fatal("pending after every frame was taken")
	}
}

// A segment that is not sealed against shrinking, or not ours, is refused
// before it is mapped for use.
func TestMapRefusesUnsafeSegments(t *testing.T) {
	fd, err := unix.MemfdCreate("plain", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Ftruncate(fd, int64(Size(2, 128)))
	if _, err := Map(fd); !errors.Is(err, ErrBadSegment) {
		t.Fatalf("unsealed memfd: %v, want ErrBadSegment", err)
	}
	fd2, _ := unix.MemfdCreate("sealed-garbage", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	defer unix.Close(fd2)
	unix.Ftruncate(fd2, int64(Size(2, 128)))
	unix.FcntlInt(uintptr(fd2), unix.F_ADD_SEALS, seals)
	if _, err := Map(fd2); !errors.Is(err, ErrBadSegment) {
		t.Fatalf("sealed memfd without our header: %v, want ErrBadSegment", err)
	}
}

// FuzzGet: whatever the producer wrote in its slot words and slots, Get
// returns a frame within a slot, nothing, or ErrCorrupt, and never reads
// out of range.
func FuzzGet(f *testing.F) {
	f.Add(uint64(1)<<32|5, uint64(2)<<32|5, []byte("hello"))
	f.Add(uint64(1<<63), uint64(0xffffffff), []byte{})
	f.Add(uint64(1)<<32|56, uint64(0), bytes.Repeat([]byte{7}, 56))
	f.Add(uint64(1)<<32|56, uint64(0xfffffffd)<<32|3, []byte{})
	f.Fuzz(func(t *testing.T, w0, w1 uint64, body []byte) {
		a, b := pair(t, 4, 56)
		for i := 0; i < 4; i++ {
			off := HeaderSize + i*a.Mine.slotSize
			copy(a.Mine.mem[off+lenWord:off+a.Mine.slotSize], body)
			w := w0
			if i%2 == 1 {
				w = w1
			}
			atomic.StoreUint64(a.Mine.word(off), w+uint64(i)<<32)
		}
		buf := make([]byte, 0, b.Theirs.MaxFrame())
		for i := 0; i < 6; i++ {
			fr, err := b.Get(buf)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("get: %v", err)
				}
				return
			}
			if fr == nil {
				return
			}
			want := uint32(w0)
			if i%2 == 1 {
				want = uint32(w1)
			}
			if len(fr) > b.Theirs.MaxFrame() || len(fr) != int(want) {
				t.Fatalf("frame of %d bytes, slot said %d", len(fr), want)
			}
		}
	})
}

func BenchmarkPutGet(b *testing.B) {
	for _, size := range []int{64, 9000, 65536} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			p, q := pair(b, 64, size)
			buf := make([]byte, 0, size)
			payload := make([]byte, size-14)
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				p.Put(payload[:14], payload)
				q.Get(buf)
			}
		})
	}
}

// Peek lends the frame where it lies; its slot is not the producer's again
// until Done, however far the producer gets.
func TestPeekHoldsTheSlotUntilDone(t *testing.T) {
	a, b := pair(t, 2, 64)
	a.Put([]byte{1, 2}, []byte{3})
	a.Put([]byte{4}, nil)
	v, err := b.Peek()
	if err != nil || !bytes.Equal(v, []byte{1, 2, 3}) {
		t.Fatalf("peek: % x %v", v, err)
	}
	if w, _ := b.Peek(); !bytes.Equal(w, v) {
		t.Fatal("a second peek moved on")
	}
	if _, err := a.Put([]byte{9}, nil); !errors.Is(err, ErrFull) {
		t.Fatalf("put into the lent slot: %v, want ErrFull", err)
	}
	b.Done()
	if _, err := a.Put([]byte{5}, nil); err != nil {
		t.Fatalf("put after Done: %v", err)
	}
	if !bytes.Equal(v, []byte{5, 2, 3}) {
		t.Fatalf("the reused slot reads % x", v) // what a reader of a view after Done would see
	}
	for _, want := range [][]byte{{4}, {5}} {
		if w, _ := b.Peek(); !bytes.Equal(w, want) {
			t.Fatalf("peek % x, want % x", w, want)
		}
		b.Done()
	}
}

// A segment says whether its producer publishes lazily, and a mapper
// refuses a header from another layout version or with flags it does not
// know, rather than guessing what the producer promises.
func TestLazyFlagAndLayoutVersion(t *testing.T) {
	s, err := Create("lazy", 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := Map(s.FD())
	if err != nil {
		t.Fatal(err)
	}
	want := release.Plain && registered()
	if s.lazy != want || r.Lazy() != want {
		t.Fatalf("producer lazy %v, consumer sees %v; want %v (this build lazy: %v)", s.lazy, r.Lazy(), want, release.Plain)
	}
	r.Close()
	for _, c := range []struct {
		off  int
		val  uint32
		what string
	}{
		{offVer, 2, "the layout before lazy publishing"},
		{offFlags, 2, "an unknown flag"},
		{offFlags, 1 << 31, "an unknown high flag"},
	} {
		old := binary.LittleEndian.Uint32(s.mem[c.off:])
		binary.LittleEndian.PutUint32(s.mem[c.off:], c.val)
		if r, err := Map(s.FD()); !errors.Is(err, ErrBadSegment) {
			if r != nil {
				r.Close()
			}
			t.Fatalf("%s: %v, want ErrBadSegment", c.what, err)
		}
		binary.LittleEndian.PutUint32(s.mem[c.off:], old)
	}
}

// The sleep protocol holds with lazy publishing: a consumer that stores
// its sleep word, runs Fence and then finds the ring empty is always
// signalled for a frame published meanwhile. Each round both sides leave
// a shared start line and, after spins of their own (varied so that the
// producer's publish falls all around the consumer's fall to sleep), the
// producer publishes one frame and the consumer looks once, then sleeps;
// a frame found waiting after a sleep nobody signalled is a lost wake-up
// (without Fence the producer's load of the sleep word can pass its own
// store of the slot word, still in its store buffer).
func TestNoLostWakeUp(t *testing.T) {
	a, b := pair(t, 4, 64)
	// Up to 20,000 rounds, for at most 3 s: on a loaded machine the two
	// goroutines rarely run at once, and a round then takes a time slice.
	rounds := 20000
	if testing.Short() {
		rounds = 2000
	}
	budget := time.Now().Add(3 * time.Second)
	var round, woken atomic.Int64 // woken: the last round the producer signalled
	woken.Store(-1)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		runtime.LockOSThread()
		for i := int64(0); i < int64(rounds); i++ {
			for n := 0; round.Load() != i; n++ {
				if round.Load() < 0 {
					return // the consumer is done
				}
				if n%256 == 255 {
					runtime.Gosched() // the consumer may be off its core
				}
			}
			for j := int64(0); j < (i*7)%97; j++ {
				sink.Add(0)
			}
			w, err := a.Put([]byte{1}, nil)
			if err != nil {
				panic(err)
			}
			if w {
				woken.Store(i)
			}
		}
	}()
	buf := make([]byte, 0, 64)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer func() { round.Store(-1); <-exited }() // before the segments are unmapped
	for i := 0; i < rounds && time.Now().Before(budget); i++ {
		round.Store(int64(i))
		for j := 0; j < (i*13)%97; j++ {
			sink.Add(0)
		}
		if f, err := b.Get(buf); err != nil || f != nil {
			if err != nil {
				t.Fatal(err)
			}
			continue // came before we looked
		}
		b.Mine.SetSleeping(true)
		if b.Theirs.Lazy() {
			if err := Fence(); err != nil {
				t.Fatal(err)
			}
		}
		if !b.Pending() {
			// Asleep: only the producer's signal ends it. The producer
			// publishes this round's frame in any case, and signals if
			// it saw the sleep word.
			deadline := time.Now().Add(10 * time.Second)
			for n := 0; woken.Load() != int64(i); n++ {
				if n%256 == 255 {
					runtime.Gosched() // the producer may be off its core
				}
				if !time.Now().Before(deadline) {
					b.Mine.SetSleeping(false)
					t.Fatalf("round %d: consumer asleep, never signalled; frame waiting: %v", i, b.Pending())
				}
				if !b.Pending() {
					continue // not published yet
				}
				// Published: the producer signals next, or it did not see
				// the sleep word (it saw the frame's own look instead,
				// which the consumer's last look missed: lost). Give a
				// signal still on its way a second.
				for end := time.Now().Add(time.Second); woken.Load() != int64(i) && time.Now().Before(end); {
				}
				if woken.Load() != int64(i) {
					b.Mine.SetSleeping(false)
					t.Fatalf("round %d: lost wake-up: frame published, sleep word not seen by the producer, and not seen by the consumer's last look", i)
				}
			}
		}
		b.Mine.SetSleeping(false)
		for n := 0; ; n++ {
			if n%256 == 255 {
				runtime.Gosched()
			}
			f, err := b.Get(buf)
			if err != nil {
				t.Fatal(err)
			}
			if f != nil {
				break
			}
		}
	}
}

var sink atomic.Uint64

// A frame built in its slot (Reserve, Commit) arrives as Put's would; a
// Reserve not committed publishes nothing and lends the same slot again;
// a full ring refuses the Reserve.
func TestFrameBuiltInSlot(t *testing.T) {
	a, b := pair(t, 2, 64)
	buf := make([]byte, 0, 64)
	s, err := a.Reserve(5)
	if err != nil || len(s) != 5 {
		t.Fatalf("reserve: %d bytes, %v", len(s), err)
	}
	copy(s, "stale")
	if b.Pending() {
		t.Fatal("a reserved slot is pending before its commit")
	}
	s2, err := a.Reserve(3)
	if err != nil || &s2[0] != &s[0] {
		t.Fatalf("second reserve without a commit: %v, same slot %v", err, err == nil && &s2[0] == &s[0])
	}
	copy(s2, "abc")
	a.Commit(3)
	if f, _ := b.Get(buf); string(f) != "abc" {
		t.Fatalf("got %q, want the committed frame", f)
	}
	for i := range 2 {
		s, err := a.Reserve(1)
		if err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		s[0] = byte(i)
		a.Commit(1)
	}
	if _, err := a.Reserve(1); !errors.Is(err, ErrFull) {
		t.Fatalf("reserve on a full ring: %v, want ErrFull", err)
	}
	if _, err := a.Reserve(a.Mine.MaxFrame() + 1); !errors.Is(err, ErrTooBig) {
		t.Fatalf("reserve beyond a slot: %v, want ErrTooBig", err)
	}
	for _, want := range []byte{0, 1} {
		if f, _ := b.Get(buf); len(f) != 1 || f[0] != want {
			t.Fatalf("frame %v, want [%d]", f, want)
		}
	}
}
