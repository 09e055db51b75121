package regfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

const waitNs = 5_000_000_000

// mounted is a running cluster with a regfs mount over it.
type mounted struct {
	l   *vdev.Local
	ds  []*driver.Driver
	mnt string
}

// dir is node n's directory (devices are named node<id>).
func (m *mounted) dir(n uint16) string { return filepath.Join(m.mnt, fmt.Sprintf("node%d", n)) }

// setup starts in-process devices for nodes, opens a driver on each and
// mounts them all; unmounting is registered after the devices' Close, so it
// runs first and no FUSE read can touch an unmapped region.
func setup(t *testing.T, writable bool, nodes ...uint16) *mounted {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skipf("regfs needs FUSE and /dev/fuse is missing: %v", err)
	}
	mnt := t.TempDir()
	l, err := vdev.NewLocal(vdev.Config{}, 0, nodes...)
	if err != nil {
		t.Fatalf("NewLocal: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	m := &mounted{l: l, mnt: mnt}
	var devs []Device
	for _, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			t.Fatalf("open driver on node %d: %v", dev.Node(), err)
		}
		m.ds = append(m.ds, d)
		devs = append(devs, Device{Name: fmt.Sprintf("node%d", dev.Node()), Region: dev.Region()})
	}
	srv, err := Mount(mnt, devs, Options{Writable: writable})
	if err != nil {
		t.Fatalf("Mount: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("Unmount: %v", err)
		}
	})
	return m
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

// firstField parses the number a register file starts with.
func firstField(t *testing.T, s string) uint64 {
	t.Helper()
	f := strings.Fields(s)
	if len(f) == 0 {
		t.Fatalf("empty content")
	}
	v, err := strconv.ParseUint(f[0], 0, 64)
	if err != nil {
		t.Fatalf("first field of %q: %v", s, err)
	}
	return v
}

