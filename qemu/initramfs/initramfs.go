// Package initramfs builds the guest lab's root file system: a gzip'd newc
// cpio archive the kernel unpacks before running /init.
//
// The guests have no disk, so everything they run lives here, and the
// kernel runs /init before anything has mounted /dev, /proc or /sys: the
// archive therefore carries dev/console and the mount points itself, and
// /init and the busybox must be static executables (a dynamic /init would
// die for want of its loader, with nothing but "No working init found" to
// show for it). Write checks that before producing an archive that could
// not boot. A dynamically linked program the init starts later (the lab's
// fi_pingpong, and the libfabric provider it loads) goes in Files with its
// shared-library closure, loader included, which Closure lists.
package initramfs

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/u-root/mkuimage/cpio"
)

// ErrNotStatic is returned (wrapped, naming the file) when the init or the
// busybox is not a static ELF executable, which the guest could not run.
var ErrNotStatic = errors.New("not a static ELF executable")

// ErrLibNotFound is returned (wrapped, naming the library and who needs
// it) by Closure when the host's dynamic loader cannot find a library.
var ErrLibNotFound = errors.New("shared library not found")

// Spec says what goes into an archive.
type Spec struct {
	// Init is the host path of a static executable that becomes /init, the
	// one program the kernel starts.
	Init string
	// Files maps archive paths ("bin/dimmnet") to host paths of regular
	// files, copied with their permission bits; parent directories are
	// added.
	Files map[string]string
	// Busybox is the host path of a static busybox, "" for none. It becomes
	// bin/busybox with a symlink in bin/ for bin/sh and each applet that
	// `busybox --list` prints, so a guest has a shell for debugging.
	Busybox string
}

// dirs are always in the archive: the kernel unpacks to an empty rootfs and
// /init finds its mount points and console here or nowhere.
var dirs = []string{"dev", "proc", "sys", "tmp", "etc"}

// Write writes s as a gzip'd newc cpio archive to w. The archive is
// reproducible: the same inputs give the same bytes (no times, owners or
// inode numbers from the host).
func Write(w io.Writer, s Spec) error {
	recs, err := records(s)
	if err != nil {
		return err
	}
	cpio.MakeAllReproducible(recs)
	zw := gzip.NewWriter(w)
	rw := cpio.NewDedupWriter(cpio.Newc.Writer(zw))
	if err := cpio.WriteRecords(rw, recs); err != nil {
		return fmt.Errorf("initramfs: writing archive: %w", err)
	}
	if err := cpio.WriteTrailer(rw); err != nil {
		return fmt.Errorf("initramfs: writing archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("initramfs: writing archive: %w", err)
	}
	return nil
}

// Build writes s to the file path through a temporary file renamed into
// place, so a VM never boots a half-written archive and a failed build
// leaves the previous one.
func Build(dst string, s Spec) (err error) {
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return fmt.Errorf("initramfs: build: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := Write(bw, s); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("initramfs: build %s: %w", dst, err)
	}
	if err := f.Chmod(0o644); err != nil {
		return fmt.Errorf("initramfs: build %s: %w", dst, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("initramfs: build %s: %w", dst, err)
	}
	if err := os.Rename(f.Name(), dst); err != nil {
		return fmt.Errorf("initramfs: build %s: %w", dst, err)
	}
	return nil
}

// records lists the archive's records, every directory before what it
// holds (the kernel does not create parents), in a fixed order.
func records(s Spec) ([]cpio.Record, error) {
	if s.Init == "" {
		return nil, errors.New("initramfs: Spec.Init is empty: the guest needs an /init")
	}
	files := map[string]cpio.Record{} // archive path -> record, not directories
	init, err := readStatic(s.Init)
	if err != nil {
		return nil, err
	}
	files["init"] = cpio.StaticRecord(init, cpio.Info{Name: "init", Mode: cpio.S_IFREG | 0o755})
	files["dev/console"] = cpio.CharDev("dev/console", 0o600, 5, 1)

	for name, host := range s.Files {
		name = path.Clean(strings.TrimPrefix(name, "/"))
		if name == "." || name == ".." || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("initramfs: archive path %q is not inside the archive", name)
		}
		if _, dup := files[name]; dup || slices.Contains(dirs, name) {
			return nil, fmt.Errorf("initramfs: archive path %q (from %s) is already in the archive", name, host)
		}
		fi, err := os.Stat(host)
		if err != nil {
			return nil, fmt.Errorf("initramfs: file for %s: %w", name, err)
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("initramfs: file for %s: %s is not a regular file", name, host)
		}
		b, err := os.ReadFile(host)
		if err != nil {
			return nil, fmt.Errorf("initramfs: file for %s: %w", name, err)
		}
		files[name] = cpio.StaticRecord(b, cpio.Info{Name: name, Mode: cpio.S_IFREG | uint64(fi.Mode().Perm())})
	}

	if s.Busybox != "" {
		bb, err := readStatic(s.Busybox)
		if err != nil {
			return nil, err
		}
		if _, dup := files["bin/busybox"]; dup {
			return nil, errors.New("initramfs: bin/busybox is both in Files and Spec.Busybox")
		}
		files["bin/busybox"] = cpio.StaticRecord(bb, cpio.Info{Name: "bin/busybox", Mode: cpio.S_IFREG | 0o755})
		applets, err := busyboxApplets(s.Busybox)
		if err != nil {
			return nil, err
		}
		for _, a := range append(applets, "sh") {
			name := "bin/" + a
			if _, taken := files[name]; !taken {
				files[name] = cpio.Symlink(name, "busybox")
			}
		}
	}

	dirSet := map[string]bool{}
	for _, d := range dirs {
		dirSet[d] = true
	}
	for name := range files {
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, isFile := files[d]; isFile {
				return nil, fmt.Errorf("initramfs: %s needs directory %s, which is a file in the archive", name, d)
			}
			dirSet[d] = true
		}
	}
	// Sorted paths put every directory before its contents ("bin" <
	// "bin/sh") and make the archive reproducible.
	var recs []cpio.Record
	for _, d := range slices.Sorted(maps.Keys(dirSet)) {
		mode := uint64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		recs = append(recs, cpio.Directory(d, mode))
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		recs = append(recs, files[name])
	}
	return recs, nil
}

