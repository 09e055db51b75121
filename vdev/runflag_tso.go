//go:build amd64 && !race

package vdev

// release gives the flag back with a plain store: under amd64's TSO it is
// a release store (runFlag says why not sync/atomic's).
func (f *runFlag) release() { f.v = 0 }
