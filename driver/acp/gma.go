package acp

import (
	"fmt"

	"github.com/dimmnet/dimmnet/uapi"
)

// The global memory access calls check on the caller what the caller can
// know: ranks, segment 0, alignment, and the whole range when it is this
// rank's. A remote range is checked against its owner's registration
// table by the communication goroutine; that failure comes from Complete.
// Either way nothing is written to the target.

// Copy copies size bytes from src to dst, two global addresses of any
// ranks (acp_copy), once every operation up to order has completed
// (HandleNull: at once; HandleCont: after the previous call). When the
// caller owns neither, the copy is delegated to dst's owner, which pulls
// the data in: a PULL completes where the data lands, so the delegate
// knows the copy is done without a third message, and the side that may
// be misaligned is its own.
func (c *ACP) Copy(dst, src GA, size uint64, order Handle) (Handle, error) {
	if err := c.checkGA(dst, size); err != nil {
		return HandleNull, fmt.Errorf("acp copy to %#x: %w", uint64(dst), err)
	}
	if err := c.checkGA(src, size); err != nil {
		return HandleNull, fmt.Errorf("acp copy from %#x: %w", uint64(src), err)
	}
	if size > uapi.MaxXfer {
		return HandleNull, fmt.Errorf("acp copy of %d bytes (at most %d): %w", size, uapi.MaxXfer, ErrSize)
	}
	if err := c.checkOrder(order); err != nil {
		return HandleNull, err
	}
	return c.enqueue(cmd{kind: kCopy, dst: dst, src: src, size: size, order: order})
}

func (c *ACP) checkOrder(order Handle) error {
	if order != HandleNull && order != HandleCont && (order < 0 || int64(order) > c.tail.Load()) {
		return fmt.Errorf("acp order %d (issued %d): %w", order, c.tail.Load(), ErrHandle)
	}
	return nil
}

// checkGA checks what the caller can of [g, g+n).
func (c *ACP) checkGA(g GA, n uint64) error {
	rank, _, seg, _ := c.split.Parts(g)
	if rank >= c.o.Procs {
		return fmt.Errorf("rank %d of %d: %w", rank, c.o.Procs, ErrRank)
	}
	if seg == 0 {
		return fmt.Errorf("segment 0: %w", ErrUnregistered)
	}
	if rank == c.Rank() {
		_, _, err := c.local(g, n)
		return err
	}
	return nil
}

// atomic enqueues one atomic: the word at src is operated on, its old
// value goes to dst (acp.h's convention). acp.h asks dst to be the
// caller's; any rank's is accepted here, as the paper's Fig. 2 does.
func (c *ACP) atomic(op, width uint8, dst, src GA, a, b uint64, order Handle) (Handle, error) {
	for _, g := range []GA{dst, src} {
		if err := c.checkGA(g, uint64(width)); err != nil {
			return HandleNull, fmt.Errorf("acp atomic on %#x: %w", uint64(g), err)
		}
		if _, _, _, off := c.split.Parts(g); off%uint64(width) != 0 {
			return HandleNull, fmt.Errorf("acp atomic%d on %#x: %w", width, uint64(g), ErrAlign)
		}
	}
	if err := c.checkOrder(order); err != nil {
		return HandleNull, err
	}
	return c.enqueue(cmd{kind: kAtomic, op: op, width: width, dst: dst, src: src, a: a, b: b, order: order})
}

// CAS4 compares the 4-byte word at src with oldval and, if equal, stores
// newval; the word's old value goes to dst (acp_cas4).
func (c *ACP) CAS4(dst, src GA, oldval, newval uint32, order Handle) (Handle, error) {
	return c.atomic(aopCAS, 4, dst, src, uint64(oldval), uint64(newval), order)
}

// CAS8 is CAS4 on 8-byte words (acp_cas8).
func (c *ACP) CAS8(dst, src GA, oldval, newval uint64, order Handle) (Handle, error) {
	return c.atomic(aopCAS, 8, dst, src, oldval, newval, order)
}

// Swap4 stores value at src; the old value goes to dst (acp_swap4).
func (c *ACP) Swap4(dst, src GA, value uint32, order Handle) (Handle, error) {
	return c.atomic(aopSwap, 4, dst, src, uint64(value), 0, order)
}

// Swap8 is Swap4 on 8-byte words (acp_swap8).
func (c *ACP) Swap8(dst, src GA, value uint64, order Handle) (Handle, error) {
	return c.atomic(aopSwap, 8, dst, src, value, 0, order)
}

// Add4 adds value to the word at src; the old value goes to dst (acp_add4).
func (c *ACP) Add4(dst, src GA, value uint32, order Handle) (Handle, error) {
	return c.atomic(aopAdd, 4, dst, src, uint64(value), 0, order)
}

// Add8 is Add4 on 8-byte words (acp_add8).
func (c *ACP) Add8(dst, src GA, value uint64, order Handle) (Handle, error) {
	return c.atomic(aopAdd, 8, dst, src, value, 0, order)
}

// And4 ands value into the word at src; the old value goes to dst (acp_and4).
func (c *ACP) And4(dst, src GA, value uint32, order Handle) (Handle, error) {
	return c.atomic(aopAnd, 4, dst, src, uint64(value), 0, order)
}

// And8 is And4 on 8-byte words (acp_and8).
func (c *ACP) And8(dst, src GA, value uint64, order Handle) (Handle, error) {
	return c.atomic(aopAnd, 8, dst, src, value, 0, order)
}

// Or4 ors value into the word at src; the old value goes to dst (acp_or4).
func (c *ACP) Or4(dst, src GA, value uint32, order Handle) (Handle, error) {
	return c.atomic(aopOr, 4, dst, src, uint64(value), 0, order)
}

// Or8 is Or4 on 8-byte words (acp_or8).
func (c *ACP) Or8(dst, src GA, value uint64, order Handle) (Handle, error) {
	return c.atomic(aopOr, 8, dst, src, value, 0, order)
}

// Xor4 xors value into the word at src; the old value goes to dst (acp_xor4).
func (c *ACP) Xor4(dst, src GA, value uint32, order Handle) (Handle, error) {
	return c.atomic(aopXor, 4, dst, src, uint64(value), 0, order)
}

// Xor8 is Xor4 on 8-byte words (acp_xor8).
func (c *ACP) Xor8(dst, src GA, value uint64, order Handle) (Handle, error) {
	return c.atomic(aopXor, 8, dst, src, value, 0, order)
}
