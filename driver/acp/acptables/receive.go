package acptables

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
)

// Kernels are the NPB kernels of the IPUSH paper's Table 1, with its k
// (partners of the process with the most) and its reduction percentage.
var Kernels = []struct {
	Name     string
	PaperK   int
	PaperPct float64
}{{"MG", 9, 76.6}, {"CG", 4, 92.2}, {"IS", 1, 98.4}, {"LU", 4, 92.2}, {"SP", 6, 89.1}, {"BT", 6, 89.1}}

// Phase is one communication step of a skeleton: the messages each rank
// sends, by destination.
type Phase [][]int

// Skeleton is the communication inside the timed region of kernel on p
// ranks (class A; p a power of 4 and a square), as phases of
// point-to-point messages. With collectives, MPI collectives are counted
// as the messages of their usual algorithms: allreduce by recursive
// doubling (partners rank XOR 2^i), alltoall(v) pairwise to every rank.
// Without, they are left out, as a trace of point-to-point calls shows.
func Skeleton(kernel string, p int, collectives bool) ([]Phase, error) {
	side := 1
	for side*side < p {
		side++
	}
	cube := 1
	for cube*cube*cube < p {
		cube++
	}
	if side*side != p {
		return nil, fmt.Errorf("skeleton of %s on %d ranks: not a square", kernel, p)
	}
	var ph []Phase
	add := func(f func(r int) []int) {
		x := make(Phase, p)
		for r := range p {
			for _, d := range f(r) {
				if d != r && d >= 0 && d < p {
					x[r] = append(x[r], d)
				}
			}
		}
		ph = append(ph, x)
	}
	allreduce := func() {
		for b := 1; b < p; b <<= 1 {
			add(func(r int) []int { return []int{r ^ b} })
		}
	}
	alltoall := func() {
		add(func(r int) []int {
			var d []int
			for i := range p {
				d = append(d, i)
			}
			return d
		})
	}
	switch kernel {
	case "MG":
		if cube*cube*cube != p {
			return nil, fmt.Errorf("MG on %d ranks: not a cube", p)
		}
		// A cube of processes; on level k a dimension has 2^k points. A
		// level with fewer points than processes along a dimension leaves
		// processes idle and the active ones exchange with the next
		// active one, step processes away (NPB's nbr at coarse levels).
		for k := 0; k <= 8; k++ {
			n := 1 << k
			step := 1
			if n < cube {
				step = cube / n
			}
			if step >= cube {
				continue
			}
			add(func(r int) []int {
				c := [3]int{r % cube, r / cube % cube, r / (cube * cube)}
				if c[0]%step != 0 || c[1]%step != 0 || c[2]%step != 0 {
					return nil
				}
				var d []int
				for dim := range 3 {
					for _, s := range []int{step, -step} {
						o := c
						o[dim] = (o[dim] + s + cube) % cube
						d = append(d, o[0]+cube*o[1]+cube*cube*o[2])
					}
				}
				return d
			})
		}
		if collectives {
			allreduce() // norm2u3
		}
	case "CG":
		// A side x side process grid: the row reduction exchanges with the
		// columns XOR 1, 2, 4..., then the transpose partner.
		for b := 1; b < side; b <<= 1 {
			add(func(r int) []int { return []int{r/side*side + (r%side ^ b)} })
		}
		add(func(r int) []int { return []int{r%side*side + r/side} })
	case "IS":
		// Only collectives in the timed region: allreduce of the bucket
		// sizes, alltoall and alltoallv of the keys.
		if collectives {
			allreduce()
			alltoall()
		}
	case "LU":
		// A side x side grid, not periodic: north, south, east, west.
		add(func(r int) []int {
			i, j := r%side, r/side
			var d []int
			if i > 0 {
				d = append(d, r-1)
			}
			if i < side-1 {
				d = append(d, r+1)
			}
			if j > 0 {
				d = append(d, r-side)
			}
			if j < side-1 {
				d = append(d, r+side)
			}
			return d
		})
		if collectives {
			allreduce() // l2norm
		}
	case "SP", "BT":
		// Multi-partition on side x side processes: each sweep direction
		// has a successor and a predecessor.
		for _, dir := range [][2]int{{1, 0}, {0, 1}, {1, 1}} {
			add(func(r int) []int {
				i, j := r%side, r/side
				s := (i+dir[0])%side + side*((j+dir[1])%side)
				q := (i-dir[0]+side)%side + side*((j-dir[1]+side)%side)
				return []int{s, q}
			})
		}
	default:
		return nil, fmt.Errorf("skeleton: no kernel %q", kernel)
	}
	return ph, nil
}

