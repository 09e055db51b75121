package acp_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/dimmnet/dimmnet/driver/acp"
)

// TestBadInputNamedErrors: every refusal names its cause and leaves the
// target's memory as it was.
func TestBadInputNamedErrors(t *testing.T) {
	inProcess(t, 2, func(c *acp.ACP) error {
		me := c.Rank()
		other := 1 - me
		st := c.StarterGA(me)
		sm, err := c.QueryAddress(st)
		if err != nil {
			return err
		}
		for i := range sm {
			sm[i] = 0xa5
		}
		if err := c.Sync(); err != nil {
			return err
		}
		sp := c.Split()
		unregistered := sp.GA(other, 0, 7, 0)
		check := func(what string, err, want error) error {
			if !errors.Is(err, want) {
				return fmt.Errorf("%s: %v, want %v", what, err, want)
			}
			return nil
		}
		_, err = c.Copy(sp.GA(5, 0, 1, 0), st, 8, acp.HandleNull)
		if e := check("rank out of range", err, acp.ErrRank); e != nil {
			return e
		}
		_, err = c.Copy(sp.GA(me, 0, 7, 0), st, 8, acp.HandleNull)
		if e := check("own unregistered segment", err, acp.ErrUnregistered); e != nil {
			return e
		}
		_, err = c.Copy(acp.GANull, st, 8, acp.HandleNull)
		if e := check("GA_NULL", err, acp.ErrUnregistered); e != nil {
			return e
		}
		// A remote unregistered segment and a range past the end of the
		// remote starter memory: the owner's table refuses them.
		h, err := c.Copy(unregistered, st, 8, acp.HandleNull)
		if err != nil {
			return err
		}
		if e := check("remote unregistered segment", c.Complete(h), acp.ErrUnregistered); e != nil {
			return e
		}
		h, err = c.Copy(c.StarterGA(other)+acp.DefaultStarterSize-8, st, 16, acp.HandleNull)
		if err != nil {
			return err
		}
		if e := check("past the starter memory", c.Complete(h), acp.ErrUnregistered); e != nil {
			return e
		}
		_, err = c.Add8(st, c.StarterGA(other)+4, 1, acp.HandleNull)
		if e := check("misaligned atomic", err, acp.ErrAlign); e != nil {
			return e
		}
		h, err = c.CAS8(st, unregistered, 0, 1, acp.HandleNull)
		if err != nil {
			return err
		}
		if e := check("delegated atomic on an unregistered word", c.Complete(h), acp.ErrUnregistered); e != nil {
			return e
		}
		if e := check("handle never issued", c.Complete(1<<40), acp.ErrHandle); e != nil {
			return e
		}
		if _, e := c.Inquire(1 << 40); check("inquire a handle never issued", e, acp.ErrHandle) != nil {
			return fmt.Errorf("inquire: %v", e)
		}
		_, err = c.RegisterMemory(make([]byte, 64), 0)
		if e := check("Go heap memory", err, acp.ErrNotLinkMem); e != nil {
			return e
		}
		if e := check("unknown key", c.UnregisterMemory(acp.Key(sp.GA(me, 0, 9, 0))), acp.ErrKey); e != nil {
			return e
		}
		// Reset with operations in flight: rank 0 posts copies and calls
		// Reset before they can complete (until once they have not: a
		// fast run may finish them first, which is no refusal to test).
		if err := c.Sync(); err != nil {
			return err
		}
		if me == 0 {
			refused := false
			for try := 0; try < 1000 && !refused; try++ {
				for range 16 {
					if _, err := c.Copy(c.StarterGA(other)+64, st, 8, acp.HandleNull); err != nil {
						return err
					}
				}
				err := c.Reset(0)
				refused = errors.Is(err, acp.ErrInFlight)
				if err != nil && !refused {
					return fmt.Errorf("reset in flight: %v", err)
				}
				if err := c.Complete(acp.HandleAll); err != nil {
					return err
				}
				if !refused {
					return nil // it reset: the peer must reset too, and this test ends
				}
			}
			if err := c.Sync(); err != nil {
				return err
			}
			return checkUntouched(sm, -1)
		}
		if err := c.Sync(); err != nil {
			return err
		}
		return checkUntouched(sm, 64)
	})
}

// checkUntouched checks that only the 8 bytes at ok (-1: none) of the
// starter memory changed from 0xa5.
func checkUntouched(sm []byte, ok int) error {
	for i, b := range sm {
		if b != 0xa5 && !(i >= ok && i < ok+8 && ok >= 0) {
			return fmt.Errorf("starter memory byte %d changed to %#x by a refused operation", i, b)
		}
	}
	return nil
}
