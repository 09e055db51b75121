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
	c := &Context{w: w, comm: comm, nprow: nprow, npcol: npcol, myrow: me / npcol, mycol: me % npcol, idx: o.Index}
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
