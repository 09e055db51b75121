// Package kernel finds a Linux kernel the guest lab can boot under QEMU.
//
// The lab needs a kernel with PCI (the dimmnet device is an ivshmem PCI
// function), devtmpfs and a serial console built in, because the guest's
// whole root file system is the initramfs; the only modules it carries are
// the VFIO ones (VFIOModules) and, for the lab's fi_pingpong, the virtio
// network ones (NetModules), taken from the same package. Debian's cloud
// kernel has all of that built in, boots in about a second under TCG and is
// one small package, so Fetch takes it from the host's Debian mirror with
// apt and unpacks it into a cache without installing anything on the host.
// FromFile accepts any other kernel the user prefers; Check says, before a
// VM is started, whether its config has what the guest needs.
package kernel

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Kernel is a bootable kernel image and what is known about it.
type Kernel struct {
	// Path is the kernel image (vmlinuz/bzImage) handed to QEMU's -kernel.
	Path string
	// Config is the kernel's config-<version> file, "" if none was found;
	// without it Check cannot tell anything before boot.
	Config string
	// Version is the kernel release (uname -r), "" if unknown.
	Version string
}

// Required lists the config options the guest needs built in (=y): a module
// is useless to a guest whose only root file system is the initramfs.
// CONFIG_PCI finds the dimmnet device, CONFIG_SYSFS and CONFIG_PROC_FS are
// how the guest init finds and maps it, CONFIG_DEVTMPFS gives /dev,
// CONFIG_BLK_DEV_INITRD and CONFIG_RD_GZIP unpack the initramfs, the 8250
// options carry the console on -nographic's ttyS0 and CONFIG_BINFMT_ELF runs
// /init. What VFIO needs (CONFIG_PCI_MSI, CONFIG_INTEL_IOMMU,
// CONFIG_IRQ_REMAP, the modules of VFIOModules) is deliberately absent: a
// guest without it names what it lacks and polls through sysfs instead.
var Required = []string{
	"CONFIG_PCI",
	"CONFIG_SYSFS",
	"CONFIG_PROC_FS",
	"CONFIG_DEVTMPFS",
	"CONFIG_BLK_DEV_INITRD",
	"CONFIG_RD_GZIP",
	"CONFIG_SERIAL_8250",
	"CONFIG_SERIAL_8250_CONSOLE",
	"CONFIG_BINFMT_ELF",
}

// VFIOModules are the modules, relative to lib/modules/<version>, that a
// guest inserts, in this order, to hand its dimmnet function to vfio-pci
// (Debian's cloud kernel builds VFIO as modules; no others are needed).
// The package ships no modules.dep (depmod runs at install), so the order
// is the dependency order, written down.
var VFIOModules = []string{
	"kernel/virt/lib/irqbypass.ko",
	"kernel/drivers/vfio/vfio.ko",
	"kernel/drivers/vfio/vfio_iommu_type1.ko",
	"kernel/drivers/vfio/vfio_virqfd.ko",
	"kernel/drivers/vfio/pci/vfio-pci-core.ko",
	"kernel/drivers/vfio/pci/vfio-pci.ko",
}

// NetModules are the modules, in dependency order, that give a guest a
// virtio-net interface: the lab's fi_pingpong exchanges its addresses over
// a TCP socket of its own before it uses the device, so its guests need an
// IP network besides the dimmnet device (Debian's cloud kernel builds
// virtio as modules).
var NetModules = []string{
	"kernel/drivers/virtio/virtio_ring.ko",
	"kernel/drivers/virtio/virtio.ko",
	"kernel/drivers/virtio/virtio_pci_modern_dev.ko",
	"kernel/drivers/virtio/virtio_pci_legacy_dev.ko",
	"kernel/drivers/virtio/virtio_pci.ko",
	"kernel/net/core/failover.ko",
	"kernel/drivers/net/net_failover.ko",
	"kernel/drivers/net/virtio_net.ko",
}

