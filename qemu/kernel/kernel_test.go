package kernel

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeConfig(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func goodConfig() []string {
	lines := []string{"#", "# Automatically generated file; DO NOT EDIT.", "#", `CONFIG_LOCALVERSION=""`}
	for _, o := range Required {
		lines = append(lines, o+"=y")
	}
	return append(lines, "# CONFIG_PCI_MSI is not set", "CONFIG_E1000=m")
}

func TestCheckPasses(t *testing.T) {
	cfg := writeConfig(t, t.TempDir(), "config-6.1.0-test", goodConfig()...)
	if err := (Kernel{Path: "x", Config: cfg}).Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

func TestCheckNamesMissing(t *testing.T) {
	var lines []string
	for _, l := range goodConfig() {
		switch l {
		case "CONFIG_RD_GZIP=y":
			lines = append(lines, "# CONFIG_RD_GZIP is not set")
		case "CONFIG_SERIAL_8250=y":
			lines = append(lines, "CONFIG_SERIAL_8250=m")
		case "CONFIG_DEVTMPFS=y":
			// absent altogether
		default:
			lines = append(lines, l)
		}
	}
	cfg := writeConfig(t, t.TempDir(), "config-6.1.0-test", lines...)
	err := (Kernel{Path: "x", Config: cfg}).Check()
	if !errors.Is(err, ErrMissing) {
		t.Fatalf("Check: got %v, want ErrMissing", err)
	}
	for _, want := range []string{"CONFIG_RD_GZIP", "CONFIG_SERIAL_8250=m", "CONFIG_DEVTMPFS"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	for _, ok := range []string{"CONFIG_PCI ", "CONFIG_SERIAL_8250_CONSOLE", "CONFIG_BINFMT_ELF"} {
		if strings.Contains(err.Error(), ok) {
			t.Errorf("error %q names %s, which is set", err, ok)
		}
	}
}

func TestCheckWithoutConfig(t *testing.T) {
	if err := (Kernel{Path: "x"}).Check(); err != nil {
		t.Fatalf("Check without config: %v", err)
	}
}

func TestCheckUnreadableConfig(t *testing.T) {
	err := (Kernel{Path: "x", Config: filepath.Join(t.TempDir(), "nope")}).Check()
	if err == nil || errors.Is(err, ErrMissing) {
		t.Fatalf("Check with absent config: got %v, want a read error", err)
	}
}

func TestFromFileFindsConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		imageDir  string // relative to the root
		configDir string // "" for none
	}{
		{"same dir", "boot", "boot"},
		{"../boot", "vmlinuz-dir", "boot"},
		{"none", "boot", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			img := writeConfig(t, filepath.Join(root, tc.imageDir), "vmlinuz-6.1.0-9-test", "not a kernel")
			var cfg string
			if tc.configDir != "" {
				cfg = writeConfig(t, filepath.Join(root, tc.configDir), "config-6.1.0-9-test", goodConfig()...)
			}
			// A config of another version must not be taken.
			writeConfig(t, filepath.Join(root, "boot"), "config-6.1.0-8-test", "CONFIG_PCI=y")
			k, err := FromFile(img)
			if err != nil {
				t.Fatal(err)
			}
			if k.Path != img || k.Config != cfg || k.Version != "6.1.0-9-test" {
				t.Fatalf("FromFile = %+v, want config %q version 6.1.0-9-test", k, cfg)
			}
		})
	}
}

func TestFromFileErrors(t *testing.T) {
	if _, err := FromFile(filepath.Join(t.TempDir(), "vmlinuz-none")); err == nil {
		t.Error("FromFile of a missing file succeeded")
	}
	if _, err := FromFile(t.TempDir()); err == nil {
		t.Error("FromFile of a directory succeeded")
	}
}

