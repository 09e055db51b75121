package collective_test

import (
	"math/rand/v2"

	. "github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/vdev/fabric"
	"slices"
	"sort"
	"testing"
)

func layout16() Map { return Map{HostSwitch: fabric.Mesh("m", 2, 2, 4).HostSwitch} }

// The paper's 16-host examples (4.1.2, hosts 0-15 on switches 0-3).
func TestPaperExampleLists(t *testing.T) {
	l := layout16()
	so := []int{0, 2, 3, 1}
	cases := []struct {
		name      string
		got, want []int
	}{
		{"HIO", l.HIO(), seq(16)},
		{"SHO", l.SHO(so), []int{0, 8, 12, 4, 1, 9, 13, 5, 2, 10, 14, 6, 3, 11, 15, 7}},
		{"SCO", l.SCO(so), []int{0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 4, 5, 6, 7}},
		{"SHIO", l.SHIO(), []int{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}},
	}
	for _, c := range cases {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s = %v, paper %v", c.name, c.got, c.want)
		}
	}
	// 1SHO-3RO: SHO's one-per-switch head, then a permutation of the rest.
	one := l.OneSHO3RO(so, rand.New(rand.NewPCG(1, 2)))
	if !slices.Equal(one[:4], []int{0, 8, 12, 4}) {
		t.Errorf("1SHO-3RO head %v, paper 0,8,12,4", one[:4])
	}
	if !isPermutation(one, 16) {
		t.Errorf("1SHO-3RO %v is not a permutation", one)
	}
}

func isPermutation(l []int, n int) bool {
	s := append([]int(nil), l...)
	sort.Ints(s)
	return slices.Equal(s, seq(n))
}

func TestListsArePermutationsRootedAtZero(t *testing.T) {
	for _, name := range fabric.TopologyNames {
		topo, err := fabric.NewTopology(name)
		if err != nil {
			t.Fatal(err)
		}
		l := Map{HostSwitch: topo.HostSwitch}
		for _, o := range Orders {
			lists, err := l.Lists(o, 7, 10)
			if err != nil {
				t.Fatal(err)
			}
			if RandomOrders[o] != (len(lists) == 10) {
				t.Errorf("%s/%s: %d lists", name, o, len(lists))
			}
			for _, list := range lists {
				if list[0] != 0 || !isPermutation(list, topo.Hosts()) {
					t.Errorf("%s/%s: list %v", name, o, list)
				}
			}
		}
	}
}

// The paper's gather for list(0..15): 8..15 -> 0..7, then 4..7 -> 0..3,
// 2,3 -> 0,1, 1 -> 0; release the reverse (step k: i -> i+2^(k-1)).
func TestBinomialPairs(t *testing.T) {
	for i := 8; i < 16; i++ {
		if Parent(i) != i-8 {
			t.Fatalf("Parent(%d) = %d", i, Parent(i))
		}
	}
	for i, want := range map[int]int{4: 0, 7: 3, 2: 0, 3: 1, 1: 0} {
		if Parent(i) != want {
			t.Fatalf("Parent(%d) = %d, want %d", i, Parent(i), want)
		}
	}
	if c := Children(0, 16); !slices.Equal(c, []int{1, 2, 4, 8}) {
		t.Fatalf("Children(0) = %v", c)
	}
	if c := Children(1, 16); !slices.Equal(c, []int{3, 5, 9}) {
		t.Fatalf("Children(1) = %v", c)
	}
	if Steps(64) != 6 || Steps(16) != 4 || Steps(5+1) != 3 {
		t.Fatal("Steps")
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