// ErrNoModules is returned (wrapped, naming the first missing file) by
// VFIOModuleFiles and ModuleFiles when the kernel's package lacks a module
// asked for.
var ErrNoModules = errors.New("kernel: modules not found")

// VFIOModuleFiles returns the host paths of VFIOModules for k, found in
// lib/modules/<version> of the package k was unpacked from (the image in
// boot/, the modules in ../lib/modules: Debian's layout and the host's
// own). A kernel with VFIO built in needs none; one without modules
// beside it gets ErrNoModules, and its guests the sysfs attach.
func (k Kernel) VFIOModuleFiles() ([]string, error) {
	return k.ModuleFiles(VFIOModules)
}

// ModuleFiles returns the host paths of mods (paths relative to
// lib/modules/<version>, as VFIOModules and NetModules are) for k, in the
// same order, or ErrNoModules naming the first one missing.
func (k Kernel) ModuleFiles(mods []string) ([]string, error) {
	if k.Version == "" {
		return nil, fmt.Errorf("%w: version of %s unknown", ErrNoModules, k.Path)
	}
	dir := filepath.Join(filepath.Dir(k.Path), "..", "lib", "modules", k.Version)
	var files []string
	for _, m := range mods {
		p := filepath.Clean(filepath.Join(dir, m))
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: no %s", ErrNoModules, p)
		}
		files = append(files, p)
	}
	return files, nil
}

// ErrMissing is returned (wrapped, with the options named) by Check when the
// kernel lacks options in Required, so callers can tell a wrong kernel from
// an unreadable config with errors.Is.
var ErrMissing = errors.New("kernel config lacks options the guest needs built in")

// MetaPackage is the Debian metapackage whose current dependency Fetch
// downloads; it always points at the newest cloud kernel of the release.
const MetaPackage = "linux-image-cloud-amd64"

// command builds every external command Fetch runs; tests replace it to see
// that a cached Fetch runs nothing.
var command = exec.Command

// Fetch returns Debian's cloud kernel, unpacked under cacheDir. The first
// call resolves the versioned package MetaPackage depends on, downloads it
// with apt-get download into cacheDir/deb and unpacks it with dpkg -x into
// cacheDir/<package>; later calls find the unpacked kernel and touch neither
// apt nor the network, so the lab starts offline once it has run once
// (remove cacheDir to pick up a newer kernel). progress, if not nil, is told
// about each slow step. Nothing is installed on the host.
func Fetch(cacheDir string, progress func(string)) (Kernel, error) {
	if progress == nil {
		progress = func(string) {}
	}
	if k, ok := cached(cacheDir); ok {
		return k, nil
	}
	if err := os.MkdirAll(filepath.Join(cacheDir, "deb"), 0o755); err != nil {
		return Kernel{}, fmt.Errorf("kernel: fetch: %w", err)
	}
	pkg, err := resolve(progress)
	if err != nil {
		return Kernel{}, err
	}
	deb, err := download(cacheDir, pkg, progress)
	if err != nil {
		return Kernel{}, err
	}
	dir := filepath.Join(cacheDir, pkg)
	if err := unpack(deb, dir, progress); err != nil {
		return Kernel{}, err
	}
	k, err := inDir(dir)
	if err != nil {
		return Kernel{}, fmt.Errorf("kernel: fetch: package %s: %w", pkg, err)
	}
	return k, nil
}

// cached returns the kernel of the newest package already unpacked in
// cacheDir. Unpacking renames a finished directory into place, so a
// directory that exists is complete.
func cached(cacheDir string) (Kernel, bool) {
	dirs, _ := filepath.Glob(filepath.Join(cacheDir, "linux-image-*"))
	dirs = slices.DeleteFunc(dirs, func(d string) bool {
		fi, err := os.Stat(d)
		return err != nil || !fi.IsDir()
	})
	slices.SortFunc(dirs, naturalCompare)
	for i := len(dirs) - 1; i >= 0; i-- {
		if k, err := inDir(dirs[i]); err == nil {
			return k, true
		}
	}
	return Kernel{}, false
}

