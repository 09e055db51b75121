package initramfs

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/u-root/mkuimage/cpio"

	"github.com/dimmnet/dimmnet/qemu/kernel"
)

const marker = "DIMMNET-INITRAMFS-OK"

// tinyInit mounts /proc and /dev, prints the marker with the guest's uptime, runs
// the busybox shell if there is one, and powers the guest off.
const tinyInit = `package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

func main() {
	uptime := "?"
	if err := syscall.Mount("proc", "/proc", "proc", 0, ""); err != nil {
		fmt.Println("mount /proc:", err)
	} else if b, err := os.ReadFile("/proc/uptime"); err == nil {
		uptime = strings.Fields(string(b))[0]
	}
	fmt.Printf("` + marker + ` uptime=%ss\n", uptime)
	// os/exec opens /dev/null, which only devtmpfs provides.
	if err := syscall.Mount("devtmpfs", "/dev", "devtmpfs", 0, ""); err != nil {
		fmt.Println("mount /dev:", err)
	}
	if _, err := os.Stat("/bin/sh"); err == nil {
		out, err := exec.Command("/bin/sh", "-c", "echo BUSYBOX-$((40+2))").CombinedOutput()
		fmt.Printf("%s(err %v)\n", out, err)
	}
	syscall.Sync()
	if err := syscall.Reboot(syscall.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Println("power off:", err)
	}
	select {}
}
`

