//go:build !race

package vdev

import "github.com/dimmnet/dimmnet/uapi"

// count adds n to counter c from a pass (the holder of running): the
// passes are the counter's one writer, so it is a load and a release
// store, not a locked add (uapi.Region.AddOwn64), which on a sender's hot
// path would wait for the line of the frame it just stored. A counter
// counted outside the passes is countShared's, and never count's too:
// their adds would lose each other's. Race builds check that a pass
// holds the device (count_race.go).
func (d *Device) count(c uapi.Counter, n uint64) { d.r.AddOwn64(c.Off(), n) }