// readStatic returns the contents of the static ELF executable at p.
func readStatic(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("initramfs: %w", err)
	}
	if err := checkStatic(p, b); err != nil {
		return nil, fmt.Errorf("initramfs: %w", err)
	}
	return b, nil
}

// IsStatic reports whether the file at p is a static ELF executable, one
// that can be /init with nothing else in the archive.
func IsStatic(p string) bool {
	_, err := readStatic(p)
	return err == nil
}

func checkStatic(p string, b []byte) error {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w (%v)", p, ErrNotStatic, err)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s: %w (ELF type %v)", p, ErrNotStatic, f.Type)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: %w (dynamically linked: it needs a program interpreter; build Go with CGO_ENABLED=0, see GoBuildStatic)", p, ErrNotStatic)
		}
	}
	return nil
}

// busyboxApplets asks the busybox itself which applets it has, since
// builds differ.
func busyboxApplets(bb string) ([]string, error) {
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("initramfs: %s --list: %w", bb, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" && !strings.Contains(a, "/") && a != "." && a != ".." {
			applets = append(applets, a)
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("initramfs: %s --list printed no applets", bb)
	}
	return applets, nil
}

// FindBusybox returns the host's static busybox — /bin/busybox,
// /usr/bin/busybox or busybox in PATH, the first that is static (Debian's
// busybox-static package) — or "" if there is none, since a dynamic one
// would not run in the guest.
func FindBusybox() string {
	cands := []string{"/bin/busybox", "/usr/bin/busybox"}
	if p, err := exec.LookPath("busybox"); err == nil {
		cands = append(cands, p)
	}
	for _, c := range cands {
		b, err := os.ReadFile(c)
		if err == nil && checkStatic(c, b) == nil {
			return c
		}
	}
	return ""
}

// GoBuildStatic builds the Go main package in pkgDir into out as a static
// Linux executable (CGO_ENABLED=0, -trimpath), the only kind the guest can
// run. The package is built in its own directory, so its own go.mod, if
// any, applies.
func GoBuildStatic(pkgDir, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("initramfs: go build %s: %w", pkgDir, err)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("initramfs: go build %s: %w", pkgDir, err)
	}
	cmd := exec.Command(goTool, "build", "-trimpath", "-o", abs, ".")
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initramfs: go build %s: %w\n%s", pkgDir, err, bytes.TrimSpace(b))
	}
	return nil
}

// Closure returns the shared libraries the dynamically linked ELF files
// bins need, their own dependencies and the dynamic loader included, as
// Spec.Files entries: each at the archive path of the host path the host's
// loader resolves it to (ldd), so a guest loader with no ld.so.cache finds
// it in the same system directory. Static files add nothing. A library
// loaded at run time with dlopen (a libfabric provider) is not in its
// host's closure: pass it in bins too.
func Closure(bins ...string) (map[string]string, error) {
	files := map[string]string{}
	for _, b := range bins {
		if IsStatic(b) {
			continue
		}
		out, err := exec.Command("ldd", b).Output()
		if err != nil {
			return nil, fmt.Errorf("initramfs: ldd %s: %w", b, err)
		}
		for _, l := range strings.Split(string(out), "\n") {
			l = strings.TrimSpace(l)
			name, target, arrow := strings.Cut(l, "=>")
			if !arrow {
				target = name // the loader: "/lib64/ld-linux-x86-64.so.2 (0x...)"
			}
			f := strings.Fields(target)
			if len(f) > 0 && f[0] == "not" {
				return nil, fmt.Errorf("initramfs: %s needs %s: %w", b, strings.TrimSpace(name), ErrLibNotFound)
			}
			if len(f) == 0 || !strings.HasPrefix(f[0], "/") {
				continue // linux-vdso.so.1, which the kernel provides
			}
			files[strings.TrimPrefix(path.Clean(f[0]), "/")] = f[0]
		}
	}
	return files, nil
}
