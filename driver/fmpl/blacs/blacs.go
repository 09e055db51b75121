// Package blacs is BLACS's point-to-point matrix communication on FMPL
// (the paper's 5.3, BLACS-FMPL): general and trapezoidal sends and
// receives (vGESD2D, vGERV2D, vTRSD2D, vTRRV2D) of the five BLACS types
// on a process grid. MPIBLACS builds an MPI derived datatype for every
// call; here a contiguous matrix goes as it is (zero copy when it lies in
// link memory), and anything else is packed column by column through two
// link-memory buffers, the pack of one piece overlapping the send of the
// other. BLACS sends complete locally, so a Context runs FMPL with a send
// timeout and a spool.
//
// Matrices are column-major, as BLACS's Fortran callers have them:
// element (i, j) of an m x n matrix with leading dimension lda is
// a[i+j*lda].
package blacs

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/driver/fmpl"
)

// ErrArgs reports matrix arguments BLACS refuses (sizes, lda, uplo, diag,
// coordinates).
var ErrArgs = errors.New("blacs: bad arguments")

// Elem is a BLACS element type: I, S, D, C and Z.
type Elem interface {
	int32 | float32 | float64 | complex64 | complex128
}

// Context is a process grid over a communicator (BLACS's ICONTEXT),
// row-major: grid (r, c) is communicator rank r*npcol+c.
type Context struct {
	w            *fmpl.World
	comm         fmpl.Comm
	nprow, npcol int
	myrow, mycol int
	idx          int // matching areas idx and idx+1: one per pack buffer
	buf          [2][]byte
	// scope holds the communicators of the broadcast scopes: 'A' the
	// whole grid, 'R' this process's row, 'C' its column (CommNull where
	// this process is outside the grid or the scope could not be made).
	scope map[byte]fmpl.Comm
}

// Options of a context.
type Options struct {
	// Index is the first of the two matching areas the context uses.
	Index int
	// Pack is the bytes of each of the two pack buffers (default 256 KiB).
	Pack int
	// Spool is the bytes of the send spool (default 4 MiB) and Timeout how
	// long a send waits for its receive before spooling (default 1 ms).
	Spool   int
	Timeout time.Duration
}

// NewContext makes an nprow x npcol grid over comm.
func NewContext(w *fmpl.World, comm fmpl.Comm, nprow, npcol int, o Options) (*Context, error) {
	size, err := w.CommSize(comm)
	if err != nil {
		return nil, err
	}
	me, _ := w.CommRank(comm)
	if nprow <= 0 || npcol <= 0 || nprow*npcol > size {
		return nil, fmt.Errorf("blacs grid %dx%d on %d ranks: %w", nprow, npcol, size, ErrArgs)
	}
	if o.Pack == 0 {
		o.Pack = 256 << 10
	}
	if o.Spool == 0 {
		o.Spool = 4 << 20
	}
	if o.Timeout == 0 {
		o.Timeout = time.Millisecond
	}
	if o.Index < 0 || o.Index+1 >= w.Count() {
		return nil, fmt.Errorf("blacs: matching areas %d and %d of %d: %w", o.Index, o.Index+1, w.Count(), ErrArgs)
	}
	c := &Context{w: w, comm: comm, nprow: nprow, npcol: npcol, myrow: me / npcol, mycol: me % npcol, idx: o.Index, scope: map[byte]fmpl.Comm{}}
	if err := c.makeScopes(size); err != nil {
		return nil, err
	}
	for i := range c.buf {
		if c.buf[i], err = w.Alloc(o.Pack); err != nil {
			return nil, err
		}
	}
	spool, err := w.Alloc(o.Spool)
	if err != nil {
		return nil, err
	}
	if err := w.SendBufSet(spool, o.Timeout); err != nil {
		return nil, err
	}
	return c, nil
}