// Devices opens p drivers on p devices joined by one link (node ids 1..p)
// and returns them with a function that closes them all. The tables take
// it as a parameter so this package, beside the ACP library, never links
// the device model; acpbench.LocalDevices is the in-process one.
type Devices func(p int) (ds []*driver.Driver, closeAll func(), err error)

// Partners runs the phases on p devices from open: every message is an
// 8-byte PUSH, and a rank's partners are the ranks its device saw PUSHes
// from plus the ranks that saw PUSHes from it.
func Partners(open Devices, phases []Phase, p int) ([]int, error) {
	nodes := make([]uint16, p)
	for i := range nodes {
		nodes[i] = uint16(i + 1)
	}
	ds, closeAll, err := open(p)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	from := make([]map[int]bool, p)
	for i := range from {
		from[i] = map[int]bool{}
	}
	for _, ph := range phases {
		want := 0
		for r, dsts := range ph {
			for _, d := range dsts {
				for {
					_, err := ds[r].Push(nodes[d], 0, 64, 8, 0, 0)
					if !errors.Is(err, driver.ErrQueueFull) {
						if !driver.Posted(err) { // not rung is sent: its PUSH status counts
							return nil, err
						}
						break
					}
					ds[r].Progress()
				}
				want++
			}
		}
		for got := 0; got < want; {
			for r, d := range ds {
				d.Progress()
				for {
					s, ok := d.Poll()
					if !ok {
						break
					}
					switch s.Type {
					case uapi.StPUSH:
						from[r][int(s.SrcNode)-1] = true
						got++
					case uapi.StError:
						return nil, fmt.Errorf("rank %d: PUSH failed: %v", r, s.Err)
					}
				}
			}
		}
	}
	k := make([]int, p)
	for r := range p {
		set := map[int]bool{}
		for s := range from[r] {
			set[s] = true
		}
		for o := range p {
			if from[o][r] {
				set[o] = true
			}
		}
		k[r] = len(set)
	}
	return k, nil
}

// PrintReceiveArea runs every kernel's skeleton at p ranks, with and
// without collectives, and writes k (the maximum over ranks), the
// distribution and the reduction 1 - (k+1)/p beside the paper's.
func PrintReceiveArea(w io.Writer, open Devices, p int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "kernel\tpaper k\tpaper %%\t1-(k+1)/%d of paper k\tcollectives\tour k\tpartners: ranks\tour 1-(k+1)/%d\n", p, p)
	for _, kn := range Kernels {
		for _, coll := range []bool{false, true} {
			ph, err := Skeleton(kn.Name, p, coll)
			if err != nil {
				return err
			}
			k, err := Partners(open, ph, p)
			if err != nil {
				return fmt.Errorf("%s: %w", kn.Name, err)
			}
			dist := map[int]int{}
			for _, v := range k {
				dist[v]++
			}
			var keys []int
			for v := range dist {
				keys = append(keys, v)
			}
			sort.Ints(keys)
			var parts []string
			for _, v := range keys {
				parts = append(parts, fmt.Sprintf("%d:%d", v, dist[v]))
			}
			maxK := slices.Max(k)
			mode := "left out"
			if coll {
				mode = "counted"
			}
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%d\t%s\t%.1f\n", kn.Name, kn.PaperK, kn.PaperPct,
				100*(1-float64(kn.PaperK+1)/float64(p)), mode, maxK, strings.Join(parts, " "), 100*(1-float64(maxK+1)/float64(p)))
		}
	}
	return tw.Flush()
}