// inDir finds boot/vmlinuz-* and its config in an unpacked package.
func inDir(dir string) (Kernel, error) {
	images, _ := filepath.Glob(filepath.Join(dir, "boot", "vmlinuz-*"))
	if len(images) == 0 {
		return Kernel{}, fmt.Errorf("no boot/vmlinuz-* in %s", dir)
	}
	slices.SortFunc(images, naturalCompare)
	return FromFile(images[len(images)-1])
}

// resolve asks apt which versioned kernel package MetaPackage depends on,
// refreshing apt's lists once if apt does not know the metapackage (fresh
// containers ship without them).
func resolve(progress func(string)) (string, error) {
	out, err := run("", "apt-cache", "depends", MetaPackage)
	if pkg := parseDepends(out); err == nil && pkg != "" {
		return pkg, nil
	}
	if errors.Is(err, exec.ErrNotFound) {
		return "", fmt.Errorf("kernel: fetch: resolving %s: %w", MetaPackage, err)
	}
	progress("apt-get update (apt does not know " + MetaPackage + ")")
	if _, uerr := run("", "apt-get", "update", "-qq"); uerr != nil {
		return "", fmt.Errorf("kernel: fetch: resolving %s: %w", MetaPackage, uerr)
	}
	out, err = run("", "apt-cache", "depends", MetaPackage)
	if err != nil {
		return "", fmt.Errorf("kernel: fetch: resolving %s: %w", MetaPackage, err)
	}
	pkg := parseDepends(out)
	if pkg == "" {
		return "", fmt.Errorf("kernel: fetch: resolving %s: apt-cache depends names no linux-image package:\n%s", MetaPackage, bytes.TrimSpace(out))
	}
	return pkg, nil
}

// parseDepends picks the kernel image package out of apt-cache depends
// output ("  Depends: linux-image-6.1.0-56-cloud-amd64").
func parseDepends(out []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		dep, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Depends:")
		if !ok {
			continue
		}
		dep = strings.TrimSpace(dep)
		if strings.HasPrefix(dep, "linux-image-") && !strings.HasPrefix(dep, "<") {
			return dep
		}
	}
	return ""
}

// download runs apt-get download in cacheDir/deb unless the .deb is there.
func download(cacheDir, pkg string, progress func(string)) (string, error) {
	debDir := filepath.Join(cacheDir, "deb")
	if deb := findDeb(debDir, pkg); deb != "" {
		return deb, nil
	}
	progress("apt-get download " + pkg)
	if _, err := run(debDir, "apt-get", "download", pkg); err != nil {
		return "", fmt.Errorf("kernel: fetch: downloading %s: %w", pkg, err)
	}
	deb := findDeb(debDir, pkg)
	if deb == "" {
		return "", fmt.Errorf("kernel: fetch: downloading %s: apt-get download left no %s_*.deb in %s", pkg, pkg, debDir)
	}
	return deb, nil
}

func findDeb(debDir, pkg string) string {
	debs, _ := filepath.Glob(filepath.Join(debDir, pkg+"_*.deb"))
	if len(debs) == 0 {
		return ""
	}
	slices.SortFunc(debs, naturalCompare)
	return debs[len(debs)-1]
}

