package link

import (
	"bytes"
	"errors"
	"net"
	"runtime"
	"sync"
	"testing"
)

func mac(b byte) net.HardwareAddr { return net.HardwareAddr{2, 0x44, 0x4e, 0, 0, b} }

func frameTo(p Port, dst net.HardwareAddr, body string) []byte {
	f := append(p.Buffer(), dst...)
	f = append(f, p.MAC()...)
	f = append(f, 0x88, 0xb5)
	return append(f, body...)
}

func TestHubDeliversByMAC(t *testing.T) {
	h := NewHub(1514, 4)
	a, _ := h.Attach(mac(1))
	b, _ := h.Attach(mac(2))
	c, _ := h.Attach(mac(3))
	notified := 0
	b.SetNotify(func() { notified++ })
	if err := a.Send(frameTo(a, mac(2), "hello")); err != nil {
		t.Fatal(err)
	}
	if c.Recv() != nil {
		t.Fatal("frame leaked to another port")
	}
	f := b.Recv()
	if f == nil || !bytes.HasSuffix(f, []byte("hello")) || notified != 1 {
		t.Fatalf("got %q notified %d", f, notified)
	}
	b.Release(f)
	if err := a.Send(frameTo(a, mac(9), "x")); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("send to nobody: %v", err)
	}
	if _, err := h.Attach(mac(1)); err == nil {
		t.Fatal("duplicate MAC attached")
	}
	// broadcast reaches everyone else
	if err := a.Send(frameTo(a, net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "all")); err != nil {
		t.Fatal(err)
	}
	if b.Recv() == nil || c.Recv() == nil || a.Recv() != nil {
		t.Fatal("broadcast")
	}
}

func TestHubBackpressureLosesNothing(t *testing.T) {
	h := NewHub(1514, 4)
	a, _ := h.Attach(mac(1))
	b, _ := h.Attach(mac(2))
	const n = 10000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < n; {
			f := frameTo(a, mac(2), string(rune('A'+i%26)))
			if err := a.Send(f); errors.Is(err, ErrFull) {
				a.Release(f)
				runtime.Gosched() // the receiver frees the queue: let it run
				continue
			} else if err != nil {
				t.Error(err)
				return
			}
			i++
		}
	}()
	for i := 0; i < n; {
		f := b.Recv()
		if f == nil {
			runtime.Gosched() // the sender fills it: let it run
			continue
		}
		if want := byte('A' + i%26); f[len(f)-1] != want {
			t.Fatalf("frame %d out of order: %c want %c", i, f[len(f)-1], want)
		}
		b.Release(f)
		i++
	}
	wg.Wait()
}