func wait(t *testing.T, d *driver.Driver) uapi.Status {
	t.Helper()
	s, err := d.Wait(waitNs)
	if err != nil {
		t.Fatalf("node %d: wait: %v", d.Node(), err)
	}
	return s
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestRegisterFiles(t *testing.T) {
	m := setup(t, false, 1, 2)
	for i, d := range m.ds {
		node := uint16(i + 1)
		dir := m.dir(node)
		if got := read(t, filepath.Join(dir, "registers/NODE_ID")); got != fmt.Sprintf("%d\n", node) {
			t.Errorf("node%d NODE_ID = %q", node, got)
		}
		if got := read(t, filepath.Join(dir, "registers/MAGIC")); got != "0x3154454e4d4d4944 \"DIMMNET1\"\n" {
			t.Errorf("MAGIC = %q", got)
		}
		if got := read(t, filepath.Join(dir, "registers/STATE")); got != "1 running\n" {
			t.Errorf("STATE = %q", got)
		}
		feat := read(t, filepath.Join(dir, "registers/FEATURES"))
		if firstField(t, feat) != d.Region().Load64(uapi.RegFeatures) || !strings.Contains(feat, "IPUSH") || !strings.Contains(feat, "PULL") {
			t.Errorf("FEATURES = %q", feat)
		}
		if got := read(t, filepath.Join(dir, "registers/ERROR")); got != "0 none\n" && got != "0x0 none\n" {
			t.Errorf("ERROR = %q", got)
		}
		volatile := map[string]bool{"ALIVE": true, "DEV_SLEEP": true, "INTERRUPTS": true, "DRV_WAIT": true, "DOORBELL": true}
		for _, reg := range uapi.Registers {
			s := read(t, filepath.Join(dir, "registers", reg.Name))
			if !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
				t.Errorf("%s: %q is not one line", reg.Name, s)
			}
			if v := firstField(t, s); !volatile[reg.Name] && v != d.Region().Load64(reg.Off) {
				t.Errorf("%s = %q, region has %#x", reg.Name, s, d.Region().Load64(reg.Off))
			}
		}
		for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
			read(t, filepath.Join(dir, "counters", c.String()))
		}
		for _, n := range uapi.TraceNames {
			if got := read(t, filepath.Join(dir, "trace", n)); got != "0\n" {
				t.Errorf("trace %s = %q before tracing", n, got)
			}
		}
		info := read(t, filepath.Join(dir, "info"))
		g := d.Geometry()
		for _, want := range []string{fmt.Sprintf("node      %d\n", node), fmt.Sprintf("abi       %d\n", uapi.ABIVersion), "state     1 running\n",
			fmt.Sprintf("mtu       %d\n", g.MTU), fmt.Sprintf("linkmem   off %#x size %d\n", g.LinkMemOff, g.LinkMemSize)} {
			if !strings.Contains(info, want) {
				t.Errorf("info lacks %q:\n%s", want, info)
			}
		}
	}

	// Reading at an offset and getattr sizes.
	f, err := os.Open(filepath.Join(m.dir(1), "registers/MAGIC"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 8)
	n, err := f.ReadAt(buf, 20)
	if string(buf[:n]) != "DIMMNET1" {
		t.Errorf("ReadAt(20) = %q, %v", buf[:n], err)
	}
	if n, err := f.ReadAt(buf, 1000); n != 0 || err != io.EOF {
		t.Errorf("ReadAt past end = %d, %v", n, err)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Size() != int64(len("0x3154454e4d4d4944 \"DIMMNET1\"\n")) || fi.Mode().Perm() != 0o444 || st.Nlink != 1 {
		t.Errorf("MAGIC stat: size %d mode %v nlink %d", fi.Size(), fi.Mode(), st.Nlink)
	}
	ents, err := os.ReadDir(m.dir(1) + "/amt")
	if err != nil || len(ents) != int(m.ds[0].Geometry().AMTEntries) {
		t.Errorf("amt/ has %d entries, %v", len(ents), err)
	}
	top, err := os.ReadDir(m.mnt)
	if err != nil || len(top) != 2 || top[0].Name() != "node1" || top[1].Name() != "node2" {
		t.Errorf("mount root: %v %v", top, err)
	}
}

func TestPushShowsInCountersQueuesAndLinkmem(t *testing.T) {
	m := setup(t, false, 1, 2)
	a, b := m.ds[0], m.ds[1]
	data := pattern(3000, 9)
	a.CopyIn(0x100, data)
	if _, err := a.Push(2, 0x100, 0x2000, uint32(len(data)), uapi.FlagSignal, 0x77); err != nil {
		t.Fatal(err)
	}
	// Wait for the receiver's status without consuming it: it must show pending.
	deadline := time.Now().Add(5 * time.Second)
	for b.StatusTail() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no status on the receiver")
		}
		time.Sleep(time.Millisecond)
	}
	sq := read(t, m.dir(2)+"/statq/entries")
	if !strings.Contains(sq, "\n   0 idx 0 pending PUSH src 1/16 msg ") || !strings.Contains(sq, fmt.Sprintf("len %d addr 0x2000", len(data))) {
		t.Errorf("receiver statq before consuming:\n%.400s", sq)
	}
	if !strings.Contains(sq, "\n   1 empty\n") {
		t.Errorf("slot 1 not empty:\n%.400s", sq)
	}
	if s := wait(t, b); s.Type != uapi.StPUSH {
		t.Fatalf("receiver status %v", s)
	}
	if s := wait(t, a); s.Type != uapi.StDone || s.Cookie != 0x77 {
		t.Fatalf("sender status %v", s)
	}
	a.Flush()
	b.Flush()
	if got := read(t, m.dir(2)+"/statq/head"); got != "1\n" {
		t.Errorf("receiver statq/head = %q", got)
	}
	if got := read(t, m.dir(2)+"/statq/tail"); got != "1\n" {
		t.Errorf("receiver statq/tail = %q", got)
	}
	if sq := read(t, m.dir(2)+"/statq/entries"); !strings.Contains(sq, "\n   0 idx 0 done PUSH src 1/16") {
		t.Errorf("receiver statq after consuming:\n%.400s", sq)
	}
	if sq := read(t, m.dir(1)+"/statq/entries"); !strings.Contains(sq, "\n   0 idx 0 done DONE cmd#0 PUSH (cookie 0x77)\n") {
		t.Errorf("sender statq:\n%.400s", sq)
	}

	cq := read(t, m.dir(1)+"/cmdq/entries")
	want := fmt.Sprintf("\n   0 idx 0 done PUSH flags SIGNAL dst 2 proc 0 src 16 len %d local 0x100 remote 0x2000 cookie 0x77 imm 0x0\n", len(data))
	if !strings.Contains(cq, want) || !strings.HasPrefix(cq, "# head 1 tail 1 entries 1024\n") {
		t.Errorf("sender cmdq lacks %q:\n%.400s", want, cq)
	}
	if n := strings.Count(cq, "\n"); n != 1+1024 {
		t.Errorf("cmdq/entries has %d lines", n)
	}
	if got := read(t, m.dir(1)+"/cmdq/head"); got != "1\n" {
		t.Errorf("cmdq/head = %q", got)
	}
	if got := read(t, m.dir(1)+"/cmdq/tail"); got != "1\n" {
		t.Errorf("cmdq/tail = %q", got)
	}

	for _, c := range []struct {
		node uint16
		d    *driver.Driver
		c    uapi.Counter
	}{{1, a, uapi.CtrCmds}, {1, a, uapi.CtrTxPkts}, {1, a, uapi.CtrTxBytes}, {2, b, uapi.CtrRxPush}, {2, b, uapi.CtrRxBytes}} {
		got := read(t, filepath.Join(m.dir(c.node), "counters", c.c.String()))
		if want := fmt.Sprintf("%d\n", c.d.Counter(c.c)); got != want || got == "0\n" {
			t.Errorf("node%d counters/%s = %q, driver says %q", c.node, c.c, got, want)
		}
	}
	if got := read(t, m.dir(2)+"/counters/RX_BYTES"); got != fmt.Sprintf("%d\n", len(data)) {
		t.Errorf("RX_BYTES = %q", got)
	}

	// Link memory: what the PUSH placed, read at an offset.
	f, err := os.Open(m.dir(2) + "/linkmem")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := make([]byte, len(data))
	if n, err := f.ReadAt(got, 0x2000); n != len(data) || err != nil || !bytes.Equal(got, data) {
		t.Errorf("linkmem ReadAt(0x2000) = %d, %v, equal %v", n, err, bytes.Equal(got, data))
	}
}

