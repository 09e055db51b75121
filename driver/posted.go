package driver

import "errors"

// Posted reports whether a command whose Post (or PostMore, Ring, or a
// call built on them: Push, IPush, Pull, ...) returned err is posted: err
// is nil, or says only that the doorbell could not be rung (ErrNotRung).
// A posted command completes with a status of its own and reads what it
// names until then, so a caller that took ErrNotRung for a failure
// freed or reused a buffer the device was about to read, counted a
// completion that still came, or posted the command twice.
func Posted(err error) bool { return err == nil || errors.Is(err, ErrNotRung) }