// makeScopes builds the broadcast scopes. On CommWorld every scope is a
// communicator of its own (FMPL's CommCreate works on CommWorld, and every
// rank of it calls NewContext, as every process of BLACS's system context
// calls gridinit); on a smaller communicator only 'A', and only when the
// grid covers it, since no communicator can be split out of it.
func (c *Context) makeScopes(size int) error {
	for _, s := range []byte{'A', 'R', 'C'} {
		c.scope[s] = fmpl.CommNull
	}
	in := c.myrow < c.nprow
	if c.comm != fmpl.CommWorld {
		if c.nprow*c.npcol == size {
			c.scope['A'] = c.comm
		}
		return nil
	}
	for _, s := range []struct {
		scope byte
		key   int
	}{{'A', 0}, {'R', c.myrow}, {'C', c.mycol}} {
		key := fmpl.NoKey
		if in {
			key = s.key
		}
		cm, err := c.w.CommCreate(key)
		if err != nil {
			return fmt.Errorf("blacs: scope %c: %w", s.scope, err)
		}
		c.scope[s.scope] = cm
	}
	return nil
}

// Coords is this process's place in the grid.
func (c *Context) Coords() (row, col int) { return c.myrow, c.mycol }

func (c *Context) rank(r, col int) (int, error) {
	if r < 0 || r >= c.nprow || col < 0 || col >= c.npcol {
		return 0, fmt.Errorf("grid (%d,%d) outside %dx%d: %w", r, col, c.nprow, c.npcol, ErrArgs)
	}
	return r*c.npcol + col, nil
}

// segs lists the column pieces a matrix send moves: column j, rows
// [lo, hi). General: every row; trapezoidal: BLACS's upper ('U') or lower
// ('L') trapezoid, with ('U' diag) or without ('N') leaving the diagonal
// out.
func segs(uplo, diag byte, m, n int) ([][3]int, error) {
	var s [][3]int
	for j := 0; j < n; j++ {
		lo, hi := 0, m
		switch uplo {
		case 'G':
		case 'U', 'u':
			hi = min(m, j+1)
			if diag == 'U' || diag == 'u' {
				hi = min(m, j)
			}
		case 'L', 'l':
			lo = j
			if diag == 'U' || diag == 'u' {
				lo = j + 1
			}
		default:
			return nil, fmt.Errorf("uplo %q: %w", uplo, ErrArgs)
		}
		if uplo != 'G' && diag != 'U' && diag != 'u' && diag != 'N' && diag != 'n' {
			return nil, fmt.Errorf("diag %q: %w", diag, ErrArgs)
		}
		if lo < hi {
			s = append(s, [3]int{j, lo, hi})
		}
	}
	return s, nil
}

func check[T Elem](m, n int, a []T, lda int) error {
	if m < 0 || n < 0 || lda < max(1, m) || n > 0 && m > 0 && len(a) < (n-1)*lda+m {
		return fmt.Errorf("m %d n %d lda %d, %d elements: %w", m, n, lda, len(a), ErrArgs)
	}
	return nil
}

func bytesOf[T Elem](a []T) []byte {
	if len(a) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), len(a)*int(unsafe.Sizeof(z)))
}

// GESD2D sends the m x n general matrix a to grid process (rdest, cdest).
func GESD2D[T Elem](c *Context, m, n int, a []T, lda, rdest, cdest int) error {
	return send(c, 'G', 'N', m, n, a, lda, rdest, cdest)
}

// GERV2D receives an m x n general matrix from (rsrc, csrc) into a.
func GERV2D[T Elem](c *Context, m, n int, a []T, lda, rsrc, csrc int) error {
	return recv(c, 'G', 'N', m, n, a, lda, rsrc, csrc)
}

// TRSD2D sends the trapezoid uplo ('U' or 'L') of a, its diagonal left
// out when diag is 'U' (unit), to (rdest, cdest).
func TRSD2D[T Elem](c *Context, uplo, diag byte, m, n int, a []T, lda, rdest, cdest int) error {
	return send(c, uplo, diag, m, n, a, lda, rdest, cdest)
}