// unpack extracts deb into dir through a temporary directory renamed into
// place, so an interrupted unpack never looks like a cached kernel.
func unpack(deb, dir string, progress func(string)) error {
	progress("dpkg -x " + filepath.Base(deb))
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".unpack-*")
	if err != nil {
		return fmt.Errorf("kernel: fetch: unpacking %s: %w", filepath.Base(deb), err)
	}
	defer os.RemoveAll(tmp)
	if _, err := run("", "dpkg", "-x", deb, tmp); err != nil {
		return fmt.Errorf("kernel: fetch: unpacking %s: %w", filepath.Base(deb), err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("kernel: fetch: unpacking %s: %w", filepath.Base(deb), err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("kernel: fetch: unpacking %s: %w", filepath.Base(deb), err)
	}
	return nil
}

// run runs name with args in dir and returns its combined output; its
// errors name the command and carry the output, which is where apt and dpkg
// say what went wrong.
func run(dir, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	if _, err := exec.LookPath(name); err != nil {
		return nil, fmt.Errorf("%s: %s not found (Fetch needs a Debian-based host with apt; name a kernel with FromFile instead): %w", line, name, err)
	}
	cmd := command(name, args...)
	cmd.Dir = dir
	// apt's messages are what the error shows; keep them untranslated.
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s: %w\n%s", line, err, bytes.TrimSpace(out))
	}
	return out, nil
}

// FromFile returns the kernel image at path, with its config if a
// config-<version> file lies beside it (the same directory or ../boot, as
// in /boot and in unpacked Debian packages), so a user's own kernel gets
// the same Check as a fetched one.
func FromFile(path string) (Kernel, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Kernel{}, fmt.Errorf("kernel: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return Kernel{}, fmt.Errorf("kernel: %s is not a regular file", path)
	}
	k := Kernel{Path: path}
	base := filepath.Base(path)
	for _, prefix := range []string{"vmlinuz-", "vmlinux-", "bzImage-"} {
		if v, ok := strings.CutPrefix(base, prefix); ok {
			k.Version = v
			break
		}
	}
	dir := filepath.Dir(path)
	if k.Version != "" {
		for _, c := range []string{
			filepath.Join(dir, "config-"+k.Version),
			filepath.Join(dir, "..", "boot", "config-"+k.Version),
		} {
			if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
				k.Config = filepath.Clean(c)
				break
			}
		}
	} else if cs, _ := filepath.Glob(filepath.Join(dir, "config-*")); len(cs) == 1 {
		// An unversioned image with exactly one config beside it: that is
		// its config, and the config names the version.
		k.Config = cs[0]
		k.Version = strings.TrimPrefix(filepath.Base(cs[0]), "config-")
	}
	return k, nil
}

// Check fails with ErrMissing, naming the options, unless every option in
// Required is built in (=y), so a wrong kernel is reported before a VM boots
// rather than as a silent or panicking guest. Without a config there is
// nothing to read: Check returns nil and the guest init reports what is
// missing at boot.
func (k Kernel) Check() error {
	if k.Config == "" {
		return nil
	}
	f, err := os.Open(k.Config)
	if err != nil {
		return fmt.Errorf("kernel: check: %w", err)
	}
	defer f.Close()
	values := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok && strings.HasPrefix(name, "CONFIG_") {
			values[name] = strings.Trim(value, `"`)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("kernel: check: reading %s: %w", k.Config, err)
	}
	var missing []string
	for _, opt := range Required {
		switch v, ok := values[opt]; {
		case !ok:
			missing = append(missing, opt+" (not set)")
		case v != "y":
			missing = append(missing, opt+"="+v+" (must be =y)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("kernel: check %s: %w: %s", k.Config, ErrMissing, strings.Join(missing, ", "))
	}
	return nil
}

// naturalCompare orders strings with embedded numbers numerically, so
// linux-image-6.1.0-10 sorts after linux-image-6.1.0-9.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		ad, bd := isDigit(a[0]), isDigit(b[0])
		if ad && bd {
			an, ar := leadingDigits(a)
			bn, br := leadingDigits(b)
			an, bn = strings.TrimLeft(an, "0"), strings.TrimLeft(bn, "0")
			if c := len(an) - len(bn); c != 0 {
				return c
			}
			if c := strings.Compare(an, bn); c != 0 {
				return c
			}
			a, b = ar, br
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func leadingDigits(s string) (digits, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}
