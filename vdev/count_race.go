//go:build race

package vdev

import (
	"fmt"
	"sync/atomic"

	"github.com/dimmnet/dimmnet/uapi"
)

// count is count.go's under -race. There AddOwn64 is a locked add, which
// the race detector cannot fault, so a count from outside a pass (which
// in a production build could lose another pass's count) would go
// unseen: this one checks that the running flag is held, and panics
// naming the counter when it is not.
func (d *Device) count(c uapi.Counter, n uint64) {
	if atomic.LoadUint32(&d.running.v) == 0 {
		panic(fmt.Sprintf("vdev: %v counted outside a pass (a counter counted there is countShared's)", c))
	}
	d.r.AddOwn64(c.Off(), n)
}