func TestCachedPrefersNewest(t *testing.T) {
	cache := t.TempDir()
	for _, abi := range []string{"9", "10"} {
		v := "6.1.0-" + abi + "-cloud-amd64"
		dir := filepath.Join(cache, "linux-image-"+v, "boot")
		writeConfig(t, dir, "vmlinuz-"+v, "kernel")
		writeConfig(t, dir, "config-"+v, goodConfig()...)
	}
	calls := 0
	command = func(name string, args ...string) *exec.Cmd { calls++; return exec.Command(name, args...) }
	t.Cleanup(func() { command = exec.Command })
	k, err := Fetch(cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if k.Version != "6.1.0-10-cloud-amd64" || calls != 0 {
		t.Fatalf("Fetch from cache = %+v after %d commands, want 6.1.0-10 and none", k, calls)
	}
}

func TestFetchWithoutApt(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Fetch(t.TempDir(), nil)
	if err == nil || !strings.Contains(err.Error(), "apt-cache") || !strings.Contains(err.Error(), "FromFile") {
		t.Fatalf("Fetch without apt: got %v, want an error naming apt-cache and FromFile", err)
	}
}

func TestParseDepends(t *testing.T) {
	out := "linux-image-cloud-amd64\n  Depends: linux-image-6.1.0-56-cloud-amd64\n"
	if got := parseDepends([]byte(out)); got != "linux-image-6.1.0-56-cloud-amd64" {
		t.Fatalf("parseDepends = %q", got)
	}
	if got := parseDepends([]byte("E: No packages found\n")); got != "" {
		t.Fatalf("parseDepends of an error = %q", got)
	}
}

// TestFetch downloads the real kernel; it needs apt and a reachable Debian
// mirror, so it runs only with DIMMNET_VM_TESTS=1.
func TestFetch(t *testing.T) {
	if os.Getenv("DIMMNET_VM_TESTS") != "1" {
		t.Skip("downloads a ~27 MB kernel package with apt; set DIMMNET_VM_TESTS=1 to run")
	}
	cache := t.TempDir()
	start := time.Now()
	k, err := Fetch(cache, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fetched %+v in %v", k, time.Since(start).Round(time.Millisecond))
	if fi, err := os.Stat(k.Path); err != nil || fi.Size() < 1<<20 {
		t.Fatalf("vmlinuz %s: %v (size %v)", k.Path, err, fi)
	}
	if k.Config == "" || k.Version == "" {
		t.Fatalf("fetched kernel lacks config or version: %+v", k)
	}
	if err := k.Check(); err != nil {
		t.Fatal(err)
	}

	// Cached: no apt, no network — with no apt in PATH and every command
	// counted.
	t.Setenv("PATH", t.TempDir())
	calls := 0
	command = func(name string, args ...string) *exec.Cmd { calls++; return exec.Command(name, args...) }
	t.Cleanup(func() { command = exec.Command })
	start = time.Now()
	k2, err := Fetch(cache, func(s string) { t.Errorf("cached Fetch reported %q", s) })
	took := time.Since(start)
	if err != nil {
		t.Fatalf("cached Fetch: %v", err)
	}
	if k2 != k || calls != 0 || took > time.Second {
		t.Fatalf("cached Fetch = %+v after %d commands in %v, want %+v, none, fast", k2, calls, took, k)
	}
}

// unpackedKernel is a kernel image as an unpacked package holds it (no
// modules yet), and the package's root.
func unpackedKernel(t *testing.T) (string, Kernel) {
	t.Helper()
	root := t.TempDir()
	img := filepath.Join(root, "boot", "vmlinuz-6.1.0-test")
	os.MkdirAll(filepath.Dir(img), 0o755)
	os.WriteFile(img, []byte("kernel"), 0o644)
	k, err := FromFile(img)
	if err != nil {
		t.Fatal(err)
	}
	return root, k
}

// The VFIO modules are found beside an unpacked package's image, in order;
// a package missing one says which.
func TestVFIOModuleFiles(t *testing.T) {
	root, k := unpackedKernel(t)
	if _, err := k.VFIOModuleFiles(); !errors.Is(err, ErrNoModules) || !strings.Contains(err.Error(), "irqbypass.ko") {
		t.Fatalf("no modules: %v", err)
	}
	for _, m := range VFIOModules {
		p := filepath.Join(root, "lib", "modules", "6.1.0-test", m)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("module"), 0o644)
	}
	files, err := k.VFIOModuleFiles()
	if err != nil || len(files) != len(VFIOModules) {
		t.Fatalf("%v %v", files, err)
	}
	for i, f := range files {
		if !strings.HasSuffix(f, VFIOModules[i]) {
			t.Fatalf("module %d is %s, want %s", i, f, VFIOModules[i])
		}
	}
}

// The network modules come in the order given, and a package without them
// names the first one missing (the lab then says fi_pingpong cannot run).
func TestNetModuleFiles(t *testing.T) {
	root, k := unpackedKernel(t)
	if _, err := k.ModuleFiles(NetModules); !errors.Is(err, ErrNoModules) || !strings.Contains(err.Error(), "virtio_ring.ko") {
		t.Fatalf("no modules: %v", err)
	}
	for _, m := range NetModules {
		p := filepath.Join(root, "lib", "modules", "6.1.0-test", m)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("module"), 0o644)
	}
	files, err := k.ModuleFiles(NetModules)
	if err != nil || len(files) != len(NetModules) {
		t.Fatalf("%v %v", files, err)
	}
	for i, f := range files {
		if !strings.HasSuffix(f, NetModules[i]) {
			t.Fatalf("module %d is %s, want %s", i, f, NetModules[i])
		}
	}
}
