package acp_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/acp"
	"github.com/dimmnet/dimmnet/vdev"
)

// inProcess runs body on n ranks, each a goroutine with its own device
// on one in-memory link, and fails the test with every rank's error.
func inProcess(t *testing.T, n int, body func(c *acp.ACP) error) {
	t.Helper()
	inProcessWith(t, n, acp.Options{}, body)
}

// inProcessWith is inProcess with options (Rank and Procs are set).
func inProcessWith(t *testing.T, n int, o acp.Options, body func(c *acp.ACP) error) {
	t.Helper()
	inProcessOn(t, n, o, func(cfg vdev.Config, nodes []uint16) (*vdev.Local, error) {
		return vdev.NewLocal(cfg, 0, nodes...)
	}, body)
}

// inProcessOn is inProcessWith on the devices local makes (a link of the
// test's choosing).
func inProcessOn(t *testing.T, n int, o acp.Options, local func(vdev.Config, []uint16) (*vdev.Local, error), body func(c *acp.ACP) error) {
	t.Helper()
	nodes := make([]uint16, n)
	for i := range nodes {
		nodes[i] = uint16(i + 1)
	}
	l, err := local(vdev.Config{RegionSize: 8 << 20}, nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := driver.Open(driver.InProcessDevice(l.Devices[r]))
			if err != nil {
				errs[r] = err
				return
			}
			defer d.Close()
			o := o
			o.Rank, o.Procs = r, n
			c, err := acp.Init(d, o)
			if err != nil {
				errs[r] = err
				return
			}
			if err := body(c); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
				c.Finalize()
				return
			}
			errs[r] = c.Finalize()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func TestCopyAndAtomicsInProcess(t *testing.T) {
	ref := reference(t)
	results.Clear()
	inProcess(t, 3, conformance)
	for r := range ref {
		if d, _ := results.Load(r); d != ref[r] {
			t.Errorf("rank %d: result %x, another in-process run's %x", r, d, ref[r])
		}
	}
}

var (
	refOnce sync.Once
	ref     [][32]byte
)

// reference is every rank's conformance result in-process (delegated
// atomics, one in-memory link), computed once: what every other
// transport must give.
func reference(t *testing.T) [][32]byte {
	t.Helper()
	refOnce.Do(func() {
		results.Clear()
		inProcess(t, 3, conformance)
		for r := range 3 {
			d, ok := results.Load(r)
			if !ok {
				return
			}
			ref = append(ref, d.([32]byte))
		}
	})
	if ref == nil {
		t.Fatal("no in-process reference result")
	}
	return ref
}

// TestDeviceAtomicsInProcess runs the conformance program with Add8 and
// CAS8 done by the target's device (ABI 6's FADD8 and CAS8): the same
// results as by delegation.
func TestDeviceAtomicsInProcess(t *testing.T) {
	ref := reference(t)
	results.Clear()
	inProcessWith(t, 3, acp.Options{DeviceAtomics: true}, func(c *acp.ACP) error {
		if err := conformance(c); err != nil {
			return err
		}
		if n := c.Stats().DeviceAtomics; c.Rank() != 0 && n < 2 {
			return fmt.Errorf("rank %d had %d atomics done by a device, want its Add8 and CAS8", c.Rank(), n)
		}
		return nil
	})
	for r, want := range ref {
		if d, _ := results.Load(r); d != want {
			t.Errorf("rank %d: result %x with device atomics, %x delegated", r, d, want)
		}
	}
}

// word reads the 8-byte little-endian word at g, this rank's.
func word(c *acp.ACP, g acp.GA) (uint64, error) {
	b, err := c.QueryAddress(g)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func word4(c *acp.ACP, g acp.GA) (uint32, error) {
	b, err := c.QueryAddress(g)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}
