package link

import "sync"

// frames is a stack of frame buffers of one capacity for reuse: the most
// recently released comes back first, while it is still in the cache, and
// steady traffic allocates nothing.
type frames struct {
	mu   sync.Mutex
	size int // capacity of every buffer
	max  int // buffers kept at most
	free [][]byte
}

// get returns an empty buffer of capacity size.
func (fs *frames) get() []byte {
	fs.mu.Lock()
	if n := len(fs.free); n > 0 {
		f := fs.free[n-1]
		fs.free = fs.free[:n-1]
		fs.mu.Unlock()
		return f
	}
	fs.mu.Unlock()
	return make([]byte, 0, fs.size)
}

// put keeps f for reuse if it is one of ours and there is room.
func (fs *frames) put(f []byte) {
	if cap(f) != fs.size {
		return
	}
	fs.mu.Lock()
	if len(fs.free) < fs.max {
		fs.free = append(fs.free, f[:0])
	}
	fs.mu.Unlock()
}
