package fabric

import "errors"

// Tree is the shape a barrier's gather and release messages follow over
// the positions of a visiting list (position 0 is the root). The orders
// library's binomial tree (collective.Binomial) is the one every run
// uses; the simulator takes it as a parameter so that the fabric model,
// which times switches and links, does not import the orders it times.
type Tree interface {
	// Parent is the position that position pos gathers to (-1 for the
	// root).
	Parent(pos int) int
	// Children lists, in release order, the positions among n that
	// gather to pos and are released by it.
	Children(pos, n int) []int
}

// ErrNoTree is returned by Barriers and Multicast given a nil Tree.
var ErrNoTree = errors.New("fabric: no tree to send along")