// TRRV2D receives a trapezoid sent by TRSD2D into a; the rest of a is
// left as it was.
func TRRV2D[T Elem](c *Context, uplo, diag byte, m, n int, a []T, lda, rsrc, csrc int) error {
	return recv(c, uplo, diag, m, n, a, lda, rsrc, csrc)
}

// contiguous reports whether the pieces are one run of a.
func contiguous(s [][3]int, lda int) bool {
	for i := 1; i < len(s); i++ {
		p, q := s[i-1], s[i]
		if p[0]*lda+p[2] != q[0]*lda+q[1] {
			return false
		}
	}
	return true
}

// chunks splits the pieces (in elements) into runs that fit one pack
// buffer: both ends compute the same split.
func chunks(s [][3]int, per int) [][][3]int {
	var out [][][3]int
	var cur [][3]int
	room := per
	for _, g := range s {
		for g[1] < g[2] {
			if room == 0 {
				out, cur, room = append(out, cur), nil, per
			}
			k := min(room, g[2]-g[1])
			cur = append(cur, [3]int{g[0], g[1], g[1] + k})
			room -= k
			g[1] += k
		}
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func send[T Elem](c *Context, uplo, diag byte, m, n int, a []T, lda, rr, cc int) error {
	if err := check(m, n, a, lda); err != nil {
		return err
	}
	dst, err := c.rank(rr, cc)
	if err != nil {
		return err
	}
	s, err := segs(uplo, diag, m, n)
	if err != nil || len(s) == 0 {
		return err
	}
	if contiguous(s, lda) {
		first, last := s[0][0]*lda+s[0][1], s[len(s)-1][0]*lda+s[len(s)-1][2]
		return c.w.Send(bytesOf(a[first:last]), dst, c.idx, c.comm)
	}
	var z T
	es := int(unsafe.Sizeof(z))
	ch := chunks(s, len(c.buf[0])/es)
	busy := [2]bool{}
	for k, pieces := range ch {
		b := k % 2
		if busy[b] {
			if err := c.w.IsendWait(dst, c.idx+b, c.comm); err != nil {
				return err
			}
		}
		off := 0
		for _, g := range pieces {
			off += copy(c.buf[b][off:], bytesOf(a[g[0]*lda+g[1]:g[0]*lda+g[2]]))
		}
		if err := c.w.Isend(c.buf[b][:off], dst, c.idx+b, c.comm); err != nil {
			return err
		}
		busy[b] = true
	}
	for b := range busy {
		if busy[b] {
			if err := c.w.IsendWait(dst, c.idx+b, c.comm); err != nil {
				return err
			}
		}
	}
	return nil
}

func recv[T Elem](c *Context, uplo, diag byte, m, n int, a []T, lda, rr, cc int) error {
	if err := check(m, n, a, lda); err != nil {
		return err
	}
	src, err := c.rank(rr, cc)
	if err != nil {
		return err
	}
	s, err := segs(uplo, diag, m, n)
	if err != nil || len(s) == 0 {
		return err
	}
	if contiguous(s, lda) {
		first, last := s[0][0]*lda+s[0][1], s[len(s)-1][0]*lda+s[len(s)-1][2]
		_, err := c.w.Recv(bytesOf(a[first:last]), src, c.idx, c.comm)
		return err
	}
	var z T
	es := int(unsafe.Sizeof(z))
	ch := chunks(s, len(c.buf[0])/es)
	size := func(p [][3]int) int {
		t := 0
		for _, g := range p {
			t += (g[2] - g[1]) * es
		}
		return t
	}
	// Two receives ahead: the sender's next piece lands while this one
	// is unpacked.
	for k := 0; k < min(2, len(ch)); k++ {
		if err := c.w.Irecv(c.buf[k][:size(ch[k])], src, c.idx+k, c.comm); err != nil {
			return err
		}
	}
	for k, pieces := range ch {
		b := k % 2
		if _, err := c.w.IrecvWait(src, c.idx+b, c.comm); err != nil {
			return err
		}
		off := 0
		for _, g := range pieces {
			off += copy(bytesOf(a[g[0]*lda+g[1]:g[0]*lda+g[2]]), c.buf[b][off:])
		}
		if k+2 < len(ch) {
			if err := c.w.Irecv(c.buf[b][:size(ch[k+2])], src, c.idx+b, c.comm); err != nil {
				return err
			}
		}
	}
	return nil
}

// ErrScope reports a broadcast scope that is not 'A', 'R' or 'C', or one
// the context has no communicator for (a context on a communicator other
// than CommWorld has only 'A', and only when its grid covers it).
var ErrScope = errors.New("blacs: no such broadcast scope")

// GEBS2D broadcasts the m x n general matrix a to every other process of
// scope ('A' the grid, 'R' this process's row, 'C' its column); they call
// GEBR2D. It runs on FMPL's broadcast (the binomial tree, FMPL(SW)), so
// BLACS's topology argument has no counterpart here: every broadcast takes
// the tree. A contiguous matrix goes as it is (zero copy in link memory);
// anything else is packed piece by piece through a link-memory buffer.
func GEBS2D[T Elem](c *Context, scope byte, m, n int, a []T, lda int) error {
	cm, err := c.scopeComm(scope)
	if err != nil {
		return err
	}
	root, _ := c.w.CommRank(cm)
	return bcast(c, cm, root, true, m, n, a, lda)
}

// GEBR2D receives into a the m x n matrix that grid process (rsrc, csrc)
// broadcasts with GEBS2D over scope.
func GEBR2D[T Elem](c *Context, scope byte, m, n int, a []T, lda, rsrc, csrc int) error {
	cm, err := c.scopeComm(scope)
	if err != nil {
		return err
	}
	if _, err := c.rank(rsrc, csrc); err != nil {
		return err
	}
	var root int
	switch scope {
	case 'A':
		root = rsrc*c.npcol + csrc
	case 'R':
		if rsrc != c.myrow {
			return fmt.Errorf("row broadcast from (%d,%d) to row %d: %w", rsrc, csrc, c.myrow, ErrArgs)
		}
		root = csrc
	case 'C':
		if csrc != c.mycol {
			return fmt.Errorf("column broadcast from (%d,%d) to column %d: %w", rsrc, csrc, c.mycol, ErrArgs)
		}
		root = rsrc
	}
	return bcast(c, cm, root, false, m, n, a, lda)
}

func (c *Context) scopeComm(scope byte) (fmpl.Comm, error) {
	cm, ok := c.scope[scope]
	if !ok || cm == fmpl.CommNull {
		return fmpl.CommNull, fmt.Errorf("scope %q: %w", scope, ErrScope)
	}
	return cm, nil
}

func bcast[T Elem](c *Context, cm fmpl.Comm, root int, sender bool, m, n int, a []T, lda int) error {
	if err := check(m, n, a, lda); err != nil {
		return err
	}
	if m == 0 || n == 0 {
		return nil
	}
	if lda == m || n == 1 {
		return c.w.Bcast(bytesOf(a[:(n-1)*lda+m]), root, cm)
	}
	s, _ := segs('G', 'N', m, n)
	var z T
	es := int(unsafe.Sizeof(z))
	buf := c.buf[0]
	for _, pieces := range chunks(s, len(buf)/es) {
		off := 0
		for _, g := range pieces {
			if sender {
				copy(buf[off:], bytesOf(a[g[0]*lda+g[1]:g[0]*lda+g[2]]))
			}
			off += (g[2] - g[1]) * es
		}
		if err := c.w.Bcast(buf[:off], root, cm); err != nil {
			return err
		}
		if sender {
			continue
		}
		off = 0
		for _, g := range pieces {
			off += copy(bytesOf(a[g[0]*lda+g[1]:g[0]*lda+g[2]]), buf[off:])
		}
	}
	return nil
}
