package capture_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// sealedMem is a sealed memfd of size bytes, mapped read-write.
func sealedMem(t *testing.T, size int) (int, []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate(fmt.Sprintf("dimmnet-capture-test-%d", os.Getpid()), unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem); unix.Close(fd) })
	return fd, mem
}

// A frame that crossed the shared-memory ring by reference (its payload
// left in the sender's link memory) is recorded whole by a capture of the
// receiving port, payload and all, as if it had been carried.
func TestCaptureShowsReferredPayloadWhole(t *testing.T) {
	const mtu = 64<<10 + wire.FrameOverhead
	dir := t.TempDir()
	a, err := link.ListenShm(dir, 1, mtu)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := link.ListenShm(dir, 2, mtu)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fd, mem := sealedMem(t, 1<<20)
	if err := a.(link.MemorySharer).ShareMemory(fd, 0, mem); err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	var out bytes.Buffer
	cw, err := capture.NewWriter(&out, mtu)
	if err != nil {
		t.Fatal(err)
	}
	cb := cw.Wrap(b)
	referred := a.(interface{ Referred() uint64 })
	payload := mem[4096 : 4096+20000]
	var want []byte
	// The first sends may be carried: the peer maps our memory a moment
	// after the meeting. Send until one went by reference.
	for end := time.Now().Add(5 * time.Second); referred.Referred() == 0; {
		if time.Now().After(end) {
			t.Fatal("no frame went by reference")
		}
		head := append(a.Buffer(), wire.NodeMAC(2)...)
		head = append(head, a.MAC()...)
		head = append(head, 0x88, 0xb5)
		head = append(head, bytes.Repeat([]byte{0xee}, wire.FrameOverhead-len(head))...)
		want = append(append([]byte{}, head...), payload...)
		if err := a.(link.VectorSender).SendVec(head, payload); err != nil {
			t.Fatal(err)
		}
		var f []byte
		for f == nil {
			f = cb.Recv()
		}
		if !bytes.Equal(f, want) {
			t.Fatalf("received %d bytes, not the frame sent (%d)", len(f), len(want))
		}
		cb.Release(f)
	}
	if err := cw.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := capture.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	var last []byte
	for {
		f, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		last = f
	}
	if !bytes.Equal(last, want) {
		t.Fatalf("the capture recorded %d bytes for the referred frame, want it whole (%d)", len(last), len(want))
	}
}
