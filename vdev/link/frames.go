package link

import "sync"

// frames is a stack of frame buffers of one capacity for reuse: the most
// recently released comes back first, while it is still in the cache, and
// steady traffic allocates nothing. It is ownedFrames under a lock, for
// ports whose own goroutines take and release buffers too.
type frames struct {
	mu sync.Mutex
	ownedFrames
}

// get returns an empty buffer of capacity size.
func (fs *frames) get() []byte {
	fs.mu.Lock()
	f := fs.pop()
	fs.mu.Unlock()
	if f == nil {
		f = make([]byte, 0, fs.size)
	}
	return f
}

// put keeps f for reuse if it is one of ours and there is room.
func (fs *frames) put(f []byte) {
	if cap(f) != fs.size {
		return
	}
	fs.mu.Lock()
	fs.ownedFrames.put(f)
	fs.mu.Unlock()
}

// ownedFrames is frames for a port that only its device's passes use,
// one at a time (the shared-memory port: the device serializes its passes
// with its running flag, and the port has no goroutine of its own that
// touches buffers), so the stack needs no lock. A sender's pass took the
// mutex twice per frame, and its locked instructions came right after the
// frame's store into the consumer's slot: each waited for that slot's
// line to come back from the consumer's core (docs/design.md, "Where a
// stream of 8-byte messages is bound"). The race detector checks the
// claim: its builds see the passes' hand-offs, and any other use races.
type ownedFrames struct {
	size int // capacity of every buffer
	max  int // buffers kept at most
	free [][]byte
}

// pop takes the most recently kept buffer, or nil when none is kept.
func (fs *ownedFrames) pop() []byte {
	n := len(fs.free)
	if n == 0 {
		return nil
	}
	f := fs.free[n-1]
	fs.free = fs.free[:n-1]
	return f
}

// get returns an empty buffer of capacity size.
func (fs *ownedFrames) get() []byte {
	if f := fs.pop(); f != nil {
		return f
	}
	return make([]byte, 0, fs.size)
}

// put keeps f for reuse if it is one of ours and there is room.
func (fs *ownedFrames) put(f []byte) {
	if cap(f) == fs.size && len(fs.free) < fs.max {
		fs.free = append(fs.free, f[:0])
	}
}
