package pingpong

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/internal/release"
	"golang.org/x/sys/unix"
)

// RawWordPingPong is the floor the device is measured against: two
// goroutines bounce one 64-bit word through a shared mapping (each waits for
// the other's value, then writes its own). It returns RTT/2 in µs. Every
// hand-off costs one cache-line transfer, so a device round trip can be
// expressed as a number of these. Each word is published with the release
// store the shared-memory ring publishes its slots with (release.Store, a
// plain MOV on amd64): a locked store would wait for the line to come back
// on every hand-off, a cost the device does not pay, and raise the floor.
func RawWordPingPong(iters int) float64 {
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0
	}
	defer unix.Munmap(mem)
	ping := (*uint64)(unsafe.Pointer(&mem[0]))
	pong := (*uint64)(unsafe.Pointer(&mem[128])) // separate lines, as the device's pointers are
	done := make(chan struct{})
	go func() {
		for i := uint64(1); i <= uint64(iters); i++ {
			spinUntil(ping, i)
			release.Store(pong, i)
		}
		close(done)
	}()
	start := monotime.Now()
	for i := uint64(1); i <= uint64(iters); i++ {
		release.Store(ping, i)
		spinUntil(pong, i)
	}
	el := monotime.Now() - start
	<-done
	return float64(el) / float64(iters) / 2 / 1e3
}

func spinUntil(p *uint64, v uint64) {
	for n := 1; atomic.LoadUint64(p) != v; n++ {
		if n%1024 == 0 {
			runtime.Gosched()
		}
	}
}

// RawMemcpy returns the bandwidth in MB/s of copying size bytes between two
// buffers in a shared mapping: the ceiling for moving link memory, since the
// device copies each byte into a frame and again into place.
func RawMemcpy(size, iters int) float64 {
	mem, err := unix.Mmap(-1, 0, 2*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0
	}
	defer unix.Munmap(mem)
	src, dst := mem[:size], mem[size:]
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src)
	start := monotime.Now()
	for i := 0; i < iters; i++ {
		copy(dst, src)
	}
	el := monotime.Now() - start
	return float64(size) * float64(iters) / (float64(el) / 1e3)
}
