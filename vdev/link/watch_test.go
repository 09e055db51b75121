package link

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev/wire"
	"golang.org/x/sys/unix"
)

// epollWatches lists, for every epoll instance open in this process, the
// descriptors it watches and the events it asks for (from
// /proc/self/fdinfo): what wakes the runtime's poller.
func epollWatches(t *testing.T) map[int]map[int]uint32 {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]map[int]uint32{}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err != nil || l != "anon_inode:[eventpoll]" {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
		if err != nil {
			continue // closed meanwhile
		}
		w := map[int]uint32{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// tfd:        7 events:       19 data: ...
			fs := strings.Fields(sc.Text())
			if len(fs) >= 4 && fs[0] == "tfd:" && fs[2] == "events:" {
				tfd, err1 := strconv.Atoi(fs[1])
				ev, err2 := strconv.ParseUint(fs[3], 16, 32)
				if err1 == nil && err2 == nil {
					w[tfd] = uint32(ev)
				}
			}
		}
		f.Close()
		out[fd] = w
	}
	return out
}

// TestPortDescriptorWatchedForInputOnly: a UDP port's socket is in no
// epoll instance but its watcher's, which asks for input only, once per
// arming: the runtime's poller, which registers a socket for output too,
// woke a thread for every frame sent and received.
func TestPortDescriptorWatchedForInputOnly(t *testing.T) {
	aa, ab := "127.0.0.1:0", "127.0.0.1:0"
	a, err := ListenUDP(aa, wire.NodeMAC(1), nil, 1500)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ListenUDP(ab, wire.NodeMAC(2), nil, 1500)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, p := range []*udpPort{a.(*udpPort), b.(*udpPort)} {
		if p.watchEp < 0 {
			t.Fatal("the port kept its descriptor in the runtime's poller (leavePoller failed)")
		}
		for ep, w := range epollWatches(t) {
			ev, ok := w[p.fd]
			switch {
			case !ok:
			case ep != p.watchEp:
				t.Errorf("socket %d is watched by epoll %d (events %#x), not only by the port's own %d", p.fd, ep, ev, p.watchEp)
			case ev&unix.EPOLLOUT != 0 || ev&unix.EPOLLIN == 0:
				t.Errorf("socket %d: the watcher asks for events %#x, want input only", p.fd, ev)
			}
		}
	}
}

// admittedPair is two UDP ports on loopback, nodes 1 and 2, each
// admitting the other (closed when the test ends).
func admittedPair(t *testing.T) (a, b *udpPort) {
	t.Helper()
	var ports [2]*udpPort
	for i := range ports {
		p, err := ListenUDP("127.0.0.1:0", wire.NodeMAC(uint16(i+1)), nil, 1500)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ports[i] = p.(*udpPort)
	}
	addr := func(p *udpPort) string {
		sa, err := unix.Getsockname(p.fd)
		if err != nil {
			t.Fatal(err)
		}
		in := sa.(*unix.SockaddrInet4)
		return (&net.UDPAddr{IP: net.IP(in.Addr[:]), Port: in.Port}).String()
	}
	a, b = ports[0], ports[1]
	if err := a.Admit(b.MAC(), addr(b)); err != nil {
		t.Fatal(err)
	}
	if err := b.Admit(a.MAC(), addr(a)); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestWatcherStandsDownWhilePolled: while the engine says it polls the
// port (Park(false)) a frame wakes nobody; once it says it sleeps
// (Park(true)) the frame already waiting is noticed, and so is the next.
func TestWatcherStandsDownWhilePolled(t *testing.T) {
	a, b := admittedPair(t)
	ma, mb := a.MAC(), b.MAC()
	var notices atomic.Int32
	b.SetNotify(func() { notices.Add(1) })
	send := func(body string) {
		t.Helper()
		f := append(append(append([]byte{}, mb...), ma...), 0x88, 0xb5)
		if err := a.Send(append(f, body...)); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(body string) {
		t.Helper()
		end := time.Now().Add(5 * time.Second)
		for {
			if f := b.Recv(); f != nil {
				ok := strings.HasSuffix(string(f), body)
				b.Release(f)
				if ok {
					// Read on until the socket is seen empty, as a
					// polling engine does: that re-arms a watcher.
					for range 2 {
						for g := b.Recv(); g != nil; g = b.Recv() {
							b.Release(g)
						}
					}
					return
				}
			}
			if time.Now().After(end) {
				t.Fatalf("frame %q never arrived", body)
			}
		}
	}
	waitNotices := func(want int32) {
		t.Helper()
		end := time.Now().Add(5 * time.Second)
		for notices.Load() < want {
			if time.Now().After(end) {
				t.Fatalf("%d notices, want %d", notices.Load(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	b.Park(false)
	// A watcher armed before the stand-down may give one notice for the
	// first frame; after that, frames pass unnoticed.
	send("first")
	recv("first")
	time.Sleep(10 * time.Millisecond)
	base := notices.Load()
	for i := range 20 {
		body := fmt.Sprintf("polled %d", i)
		send(body)
		recv(body)
		time.Sleep(time.Millisecond) // time for a watcher to arm again
	}
	time.Sleep(20 * time.Millisecond)
	if got := notices.Load() - base; got != 0 {
		t.Fatalf("%d notices while the port was polled, want none", got)
	}

	send("waiting")
	time.Sleep(10 * time.Millisecond)
	b.Park(true) // the engine falls asleep with a frame waiting
	waitNotices(base + 1)
	recv("waiting") // and the drain that lets the watcher arm again
	send("later")
	waitNotices(base + 2)
	recv("later")
}

// TestWatcherStandDownDisarms: a watcher parked in the poller when the
// engine says it polls returns at the next frame, which the polling
// thread may take first; standing down must disarm its epoll instance
// whether or not the frame was still there, or every later frame wakes
// the runtime's poller while nobody watches. At most one frame after a
// stand-down may (the one that finds the watcher still parked).
func TestWatcherStandDownDisarms(t *testing.T) {
	a, b := admittedPair(t)
	ma, mb := a.MAC(), b.MAC()
	b.SetNotify(func() {})
	send := func() {
		t.Helper()
		if err := a.Send(append(append(append([]byte{}, mb...), ma...), 0x88, 0xb5, 1, 2, 3, 4)); err != nil {
			t.Fatal(err)
		}
	}
	take := func() {
		t.Helper()
		end := time.Now().Add(5 * time.Second)
		for {
			if f := b.Recv(); f != nil {
				b.Release(f)
				return
			}
			if time.Now().After(end) {
				t.Fatal("frame lost")
			}
		}
	}
	watchReadable := func() bool {
		pfd := []unix.PollFd{{Fd: int32(b.watchEp), Events: unix.POLLIN}}
		n, _ := unix.Poll(pfd, 0)
		return n > 0
	}
	for round := range 200 {
		b.Park(true)
		time.Sleep(2 * time.Millisecond) // the watcher arms and parks in the poller
		b.Park(false)                    // the engine polls again
		send()
		take()                           // the polling thread takes the frame at once
		time.Sleep(2 * time.Millisecond) // the watcher wakes, or not, and stands down
		for range 2 {
			for f := b.Recv(); f != nil; f = b.Recv() {
				b.Release(f)
			}
		}
		woke := 0
		for range 10 {
			send()
			time.Sleep(200 * time.Microsecond)
			if watchReadable() {
				woke++
			}
			take()
			time.Sleep(200 * time.Microsecond) // a watcher the frame woke stands down
		}
		if woke > 1 {
			t.Fatalf("round %d: %d of 10 frames woke the runtime's poller while the watcher stood down", round, woke)
		}
	}
}
