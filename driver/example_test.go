package driver_test

import (
	"fmt"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// Two in-process devices: node 1 PUSHes 11 bytes into node 2's link memory
// and IPUSHes a message that node 2's device places in ring 0.
func Example() {
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	open := func(d *vdev.Device) *driver.Driver {
		drv, err := driver.Open(driver.InProcessDevice(d))
		if err != nil {
			panic(err)
		}
		return drv
	}
	a, b := open(l.Devices[0]), open(l.Devices[1])

	// PUSH: the sender names the remote address.
	a.CopyIn(0, []byte("hello, DIMM"))
	a.Push(2, 0, 4096, 11, 0, 0)
	st, _ := b.Wait(1e9)
	fmt.Println(st.Type, string(b.LinkMem()[st.Addr:st.Addr+uint64(st.Length)]))

	// IPUSH: the receiver's AMT Address Table picks the ring.
	ring, _ := b.SetRing(0, 1<<20, 1<<20, false)
	b.MapSender(a.GPID(), ring.Index())
	a.IPush(2, b.GPID(), 0, 5, 0, 0, 0)
	st, _ = b.Wait(1e9)
	fmt.Println(st.Type, string(ring.Data(&st)), st.SrcProc == a.GPID())
	ring.ReleaseTo(st.End)

	// A bad command completes with an error status that names it.
	a.Push(2, 3, 0, 8, 0, 0) // misaligned local address
	st, _ = a.Wait(1e9)
	fmt.Println(st.Type, st.Opcode, st.Err.String(), st.Err == uapi.EBadAlign)
	// Output:
	// PUSH hello, DIMM
	// IPUSH_MSG hello true
	// ERROR PUSH BAD_ALIGN true
}
