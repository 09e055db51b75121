package collective

import (
	"errors"
	"fmt"
	"math/rand/v2"
)

// ErrUnknownOrder is returned for an order name the package does not build.
var ErrUnknownOrder = errors.New("collective: unknown order")

// Orders are the paper's visiting orders, in its tables' row order.
var Orders = []string{"RO", "SHO", "SCO", "1SHO-3RO", "SHIO", "HIO"}

// RandomOrders are the orders with a random part: the paper averages
// each over 10 lists.
var RandomOrders = map[string]bool{"RO": true, "SHO": true, "SCO": true, "1SHO-3RO": true}

// Map is what the orders need to know of a fabric, as the fabric reports
// it: which switch each node hangs off. Node ranks are positions in
// HostSwitch; rank 0 is the root.
type Map struct {
	// HostSwitch is the switch of each node, by rank; ranks follow switch
	// ids (switch 0 holds the first ranks), as the paper's HIO and SHIO
	// assume.
	HostSwitch []int
	// Switches, if set, is how many switches a message from rank a to
	// rank b crosses; only reports use it.
	Switches func(a, b int) int
}

// switches lists, in id order, the switches with hosts, and per switch its
// hosts in id order.
func (l Map) switches() ([]int, map[int][]int) {
	per := map[int][]int{}
	var ss []int
	for h, s := range l.HostSwitch {
		if per[s] == nil {
			ss = append(ss, s)
		}
		per[s] = append(per[s], h)
	}
	for i := 1; i < len(ss); i++ {
		for j := i; j > 0 && ss[j] < ss[j-1]; j-- {
			ss[j], ss[j-1] = ss[j-1], ss[j]
		}
	}
	return ss, per
}

// SwitchOrder draws the random switch order SHO, SCO and 1SHO-3RO share:
// the root's switch first, the others shuffled.
func (l Map) SwitchOrder(rng *rand.Rand) []int {
	ss, _ := l.switches()
	root := l.HostSwitch[0]
	var rest []int
	for _, s := range ss {
		if s != root {
			rest = append(rest, s)
		}
	}
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return append([]int{root}, rest...)
}

// HIO visits hosts by id.
func (l Map) HIO() []int { return seq(0, len(l.HostSwitch)) }

// RO visits the root, then the other hosts in random order.
func (l Map) RO(rng *rand.Rand) []int {
	rest := seq(1, len(l.HostSwitch))
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return append([]int{0}, rest...)
}

// SHO visits, in switch order so, the first host of every switch, then
// the second of every switch, and so on: in a broadcast over the list the
// last steps stay inside switches.
func (l Map) SHO(so []int) []int {
	_, per := l.switches()
	var list []int
	for j := 0; ; j++ {
		n := len(list)
		for _, s := range so {
			if j < len(per[s]) {
				list = append(list, per[s][j])
			}
		}
		if len(list) == n {
			return list
		}
	}
}

// SCO visits the same switch order as SHO with each switch's hosts
// together, which makes the inter-switch steps carry one packet per host
// of a switch over the same cables at once: SHO made to contend.
func (l Map) SCO(so []int) []int {
	_, per := l.switches()
	var list []int
	for _, s := range so {
		list = append(list, per[s]...)
	}
	return list
}

// OneSHO3RO keeps SHO's first positions (one host per switch) and fills
// the rest with the remaining hosts in random order, isolating what SHO's
// in-switch last steps are worth.
func (l Map) OneSHO3RO(so []int, rng *rand.Rand) []int {
	sho := l.SHO(so)
	head := append([]int(nil), sho[:len(so)]...)
	rest := append([]int(nil), sho[len(so):]...)
	rng.Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return append(head, rest...)
}

// SHIO visits switches in id order, first host of each, then the second
// of each, and so on.
func (l Map) SHIO() []int {
	ss, _ := l.switches()
	return l.SHO(ss)
}

// Lists builds the visiting lists the paper averages for one order:
// ten for the random orders (drawn from seed; SHO, SCO and 1SHO-3RO share
// the same ten switch orders), one for HIO and SHIO.
func (l Map) Lists(order string, seed uint64, count int) ([][]int, error) {
	switch order {
	case "HIO":
		return [][]int{l.HIO()}, nil
	case "SHIO":
		return [][]int{l.SHIO()}, nil
	}
	if !RandomOrders[order] {
		return nil, fmt.Errorf("%w: %q (have %v)", ErrUnknownOrder, order, Orders)
	}
	var lists [][]int
	for i := 0; i < count; i++ {
		so := l.SwitchOrder(rand.New(rand.NewPCG(seed, uint64(i))))
		rng := rand.New(rand.NewPCG(seed, uint64(1000+i)))
		switch order {
		case "RO":
			lists = append(lists, l.RO(rng))
		case "SHO":
			lists = append(lists, l.SHO(so))
		case "SCO":
			lists = append(lists, l.SCO(so))
		case "1SHO-3RO":
			lists = append(lists, l.OneSHO3RO(so, rng))
		}
	}
	return lists, nil
}

// Parent is the position a position sends its gather message to, and
// receives its release from: position i pairs with i minus its highest set
// bit (4.1.2: the upper half sends to the lower half, then the upper
// quarter to the lower, until 1 sends to 0). -1 for the root.
func Parent(i int) int {
	if i == 0 {
		return -1
	}
	h := 1
	for h*2 <= i {
		h *= 2
	}
	return i - h
}

// Children lists, in release order (nearest first), the positions that
// send their gather message to position i and receive their release from
// it, in a list of n positions: i + 2^k for every 2^k > i.
func Children(i, n int) []int {
	var c []int
	h := 1
	for h <= i {
		h *= 2
	}
	for ; i+h < n; h *= 2 {
		c = append(c, i+h)
	}
	return c
}

// Binomial is the tree of Parent and Children as a value, the shape the
// fabric model times barriers and multicasts along (it satisfies
// fabric.Tree without this package importing the model).
type Binomial struct{}

// Parent is [Parent].
func (Binomial) Parent(pos int) int { return Parent(pos) }

// Children is [Children].
func (Binomial) Children(pos, n int) []int { return Children(pos, n) }

// Steps is the number of communication steps of one broadcast (or one
// gather) over n positions: ceil(log2(n)), so a multicast to d
// destinations takes ceil(log2(d+1)).
func Steps(n int) int {
	s := 0
	for 1<<s < n {
		s++
	}
	return s
}

func seq(a, b int) []int {
	var s []int
	for i := a; i < b; i++ {
		s = append(s, i)
	}
	return s
}