var (
	buildOnce sync.Once
	buildDir  string
	initBin   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// tinyProgram builds tinyInit once per test binary.
func tinyProgram(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dimmnet-tinyinit-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		src := filepath.Join(dir, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			buildErr = err
			return
		}
		os.WriteFile(filepath.Join(src, "go.mod"), []byte("module tinyinit\n\ngo 1.22\n"), 0o644)
		os.WriteFile(filepath.Join(src, "main.go"), []byte(tinyInit), 0o644)
		initBin = filepath.Join(dir, "init")
		buildErr = GoBuildStatic(src, initBin)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return initBin
}

// readArchive gunzips and parses an archive with the cpio library's reader.
func readArchive(t *testing.T, gz []byte) *cpio.Archive {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cpio.ArchiveFromReader(cpio.EOFReader{RecordReader: cpio.Newc.Reader(bytes.NewReader(raw))})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func content(t *testing.T, r cpio.Record) []byte {
	t.Helper()
	b, err := io.ReadAll(io.NewSectionReader(r, 0, int64(r.FileSize)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWrite(t *testing.T) {
	initPath := tinyProgram(t)
	extra := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(extra, []byte("127.0.0.1 localhost\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	spec := Spec{Init: initPath, Files: map[string]string{"/etc/hosts": extra, "usr/share/x/tiny": initPath}}
	if err := Write(&buf, spec); err != nil {
		t.Fatal(err)
	}
	a := readArchive(t, buf.Bytes())

	want, _ := os.ReadFile(initPath)
	r, ok := a.Get("init")
	if !ok {
		t.Fatalf("no init in\n%v", a)
	}
	if r.Mode != cpio.S_IFREG|0o755 || !bytes.Equal(content(t, r), want) {
		t.Errorf("init: mode %o, %d bytes; want %o and the program's %d bytes", r.Mode, r.FileSize, cpio.S_IFREG|0o755, len(want))
	}
	r, ok = a.Get("dev/console")
	if !ok || r.Mode&cpio.S_IFMT != cpio.S_IFCHR || r.Rmajor != 5 || r.Rminor != 1 {
		t.Errorf("dev/console: %v (present %v), want char device 5,1", r.Info, ok)
	}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "etc", "usr", "usr/share", "usr/share/x"} {
		if r, ok := a.Get(d); !ok || r.Mode&cpio.S_IFMT != cpio.S_IFDIR {
			t.Errorf("directory %s: %v (present %v)", d, r.Info, ok)
		}
	}
	if r, ok := a.Get("etc/hosts"); !ok || r.Mode != cpio.S_IFREG|0o640 || string(content(t, r)) != "127.0.0.1 localhost\n" {
		t.Errorf("etc/hosts: %v (present %v)", r.Info, ok)
	}
	// Every parent comes before its child: the kernel creates no parents.
	seen := map[string]bool{}
	for _, name := range a.Order {
		if d := filepath.Dir(name); d != "." && !seen[d] {
			t.Errorf("%s comes before its directory %s", name, d)
		}
		seen[name] = true
	}
	if _, ok := a.Get("bin/sh"); ok {
		t.Error("bin/sh present without a busybox")
	}

	// Reproducible: the same spec gives the same bytes.
	var again bytes.Buffer
	if err := Write(&again, spec); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("two Writes of the same spec differ")
	}
}

func TestWriteBusybox(t *testing.T) {
	bb := FindBusybox()
	if bb == "" {
		t.Skip("no static busybox on this host (Debian: apt-get install busybox-static)")
	}
	var buf bytes.Buffer
	if err := Write(&buf, Spec{Init: tinyProgram(t), Busybox: bb}); err != nil {
		t.Fatal(err)
	}
	a := readArchive(t, buf.Bytes())
	want, _ := os.ReadFile(bb)
	if r, ok := a.Get("bin/busybox"); !ok || r.Mode != cpio.S_IFREG|0o755 || !bytes.Equal(content(t, r), want) {
		t.Fatalf("bin/busybox: %v (present %v)", r.Info, ok)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	applets := append(strings.Fields(string(out)), "sh")
	for _, app := range applets {
		if app == "busybox" {
			continue
		}
		r, ok := a.Get("bin/" + app)
		if !ok || r.Mode&cpio.S_IFMT != cpio.S_IFLNK || string(content(t, r)) != "busybox" {
			t.Errorf("bin/%s: %v (present %v), want a symlink to busybox", app, r.Info, ok)
		}
	}
	t.Logf("%s: %d applets", bb, len(applets))
}

func TestRefusesDynamic(t *testing.T) {
	dyn := "/bin/ls"
	if _, err := os.Stat(dyn); err != nil {
		t.Skip("no /bin/ls")
	}
	if err := checkStatic(dyn, mustRead(t, dyn)); err == nil {
		t.Skip("/bin/ls is static here")
	}
	for name, spec := range map[string]Spec{
		"init":    {Init: dyn},
		"busybox": {Init: tinyProgram(t), Busybox: dyn},
	} {
		err := Write(io.Discard, spec)
		if !errors.Is(err, ErrNotStatic) || !strings.Contains(err.Error(), dyn) {
			t.Errorf("%s %s: got %v, want ErrNotStatic naming it", name, dyn, err)
		}
	}
	notELF := filepath.Join(t.TempDir(), "script")
	os.WriteFile(notELF, []byte("#!/bin/sh\necho hi\n"), 0o755)
	if err := Write(io.Discard, Spec{Init: notELF}); !errors.Is(err, ErrNotStatic) {
		t.Errorf("script as init: got %v, want ErrNotStatic", err)
	}
}

func TestWriteErrors(t *testing.T) {
	init := tinyProgram(t)
	for name, spec := range map[string]Spec{
		"no init":       {},
		"missing init":  {Init: filepath.Join(t.TempDir(), "nope")},
		"outside":       {Init: init, Files: map[string]string{"../x": init}},
		"init twice":    {Init: init, Files: map[string]string{"/init": init}},
		"over dir":      {Init: init, Files: map[string]string{"proc": init}},
		"file as dir":   {Init: init, Files: map[string]string{"a": init, "a/b": init}},
		"missing file":  {Init: init, Files: map[string]string{"bin/x": filepath.Join(t.TempDir(), "nope")}},
		"dir as a file": {Init: init, Files: map[string]string{"bin/x": t.TempDir()}},
	} {
		if err := Write(io.Discard, spec); err == nil {
			t.Errorf("%s: Write succeeded", name)
		}
	}
}

func TestBuildAtomic(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "initrd.gz")
	if err := Build(dst, Spec{Init: tinyProgram(t)}); err != nil {
		t.Fatal(err)
	}
	first := mustRead(t, dst)
	readArchive(t, first)
	script := filepath.Join(t.TempDir(), "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	if err := Build(dst, Spec{Init: script}); err == nil {
		t.Fatal("Build with a script as init succeeded")
	}
	if !bytes.Equal(mustRead(t, dst), first) {
		t.Error("a failed Build changed the previous archive")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("Build left %d files, want only the archive", len(ents))
	}
}

func TestGoBuildStaticError(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module broken\n"), 0o644)
	os.WriteFile(filepath.Join(src, "main.go"), []byte("package main\nfunc main() { undefinedThing() }\n"), 0o644)
	err := GoBuildStatic(src, filepath.Join(src, "out"))
	if err == nil || !strings.Contains(err.Error(), "undefinedThing") {
		t.Fatalf("GoBuildStatic of a broken package: got %v, want the compiler's output", err)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBoot boots the archive under QEMU (TCG) with Debian's cloud kernel,
// fetched into the user's cache on first use.
func TestBoot(t *testing.T) {
	if os.Getenv("DIMMNET_VM_TESTS") != "1" {
		t.Skip("boots a QEMU VM (and may download a kernel); set DIMMNET_VM_TESTS=1 to run")
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("no qemu-system-x86_64")
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernel.Fetch(filepath.Join(cache, "dimmnet", "kernel"), func(s string) { t.Log(s) })
	if err != nil {
		t.Skipf("no kernel: %v", err)
	}
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(t.TempDir(), "initrd.gz")
	bb := FindBusybox()
	if err := Build(initrd, Spec{Init: tinyProgram(t), Busybox: bb}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu,
		"-machine", "q35,accel=tcg", "-cpu", "max", "-m", "128",
		"-nographic", "-no-reboot",
		"-kernel", k.Path, "-initrd", initrd,
		"-append", "console=ttyS0 quiet panic=-1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	t.Logf("kernel %s, qemu exited after %v (err %v); console:\n%s", k.Version, took.Round(time.Millisecond), err, out)
	if ctx.Err() != nil {
		t.Fatalf("guest did not power off within 60 s; stderr: %s", stderr.Bytes())
	}
	if err != nil {
		t.Fatalf("qemu: %v; stderr: %s", err, stderr.Bytes())
	}
	if !bytes.Contains(out, []byte(marker)) {
		t.Fatalf("no %s on the console", marker)
	}
	if bb != "" && !bytes.Contains(out, []byte("BUSYBOX-42")) {
		t.Errorf("busybox shell did not run in the guest")
	}
}

// A dynamic program's closure has libc and the loader at the host's paths,
// and a static one adds nothing.
func TestClosure(t *testing.T) {
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("no ldd (Debian: libc-bin)")
	}
	sh, err := exec.LookPath("sh")
	if err != nil || IsStatic(sh) {
		t.Skip("no dynamically linked sh to take the closure of")
	}
	files, err := Closure(sh)
	if err != nil {
		t.Fatal(err)
	}
	var libc, loader bool
	for a, h := range files {
		if strings.HasPrefix(a, "/") || "/"+a != h {
			t.Fatalf("archive path %q for host %q: want the host path without its leading slash", a, h)
		}
		libc = libc || strings.HasSuffix(a, "/libc.so.6")
		loader = loader || strings.Contains(a, "ld-linux")
	}
	if !libc || !loader {
		t.Fatalf("closure of %s lacks libc or the loader: %v", sh, files)
	}
	// The archive takes them, each with its host file's bytes.
	var buf bytes.Buffer
	if err := Write(&buf, Spec{Init: tinyProgram(t), Files: files}); err != nil {
		t.Fatal(err)
	}
	arch := readArchive(t, buf.Bytes())
	for a := range files {
		if _, ok := arch.Files[a]; !ok {
			t.Fatalf("archive lacks %s", a)
		}
	}
	if bb := FindBusybox(); bb != "" {
		if files, err := Closure(bb); err != nil || len(files) != 0 {
			t.Fatalf("static busybox closure %v %v, want none", files, err)
		}
	}
}
