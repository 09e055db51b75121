//go:build amd64 && !race

package release

// Store stores v at addr with a plain MOV. It is written in assembly so
// the compiler can neither drop nor move it, as it may a plain Go store
// that no Go synchronization orders.
//
//go:noescape
func Store(addr *uint64, v uint64)

// Plain: this build's Store is a plain store, not sequentially
// consistent; a protocol that needs a later load ordered after it must
// fence (shmring.Fence).
const Plain = true
