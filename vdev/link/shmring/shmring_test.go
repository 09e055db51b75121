package shmring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

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

// A torn or hostile index from the peer is named ErrCorrupt, never read past.
func TestCorruptIndexes(t *testing.T) {
	a, b := pair(t, 4, 64)
	buf := make([]byte, 0, 64)
	// The producer's tail jumps more than a ring ahead of our head.
	atomic.StoreUint64(a.Mine.word(offTail), 99)
	if _, err := b.Get(buf); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("tail a ring ahead: %v, want ErrCorrupt", err)
	}
	atomic.StoreUint64(a.Mine.word(offTail), 0)
	// A slot claiming more bytes than a slot has.
	a.Put([]byte{1}, nil)
	binary.LittleEndian.PutUint32(a.Mine.mem[HeaderSize:], 1<<20)
	if _, err := b.Get(buf); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("oversized length: %v, want ErrCorrupt", err)
	}
	// The consumer's head runs ahead of what we published.
	atomic.StoreUint64(b.Mine.word(offHead), 7)
	if _, err := a.Put([]byte{1}, nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("head ahead of tail: %v, want ErrCorrupt", err)
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

// FuzzGet: whatever the producer's tail and slot contents, Get returns a
// frame within a slot, nothing, or ErrCorrupt, and never reads out of range.
func FuzzGet(f *testing.F) {
	f.Add(uint64(1), uint32(5), []byte("hello"))
	f.Add(uint64(1<<63), uint32(0xffffffff), []byte{})
	f.Add(uint64(3), uint32(56), bytes.Repeat([]byte{7}, 56))
	f.Fuzz(func(t *testing.T, tail uint64, n uint32, body []byte) {
		a, b := pair(t, 4, 56)
		for i := 0; i < 4; i++ {
			off := HeaderSize + i*a.Mine.slotSize
			binary.LittleEndian.PutUint32(a.Mine.mem[off:], n)
			copy(a.Mine.mem[off+lenWord:off+a.Mine.slotSize], body)
		}
		atomic.StoreUint64(a.Mine.word(offTail), tail)
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
			if len(fr) > b.Theirs.MaxFrame() || len(fr) != int(n) {
				t.Fatalf("frame of %d bytes, slot said %d", len(fr), n)
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
