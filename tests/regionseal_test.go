package tests

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev/region"
	"golang.org/x/sys/unix"
)

// regionClient is a hostile ivshmem client: it keeps the region fd the
// daemon sends, to do with it what a client can.
type regionClient struct {
	raw *rawClient
	fd  int
}

// dialRegion attaches to sock and reads the set-up up to the region fd,
// then the rest of it (peer 0's vector and its own).
func dialRegion(t *testing.T, sock string) *regionClient {
	t.Helper()
	r := dialRaw(t, sock)
	var vals []int64
	fd := -1
	for len(vals) < 5 {
		var b [8]byte
		oob := make([]byte, unix.CmsgSpace(4))
		r.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, oobn, _, _, err := r.c.ReadMsgUnix(b[:], oob)
		if err != nil || n != 8 {
			t.Fatalf("read set-up: %v (%d bytes)", err, n)
		}
		v := int64(binary.LittleEndian.Uint64(b[:]))
		msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			fds, _ := unix.ParseUnixRights(&m)
			for _, f := range fds {
				if len(vals) == 2 && v == -1 {
					fd = f
				} else {
					unix.Close(f)
				}
			}
		}
		vals = append(vals, v)
	}
	if vals[0] != 0 || vals[2] != -1 || fd < 0 {
		t.Fatalf("set-up %v, region fd %d", vals, fd)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return &regionClient{raw: r, fd: fd}
}

// A client cannot resize a default (memfd) region: the daemon seals it
// against shrinking and growing, and against new seals; the devices go on
// serving after the attempt.
func TestRegionSealedMemfd(t *testing.T) {
	d := startDaemon(t, 2)
	for _, l := range d.ready {
		if !strings.Contains(l, "region memfd (sealed)") {
			t.Fatalf("ready line does not say the region is a sealed memfd: %q", l)
		}
	}
	c := dialRegion(t, d.sock(0))
	seals, err := unix.FcntlInt(uintptr(c.fd), unix.F_GET_SEALS, 0)
	if err != nil || seals != region.Seals {
		t.Fatalf("seals %#x (%v), want %#x", seals, err, region.Seals)
	}
	if err := unix.Ftruncate(c.fd, 0); !errors.Is(err, unix.EPERM) {
		t.Fatalf("ftruncate to 0: %v, want EPERM", err)
	}
	if err := unix.Ftruncate(c.fd, 64<<20); !errors.Is(err, unix.EPERM) {
		t.Fatalf("ftruncate to 64 MiB: %v, want EPERM", err)
	}
	if _, err := unix.FcntlInt(uintptr(c.fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE); !errors.Is(err, unix.EPERM) {
		t.Fatalf("adding a seal: %v, want EPERM", err)
	}
	a, b := attach(t, d.sock(0)), attach(t, d.sock(1))
	goodPush(t, a, b, 1<<20, 21)
	goodPush(t, b, a, 1<<20, 22)
	if left, _ := filepath.Glob(fmt.Sprintf("/dev/shm/dimmnet-%d-*", d.cmd.Process.Pid)); len(left) > 0 {
		t.Fatalf("memfd regions, yet files in /dev/shm: %v", left)
	}
}

// A client that shrinks its file region (serve --shm-dir) fails that
// device, named in the log, and its clients are told it left; the daemon
// keeps serving its other devices, which still ping-pong, and exits
// cleanly, removing every region file, the broken one included.
func TestRegionFileShrunk(t *testing.T) {
	shmDir := t.TempDir()
	d := startDaemon(t, 3, "--shm-dir", shmDir)
	pid := d.cmd.Process.Pid
	if want := filepath.Join(shmDir, fmt.Sprintf("dimmnet-%d-node0", pid)); !strings.Contains(d.ready[0], "region "+want) {
		t.Fatalf("ready line %q does not name %s", d.ready[0], want)
	}
	c := dialRegion(t, d.sock(0))
	if err := unix.Ftruncate(c.fd, 0); err != nil {
		t.Fatalf("ftruncate of a file region: %v (files cannot be sealed)", err)
	}
	eventually(t, "the daemon to fail node 0", func() bool {
		return strings.Contains(d.stderr.String(), "device failed")
	})
	log := d.stderr.String()
	if !strings.Contains(log, "node=0") || !strings.Contains(log, "resized") {
		t.Fatalf("the failure does not name node 0:\n%s", log)
	}
	if v, fd := c.raw.next(t); v != 0 || fd {
		t.Fatalf("node 0's client was told %d (fd %v), want peer 0 left", v, fd)
	}
	out, err := exec.Command(dimmnet(t), "pingpong", "--attach", d.sock(1)+","+d.sock(2),
		"--json", "-q", "--max", "64", "--iters", "20", "--raw-time", "20ms").CombinedOutput()
	if err != nil {
		t.Fatalf("ping-pong on the other devices after node 0 failed: %v\n%s\n%s", err, out, d.stderr)
	}
	if strings.Count(d.stderr.String(), "device failed") != 1 {
		t.Fatalf("more than node 0 failed:\n%s", d.stderr)
	}
	d.stop(t)
	if left, _ := filepath.Glob(filepath.Join(shmDir, "dimmnet-*")); len(left) > 0 {
		t.Fatalf("region files left behind: %v", left)
	}
}

// The region files a killed daemon left are removed by the next serve on
// the same directory, which logs each; a live process's are kept.
func TestStaleRegionsRemoved(t *testing.T) {
	shmDir := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(shmDir, fmt.Sprintf("dimmnet-%d-node0", dead.Process.Pid))
	live := filepath.Join(shmDir, fmt.Sprintf("dimmnet-%d-node0", os.Getpid()))
	other := filepath.Join(shmDir, "dimmnet-lab-1-raw")
	for _, p := range []string{stale, live, other} {
		if err := os.WriteFile(p, make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, 1, "--shm-dir", shmDir)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a dead daemon's region is still there: %v", err)
	}
	for _, p := range []string{live, other} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s was removed: %v", p, err)
		}
	}
	// The daemon logs before it says ready, but its stderr reaches us
	// through a copying goroutine that may come later.
	eventually(t, "the removal in the daemon's log", func() bool {
		l := d.stderr.String()
		return strings.Contains(l, "removed a dead daemon's region") && strings.Contains(l, stale)
	})
}

// --keep keeps files, so it needs file regions.
func TestKeepNeedsShmDir(t *testing.T) {
	out, err := exec.Command(dimmnet(t), "serve", "--dir", t.TempDir(), "--keep").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--shm-dir") {
		t.Fatalf("serve --keep without --shm-dir: %v: %s", err, out)
	}
}
