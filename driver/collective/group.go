package collective

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dimmnet/dimmnet/driver"
)

// Group is every rank's Comm of one process (ranks on devices this process
// drives), for running and timing collectives from one place: the
// measuring tool and the tests.
type Group struct {
	Comms []*Comm
	Map   Map
}

// NewGroup makes one Comm per driver, rank i on drvs[i].
func NewGroup(drvs []*driver.Driver, m Map, opts Options) (*Group, error) {
	nodes := make([]uint16, len(drvs))
	for i, d := range drvs {
		nodes[i] = d.Node()
	}
	g := &Group{Map: m}
	for i, d := range drvs {
		c, err := New(d, i, nodes, opts)
		if err != nil {
			return nil, err
		}
		g.Comms = append(g.Comms, c)
	}
	return g, nil
}

// Run runs script on every rank at once, one goroutine each, and returns
// the first rank's failure (not the time-outs it caused elsewhere).
func (g *Group) Run(script func(c *Comm) error) error {
	var wg sync.WaitGroup
	errs := make([]error, len(g.Comms))
	for i := range g.Comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = script(g.Comms[i])
		}()
	}
	wg.Wait()
	for _, e := range errs {
		if e != nil && !errors.Is(e, driver.ErrTimeout) {
			return e
		}
	}
	return errors.Join(errs...)
}

// TimeBarriers runs count barriers over list back to back (after one
// untimed) and returns the mean time per barrier, as the paper measured.
func (g *Group) TimeBarriers(list []int, count int) (time.Duration, error) {
	var start time.Time
	var end time.Time
	var mu sync.Mutex
	err := g.Run(func(c *Comm) error {
		if err := c.Barrier(list); err != nil {
			return err
		}
		if c.rank == list[0] {
			start = time.Now()
		}
		for i := 0; i < count; i++ {
			if err := c.Barrier(list); err != nil {
				return err
			}
		}
		t := time.Now()
		mu.Lock()
		if t.After(end) {
			end = t
		}
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, err
	}
	return end.Sub(start) / time.Duration(count), nil
}

// TimeMulticasts runs count multicasts of n bytes over list (a barrier
// between them, untimed) and returns the mean time from the root's start
// to the last destination's receipt: one process, one clock.
func (g *Group) TimeMulticasts(list []int, n uint32, count int) (time.Duration, error) {
	in := map[int]bool{}
	for _, r := range list {
		in[r] = true
	}
	all := make([]int, len(g.Comms))
	for i := range all {
		all[i] = i
	}
	starts := make([]time.Time, count)
	lasts := make([]time.Time, count)
	var mu sync.Mutex
	err := g.Run(func(c *Comm) error {
		for i := 0; i < count; i++ {
			if err := c.Barrier(all); err != nil {
				return err
			}
			if !in[c.rank] {
				c.Skip()
				continue
			}
			if c.rank == list[0] {
				starts[i] = time.Now()
			}
			if err := c.Multicast(list, n); err != nil {
				return err
			}
			if c.rank != list[0] {
				t := c.got
				mu.Lock()
				if t.After(lasts[i]) {
					lasts[i] = t
				}
				mu.Unlock()
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for i := range starts {
		sum += lasts[i].Sub(starts[i])
	}
	return sum / time.Duration(count), nil
}

// AllToAllRate runs rounds all-to-alls and returns messages per second
// over the whole group.
func (g *Group) AllToAllRate(rounds int) (float64, error) {
	t0 := time.Now()
	err := g.Run(func(c *Comm) error {
		for i := 0; i < rounds; i++ {
			if err := c.AllToAll(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("all-to-all: %w", err)
	}
	n := len(g.Comms)
	return float64(rounds*n*(n-1)) / time.Since(t0).Seconds(), nil
}

// engineServed hides a device's Runner methods from the driver.
type engineServed struct{ driver.LocalDevice }

// EngineServed attaches to an in-process device the way a process with
// many more devices than cores should: its process's one engine serves
// it, instead of the goroutine that waits on it running it (the driver's
// default, run to completion, the fastest for a pair). With 64 ranks on 2
// cores, run to completion makes each device's frames wait for its own
// goroutine's turn: the all-to-all benchmark measures 64 devices at about
// half the pair's aggregate rate with run to completion and at 60-90%
// engine-served.
func EngineServed(dev driver.LocalDevice) driver.Attachment {
	return driver.InProcessDevice(engineServed{dev})
}
