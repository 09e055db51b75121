package acp_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/acp"
	"github.com/dimmnet/dimmnet/driver/drivertest"
	"github.com/dimmnet/dimmnet/vdev"
)

// Copies and atomics whose device commands find rank 0's doorbell dead
// (driver.ErrNotRung) are posted, and ACP treats them so: every handle
// completes without error, each copy's bytes land intact and each add
// counts once (through the delegate station and through the device), and
// Stats counts them as NotRung. ACP took the error for a failure: the
// handle failed while its operation went on, and the delegation
// message's slot went back to be overwritten before the device read it.
func TestCopyNotRungStillCompletes(t *testing.T) {
	const rounds, chunk, counter = 8, 512, 60000 // counter: rank 1's word the adds hit
	l, err := vdev.NewLocal(vdev.Config{RegionSize: 8 << 20}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	live := false // a rank may still run on the devices: leave them mapped
	defer func() {
		if !live {
			l.Close()
		}
	}()
	bell := drivertest.NewBell(driver.InProcessDevice(l.Devices[0]))
	atts := []driver.Attachment{bell, driver.InProcessDevice(l.Devices[1])}
	var stats [2]acp.Stats // each rank writes its own
	err = drivertest.Ranks(atts, 2*time.Minute, nil, func(r int, d *driver.Driver) error {
		c, err := acp.Init(d, acp.Options{Rank: r, Procs: 2})
		if err != nil {
			return err
		}
		if err := notRungBody(c, d, bell, rounds, chunk, counter); err != nil {
			return err
		}
		stats[r] = c.Stats()
		return c.Finalize()
	})
	if err != nil {
		live = true // the other rank may wait in a Sync for ever
		t.Fatal(err)
	}
	if bell.Failed() == 0 || stats[0].NotRung == 0 {
		t.Fatalf("no command met the dead doorbell (%d failed kicks, NotRung %d)", bell.Failed(), stats[0].NotRung)
	}
	for r, s := range stats {
		if s.Protocol != 0 {
			t.Fatalf("rank %d: %d messages failed to decode", r, s.Protocol)
		}
	}
	if stats[0].DeviceAtomics != rounds/2 {
		t.Fatalf("%d device atomics, want %d", stats[0].DeviceAtomics, rounds/2)
	}
	t.Logf("%d failed kicks, %d commands posted not rung", bell.Failed(), stats[0].NotRung)
}

// notRungBody: rank 0, its doorbell dead, copies chunks of its starter
// memory into rank 1's and adds 1 to rank 1's counter word, every
// operation started on a sleeping device; rank 1 checks what landed.
func notRungBody(c *acp.ACP, d *driver.Driver, bell *drivertest.Bell, rounds, chunk, counter int) error {
	me := c.Rank()
	mine, err := c.QueryAddress(c.StarterGA(me))
	if err != nil {
		return err
	}
	want := func(i int) []byte { return bytes.Repeat([]byte{byte(i + 1), 0xA5, byte(3 * i)}, chunk/3+1)[:chunk] }
	if me == 0 {
		for i := range rounds {
			copy(mine[i*chunk:], want(i))
		}
		bell.Kill(true)
		for i := range rounds {
			if err := drivertest.WaitAsleep(d, 10*time.Second); err != nil {
				return err
			}
			off := acp.GA(i * chunk)
			h, err := c.Copy(c.StarterGA(1)+off, c.StarterGA(0)+off, uint64(chunk), acp.HandleNull)
			if err == nil {
				err = c.Complete(h)
			}
			if err != nil {
				return fmt.Errorf("copy %d: %w", i, err)
			}
			if err := drivertest.WaitAsleep(d, 10*time.Second); err != nil {
				return err
			}
			c.SetDeviceAtomics(i%2 == 1) // the delegate station's add, then the device's
			h, err = c.Add8(c.StarterGA(0)+acp.GA(counter), c.StarterGA(1)+acp.GA(counter), 1, acp.HandleNull)
			if err == nil {
				err = c.Complete(h)
			}
			if err != nil {
				return fmt.Errorf("add %d: %w", i, err)
			}
			if old := binary.LittleEndian.Uint64(mine[counter:]); old != uint64(i) {
				return fmt.Errorf("add %d: old value %d, want %d", i, old, i)
			}
		}
		bell.Kill(false)
	}
	if err := c.Sync(); err != nil { // rank 0's operations are complete
		return err
	}
	if me == 1 {
		for i := range rounds {
			if got := mine[i*chunk : (i+1)*chunk]; !bytes.Equal(got, want(i)) {
				return fmt.Errorf("copy %d landed %x, want %x", i, got[:16], want(i)[:16])
			}
		}
		if got := binary.LittleEndian.Uint64(mine[counter:]); got != uint64(rounds) {
			return fmt.Errorf("counter %d after %d adds of 1", got, rounds)
		}
	}
	return nil
}
