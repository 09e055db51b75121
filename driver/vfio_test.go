package driver

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// fakeSysfs builds /sys/bus/pci with one function, 0000:00:03.0, and points
// PCISysfs at it for the test.
func fakeSysfs(t *testing.T) (bus, dev string) {
	t.Helper()
	bus = filepath.Join(t.TempDir(), "bus", "pci")
	dev = filepath.Join(bus, "devices", "0000:00:03.0")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	old := PCISysfs
	PCISysfs = filepath.Join(bus, "devices")
	t.Cleanup(func() { PCISysfs = old })
	return bus, dev
}

// A guest without an IOMMU or without vfio-pci hears which of the two it
// lacks, before anything is written to sysfs.
func TestBindVFIOMissing(t *testing.T) {
	bus, dev := fakeSysfs(t)
	if err := BindVFIO("0000:00:03.0"); !errors.Is(err, ErrNoIOMMU) {
		t.Fatalf("no iommu_group: %v, want ErrNoIOMMU", err)
	}
	if err := os.Symlink("../../../kernel/iommu_groups/1", filepath.Join(dev, "iommu_group")); err != nil {
		t.Fatal(err)
	}
	if err := BindVFIO("0000:00:03.0"); !errors.Is(err, ErrNoVFIO) {
		t.Fatalf("no vfio-pci driver: %v, want ErrNoVFIO", err)
	}
	if _, err := os.Stat(filepath.Join(dev, "driver_override")); err == nil {
		t.Fatal("driver_override written although vfio-pci is missing")
	}
	if _, err := os.Stat(filepath.Join(bus, "drivers_probe")); err == nil {
		t.Fatal("drivers_probe written although vfio-pci is missing")
	}
	if _, err := AttachVFIO("0000:00:03.0"); err == nil {
		t.Fatal("AttachVFIO of an unbound function succeeded")
	}
}

// Binding writes vfio-pci to driver_override and the address to
// drivers_probe; the kernel's answer is the driver link (made up here).
func TestBindVFIOWrites(t *testing.T) {
	bus, dev := fakeSysfs(t)
	os.Symlink("../../../kernel/iommu_groups/1", filepath.Join(dev, "iommu_group"))
	os.MkdirAll(filepath.Join(bus, "drivers", "vfio-pci"), 0o755)
	err := BindVFIO("0000:00:03.0")
	if !errors.Is(err, ErrNoVFIO) { // nothing made the driver link: not bound
		t.Fatalf("unbound after drivers_probe: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dev, "driver_override")); string(b) != "vfio-pci" {
		t.Fatalf("driver_override %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(bus, "drivers_probe")); string(b) != "0000:00:03.0" {
		t.Fatalf("drivers_probe %q", b)
	}
	os.Symlink("../../../bus/pci/drivers/vfio-pci", filepath.Join(dev, "driver"))
	if !BoundToVFIO("0000:00:03.0") {
		t.Fatal("BoundToVFIO false with the driver link to vfio-pci")
	}
	if err := BindVFIO("0000:00:03.0"); err != nil {
		t.Fatalf("already bound: %v", err)
	}
}
