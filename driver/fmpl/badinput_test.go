package fmpl_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/dimmnet/dimmnet/driver/fmpl"
)

// Bad input: each a named error on the ranks concerned, nothing written
// outside the caller's buffers, and no hang.
var badInputRanks = map[string]rank{
	"truncate": {run: func(w *fmpl.World) error {
		if w.Rank() == 0 {
			b := make([]byte, 100)
			return errIs(w.Send(b, 1, 0, fmpl.CommWorld), fmpl.ErrTruncated, "send into a small buffer")
		}
		big, err := w.Alloc(256)
		if err != nil {
			return err
		}
		for i := range big {
			big[i] = 0xee
		}
		_, err = w.Recv(big[:64], 0, 0, fmpl.CommWorld)
		if err := errIs(err, fmpl.ErrTruncated, "receive of a large message"); err != nil {
			return err
		}
		if !bytes.Equal(big, bytes.Repeat([]byte{0xee}, 256)) {
			return fmt.Errorf("a truncated message wrote into the buffer or past it")
		}
		return nil
	}},
	"inflight": {run: func(w *fmpl.World) error {
		b := make([]byte, 8)
		if w.Rank() == 1 {
			if err := w.Irecv(b, 0, 3, fmpl.CommWorld); err != nil {
				return err
			}
			if err := errIs(w.Irecv(b, 0, 3, fmpl.CommWorld), fmpl.ErrInFlight, "second Irecv on one index"); err != nil {
				return err
			}
			if err := errIs(w.Irecv(b, 0, 16, fmpl.CommWorld), fmpl.ErrIndex, "index past Count"); err != nil {
				return err
			}
			if err := errIs(w.Irecv(b, 1, 0, fmpl.CommWorld), fmpl.ErrRank, "receive from itself"); err != nil {
				return err
			}
			_, err := w.IrecvWait(0, 3, fmpl.CommWorld)
			return err
		}
		if err := w.Isend(b, 1, 3, fmpl.CommWorld); err != nil {
			return err
		}
		if err := errIs(w.Isend(b, 1, 3, fmpl.CommWorld), fmpl.ErrInFlight, "second Isend on one index"); err != nil {
			return err
		}
		if err := w.IsendWait(1, 3, fmpl.CommWorld); err != nil {
			return err
		}
		return errIs(w.IsendWait(1, 3, fmpl.CommWorld), fmpl.ErrNoPending, "wait for nothing")
	}},
	"deadrank": {noFinalize: true, run: func(w *fmpl.World) error {
		if err := w.Barrier(fmpl.CommWorld); err != nil { // a job under way, then a rank dies
			return err
		}
		if w.Rank() == 1 {
			os.Exit(0) // gone without a word, as a crashed rank
		}
		_, err := w.Recv(make([]byte, 8), 1, 0, fmpl.CommWorld)
		if err := errIs(err, fmpl.ErrPeerDead, "receive from a rank that exited"); err != nil {
			return err
		}
		return errIs(w.Send(make([]byte, 8), 1, 1, fmpl.CommWorld), fmpl.ErrPeerDead, "send to a rank that exited")
	}},
	"commkey": {run: func(w *fmpl.World) error {
		key := 0
		if w.Rank() == 2 {
			key = -7
		}
		c, err := w.CommCreate(key)
		if err := errIs(err, fmpl.ErrCommKey, "CommCreate with a bad key on rank 2"); err != nil {
			return err
		}
		if c != fmpl.CommNull {
			return fmt.Errorf("a failed CommCreate returned communicator %d", c)
		}
		return nil
	}},
	"panicop": {run: func(w *fmpl.World) error {
		op := fmpl.UserOp("boom", 4, func(io, in []byte) {
			if w.Rank() == 2 { // rank 2 combines rank 3's part in a tree of 4
				panic("user function fails on rank 2")
			}
			copy(io, in)
		})
		b, work := make([]byte, 12), make([]byte, 12)
		return errIs(w.Allreduce(b, 3, op, fmpl.CommWorld, work), fmpl.ErrUserOp, "allreduce whose function panics on one rank")
	}},
}

func TestBadInputTruncation(t *testing.T) { mustContain(t, runRanks(t, 2, "truncate"), "ok") }
func TestBadInputInFlight(t *testing.T)   { mustContain(t, runRanks(t, 2, "inflight"), "ok") }
func TestBadInputCommKeys(t *testing.T)   { mustContain(t, runRanks(t, 3, "commkey"), "ok") }
func TestBadInputPanickingOp(t *testing.T) {
	mustContain(t, runRanks(t, 4, "panicop"), "ok")
}

func TestBadInputDeadRank(t *testing.T) {
	outs, errs := startRanks(t, 2, "deadrank")
	if errs[0] != nil {
		t.Fatalf("rank 0: %v\n%s", errs[0], outs[0])
	}
	mustContain(t, outs[:1], "ok")
}