func TestAMTAndAMTAT(t *testing.T) {
	m := setup(t, false, 1, 2)
	a, b := m.ds[0], m.ds[1]
	a.SetProc(2)
	ring, err := b.SetRing(3, 0x10000, 1<<16, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.MapSender(a.GPID(), 3); err != nil {
		t.Fatal(err)
	}
	if got := read(t, m.dir(2)+"/amtat"); got != "gpid 18 (node 1 proc 2) -> amt 3\n" {
		t.Errorf("amtat = %q", got)
	}
	if got := read(t, m.dir(1)+"/amtat"); got != "" {
		t.Errorf("node1 amtat = %q", got)
	}
	if got := read(t, m.dir(2)+"/registers/AMTAT_DONE"); !strings.HasSuffix(got, " seq 1 result ok\n") {
		t.Errorf("AMTAT_DONE = %q", got)
	}
	if got := read(t, m.dir(2)+"/registers/AMTAT_SEL"); got != "18 gpid 18 (node 1 proc 2)\n" {
		t.Errorf("AMTAT_SEL = %q", got)
	}
	a.CopyIn(0, pattern(100, 1))
	if _, err := a.IPush(2, uapi.GPID(2, 0), 0, 100, 0, 0, 5); err != nil {
		t.Fatal(err)
	}
	wait(t, b)
	want := fmt.Sprintf("base  0x10000\nsize  65536\nflags VALID\nhead  0\ntail  %d\nused  %d\n", ring.Tail(), ring.Tail())
	if got := read(t, m.dir(2)+"/amt/3"); got != want || ring.Tail() == 0 {
		t.Errorf("amt/3 = %q, want %q", got, want)
	}
	if got := read(t, m.dir(2)+"/amt/0"); got != "base  0x0\nsize  0\nflags none\nhead  0\ntail  0\nused  0\n" {
		t.Errorf("amt/0 = %q", got)
	}
}

func TestWritableRegistersAndLinkmem(t *testing.T) {
	m := setup(t, true, 1)
	d := m.ds[0]
	regs := m.dir(1) + "/registers/"
	if err := os.WriteFile(regs+"TRACE_CTRL", []byte("1\n"), 0); err != nil {
		t.Fatalf("write TRACE_CTRL: %v", err)
	}
	if v := d.Region().Load64(uapi.RegTraceCtrl); v != 1 {
		t.Errorf("TRACE_CTRL = %d after writing 1", v)
	}
	if got := read(t, regs+"TRACE_CTRL"); got != "1 on\n" {
		t.Errorf("TRACE_CTRL reads %q", got)
	}
	if err := os.WriteFile(regs+"TRACE_CTRL", []byte("0x0"), 0); err != nil || d.Region().Load64(uapi.RegTraceCtrl) != 0 {
		t.Errorf("write 0x0: %v, TRACE_CTRL %d", err, d.Region().Load64(uapi.RegTraceCtrl))
	}
	if err := os.WriteFile(regs+"WIN_SIZE", []byte("0X1000\n"), 0); err != nil || d.Region().Load64(uapi.RegWinSize) != 0x1000 {
		t.Errorf("write 0X1000: %v, WIN_SIZE %#x", err, d.Region().Load64(uapi.RegWinSize))
	}
	for _, bad := range []string{"abc\n", "", "\n", "1 2\n", "-1\n", "0x\n", "18446744073709551616\n", "1_0\n", "0b1\n"} {
		err := os.WriteFile(regs+"TRACE_CTRL", []byte(bad), 0)
		if !errors.Is(err, syscall.EINVAL) && !(bad == "" && err == nil) {
			t.Errorf("write %q: %v, want EINVAL", bad, err)
		}
	}
	for _, ro := range []string{"NODE_ID", "MAGIC", "CMDQ_HEAD", "ERROR"} {
		if err := os.WriteFile(regs+ro, []byte("1\n"), 0); !errors.Is(err, syscall.EACCES) {
			t.Errorf("write RO %s: %v, want EACCES", ro, err)
		}
	}
	for _, ro := range []string{"counters/CMDS", "trace/TRACE_TX", "cmdq/head", "statq/entries", "amt/0", "amtat", "info", "violations"} {
		if err := os.WriteFile(filepath.Join(m.dir(1), ro), []byte("1\n"), 0); !errors.Is(err, syscall.EACCES) {
			t.Errorf("write %s: %v, want EACCES", ro, err)
		}
	}
	for name, want := range map[string]os.FileMode{"TRACE_CTRL": 0o644, "NODE_ID": 0o444} {
		if fi, err := os.Stat(regs + name); err != nil || fi.Mode() != want {
			t.Errorf("stat %s: %v %v, want %v", name, fi.Mode(), err, want)
		}
	}
	if err := os.Chmod(regs+"TRACE_CTRL", 0o600); !errors.Is(err, syscall.EPERM) {
		t.Errorf("chmod: %v, want EPERM", err)
	}

	// Link memory at an offset, and its end.
	f, err := os.OpenFile(m.dir(1)+"/linkmem", os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := pattern(5000, 42)
	if n, err := f.WriteAt(data, 123456); n != len(data) || err != nil {
		t.Fatalf("WriteAt: %d, %v", n, err)
	}
	if !bytes.Equal(d.LinkMem()[123456:123456+len(data)], data) {
		t.Error("linkmem write did not land in link memory")
	}
	size := int64(d.Geometry().LinkMemSize)
	if fi, err := f.Stat(); err != nil || fi.Size() != size || fi.Mode() != 0o644 {
		t.Errorf("linkmem stat: %v %v", fi, err)
	}
	if _, err := f.WriteAt([]byte{1}, size); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("write at end: %v, want ENOSPC", err)
	}
	// A write crossing the end is short (os.File.WriteAt would retry the rest and drop the count).
	if n, err := syscall.Pwrite(int(f.Fd()), []byte{7, 8, 9, 10}, size-2); n != 2 || err != nil || d.LinkMem()[size-1] != 8 {
		t.Errorf("write across end: %d, %v", n, err)
	}
	if n, err := f.ReadAt(make([]byte, 4), size); n != 0 || err != io.EOF {
		t.Errorf("read at end: %d, %v", n, err)
	}
}

func TestReadOnlyMountRefusesWrites(t *testing.T) {
	m := setup(t, false, 1)
	for _, p := range []string{"registers/TRACE_CTRL", "registers/NODE_ID", "linkmem", "counters/CMDS"} {
		if err := os.WriteFile(filepath.Join(m.dir(1), p), []byte("1\n"), 0); !errors.Is(err, syscall.EACCES) {
			t.Errorf("write %s: %v, want EACCES", p, err)
		}
		if f, err := os.OpenFile(filepath.Join(m.dir(1), p), os.O_RDWR, 0); !errors.Is(err, syscall.EACCES) {
			t.Errorf("open %s O_RDWR: %v, want EACCES", p, err)
			if f != nil {
				f.Close()
			}
		}
	}
	if v := m.ds[0].Region().Load64(uapi.RegTraceCtrl); v != 0 {
		t.Errorf("TRACE_CTRL = %d on a read-only mount", v)
	}
	if fi, err := os.Stat(m.dir(1) + "/registers/TRACE_CTRL"); err != nil || fi.Mode() != 0o444 {
		t.Errorf("TRACE_CTRL mode %v, %v", fi.Mode(), err)
	}
}

func TestShellTools(t *testing.T) {
	m := setup(t, true, 1)
	d := m.ds[0]
	run := func(name string, args ...string) (string, error) {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		return string(out), err
	}
	dir := m.dir(1)

	out, err := run("ls", "-l", dir+"/registers")
	if err != nil {
		t.Fatalf("ls -l: %v\n%s", err, out)
	}
	for _, want := range []string{"-rw-r--r-- 1 ", " TRACE_CTRL\n", "-r--r--r-- 1 ", " NODE_ID\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls -l lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != len(uapi.Registers)+1 { // "total" line
		t.Errorf("ls -l lists %d lines for %d registers", n, len(uapi.Registers))
	}

	if out, err := run("cat", dir+"/registers/NODE_ID", dir+"/registers/STATE"); err != nil || out != "1\n1 running\n" {
		t.Errorf("cat: %q, %v", out, err)
	}
	if out, err := run("sh", "-c", "echo 1 > "+dir+"/registers/TRACE_CTRL"); err != nil {
		t.Errorf("echo 1 > TRACE_CTRL: %v %s", err, out)
	}
	if v := d.Region().Load64(uapi.RegTraceCtrl); v != 1 {
		t.Errorf("TRACE_CTRL = %d after the shell wrote 1", v)
	}
	if out, err := run("sh", "-c", "echo 1 > "+dir+"/registers/NODE_ID"); err == nil || !strings.Contains(out, "ermission denied") {
		t.Errorf("echo > NODE_ID: %v %q, want failure", err, out)
	}
	if out, err := run("sh", "-c", "echo bogus > "+dir+"/registers/TRACE_CTRL"); err == nil { // dash reports any write error as "I/O error"
		t.Errorf("echo bogus: %v %q, want failure", err, out)
	}

	d.CopyIn(4096, []byte("hello, dimmnet!!"))
	out, err = run("hexdump", "-C", "-s", "4096", "-n", "16", dir+"/linkmem")
	if err != nil || !strings.HasPrefix(out, "00001000  68 65 6c 6c 6f 2c 20 64  69 6d 6d 6e 65 74 21 21  |hello, dimmnet!!|\n") {
		t.Errorf("hexdump: %v\n%s", err, out)
	}
	out, err = run("od", "-A", "x", "-t", "x1", "-j", "4096", "-N", "4", dir+"/linkmem")
	if err != nil || !strings.HasPrefix(out, "001000 68 65 6c 6c\n") {
		t.Errorf("od: %v\n%s", err, out)
	}
	out, err = run("sh", "-c", "printf 'XYZ' | dd of="+dir+"/linkmem bs=1 seek=8192 conv=notrunc status=none")
	if err != nil || string(d.LinkMem()[8192:8195]) != "XYZ" {
		t.Errorf("dd write: %v %s, linkmem %q", err, out, d.LinkMem()[8192:8195])
	}
	out, err = run("sh", "-c", "printf 'ABC' | dd of="+dir+"/linkmem bs=1 seek=8192 status=none")
	if err != nil || string(d.LinkMem()[8192:8195]) != "ABC" {
		t.Errorf("dd write with truncate: %v %s, linkmem %q", err, out, d.LinkMem()[8192:8195])
	}
	out, err = run("cat", dir+"/info")
	if err != nil || !strings.HasPrefix(out, "node      1\n") {
		t.Errorf("cat info: %v\n%s", err, out)
	}
}

func TestMountRejects(t *testing.T) {
	dir := t.TempDir()
	bad := make([]byte, 1<<20) // right size, no magic
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	good := l.Devices[0].Region()
	for _, c := range []struct {
		name string
		devs []Device
		want string
	}{
		{"none", nil, "no devices"},
		{"bad magic", []Device{{"n", bad}}, "magic"},
		{"short", []Device{{"n", good[:4096]}}, "power of two"},
		{"name", []Device{{"a/b", good}}, "bad device name"},
		{"dot", []Device{{"..", good}}, "bad device name"},
		{"twice", []Device{{"n", good}, {"n", good}}, "given twice"},
	} {
		srv, err := Mount(dir, c.devs, Options{})
		if err == nil {
			srv.Unmount()
			t.Errorf("%s: mounted", c.name)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestDirectories(t *testing.T) {
	m := setup(t, false, 1)
	for _, c := range []struct {
		path  string
		nlink uint64
	}{{m.mnt, 3}, {m.dir(1), 8}, {m.dir(1) + "/registers", 2}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || fi.Mode().Perm() != 0o555 || st.Nlink != c.nlink || fi.ModTime().Unix() == 0 {
			t.Errorf("%s: mode %v nlink %d mtime %v", c.path, fi.Mode(), st.Nlink, fi.ModTime())
		}
	}
	ents, err := os.ReadDir(m.dir(1))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "amt amtat cmdq counters info linkmem registers statq trace violations" {
		t.Errorf("node1/ = %s", got)
	}
	if err := os.Mkdir(m.dir(1)+"/x", 0o755); err == nil {
		t.Error("mkdir succeeded")
	}
	if _, err := os.Stat(m.dir(1) + "/registers/NOPE"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat of a missing register: %v", err)
	}
}
