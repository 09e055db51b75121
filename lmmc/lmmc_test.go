package lmmc

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/impair"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// pair starts two real devices (nodes 1 and 2) and an LMMC node on each.
func pair(t *testing.T, policy string, frames int) (*Node, *Node) {
	return pairOn(t, policy, frames, impair.Config{})
}

// pairOn is pair over a link with faults injected on both receive sides.
func pairOn(t *testing.T, policy string, frames int, fc impair.Config) (*Node, *Node) {
	t.Helper()
	hub := link.NewHub(vdev.DefaultHubPayload+wire.FrameOverhead, 256)
	l, err := vdev.NewLocalPorts(vdev.Config{}, []uint16{1, 2}, func(d *vdev.Device) (link.Port, error) {
		p, err := hub.Attach(d.MAC())
		if err != nil || !fc.Active() {
			return p, err
		}
		c := fc
		c.Seed += int64(d.Node())
		return impair.Wrap(p, c), nil
	})
	if err != nil {
		t.Fatalf("NewLocalPorts: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	var ns []*Node
	for _, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		n, err := Init(d, Config{Nodes: []uint16{1, 2}, FramesPerPeer: frames, Policy: policy})
		if err != nil {
			t.Fatalf("Init: %v", err)
		}
		t.Cleanup(func() { n.Close() })
		ns = append(ns, n)
	}
	return ns[0], ns[1]
}

func checkAll(t *testing.T, ns ...*Node) {
	t.Helper()
	for _, n := range ns {
		if err := n.Check(); err != nil {
			t.Fatalf("invariants: %v\n%v", err, n)
		}
	}
}

// checkPorts reads each port's page through r and compares it with what
// the test wrote there.
func checkPorts(t *testing.T, r *Process, ps uint64, want map[uint16][]byte) {
	t.Helper()
	got := make([]byte, ps)
	for port, exp := range want {
		if _, err := r.Read(uint64(port)*ps, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, exp) {
			t.Fatalf("port %d: content differs", port)
		}
	}
}

func quiesce(t *testing.T, a, b *Node) {
	t.Helper()
	for _, n := range []*Node{a, b} {
		if err := n.Flush(); err != nil {
			t.Fatalf("flush: %v", err)
		}
	}
	checkAll(t, a, b)
	if err := CheckPair(a, b); err != nil {
		t.Fatal(err)
	}
	if err := CheckPair(b, a); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*Node{a, b} {
		if m := n.Driver().Counter(uapi.CtrMisplaced); m != 0 {
			t.Fatalf("node %d: MISPLACED %d", n.self, m)
		}
		if s := n.Stats(); s.BadTag != 0 || s.Errors != 0 {
			t.Fatalf("node %d: errors %+v", n.self, s)
		}
	}
}

func TestWriteReadPaging(t *testing.T) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, b := pair(t, pol, 2)
			ps := a.PageSize()
			w, r := a.NewProcess("w"), b.NewProcess("r")
			const ports = 5
			for port := uint16(1); port <= ports; port++ {
				if err := w.MapSend(uint64(port)*ps, 2, port); err != nil {
					t.Fatal(err)
				}
				if err := r.MapRecv(uint64(port)*ps, 1, port); err != nil {
					t.Fatal(err)
				}
			}
			want := map[uint16][]byte{}
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range 200 {
				port := uint16(1 + rng.IntN(ports))
				if want[port] == nil {
					want[port] = make([]byte, ps)
				}
				off := rng.IntN(int(ps) - 1)
				n := 1 + rng.IntN(min(300, int(ps)-off))
				data := make([]byte, n)
				for j := range data {
					data[j] = byte(rng.Uint32())
				}
				copy(want[port][off:], data)
				if err := w.Write(uint64(port)*ps+uint64(off), data); err != nil {
					t.Fatal(err)
				}
				checkAll(t, a, b)
				if i%20 == 0 {
					quiesce(t, a, b)
				}
			}
			quiesce(t, a, b)
			checkPorts(t, r, ps, want)
			if s := a.Stats(); s.Faults == 0 || b.Stats().PagesOut == 0 {
				t.Fatalf("no paging happened: %+v %+v", s, b.Stats())
			}
			t.Log(b)
		})
	}
}

func TestCrossPageWrite(t *testing.T) {
	a, b := pair(t, "lru", 2)
	ps := a.PageSize()
	w, r := a.NewProcess("w"), b.NewProcess("r")
	for i, port := range []uint16{7, 9, 11} { // three pages, three ports, two frames
		if err := w.MapSend(uint64(i)*ps, 2, port); err != nil {
			t.Fatal(err)
		}
		if err := r.MapRecv(uint64(i)*ps, 1, port); err != nil {
			t.Fatal(err)
		}
	}
	data := make([]byte, 2*ps+100)
	for i := range data {
		data[i] = byte(i*13 + 1)
	}
	if err := w.Write(50, data); err != nil {
		t.Fatal(err)
	}
	quiesce(t, a, b)
	got := make([]byte, len(data))
	if _, err := r.Read(50, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("cross-page write differs")
	}
	if err := w.Write(0, []byte{1}); err != nil { // port 7 was paged out: read back from the saved copy, then paged in again
		t.Fatal(err)
	}
	if _, err := r.Read(3*ps, got[:1]); !errors.Is(err, ErrNotMapped) {
		t.Fatalf("read unmapped: %v", err)
	}
	if err := r.Write(0, []byte{1}); !errors.Is(err, ErrDirection) {
		t.Fatalf("write a receive page: %v", err)
	}
}

// TestRacingSharers: many processes share ports on both nodes, writing
// their own byte ranges of each port concurrently while paging runs (few
// frames, many ports); invariants are checked concurrently; at the end
// every byte written is read back on the receiver.
func TestRacingSharers(t *testing.T) { racingSharers(t, false, impair.Config{}) }

// TestRacingSharersLossy runs the racing sharers over a link that loses,
// duplicates and reorders frames: the device's retransmissions keep every
// write and every paging request in order, and MISPLACED stays 0.
func TestRacingSharersLossy(t *testing.T) {
	racingSharers(t, false, impair.Config{Loss: 0.05, Dup: 0.02, Reorder: 0.05, Seed: 7})
}

// TestRacingSharersBothWays runs the same with both nodes sending and
// paging at once. It needs the device to run PAGE_DONE ahead of
// transfers blocked on a full window (a held peer acknowledges nothing,
// so each node's PAGE_DONE can sit behind data the other holds).
func TestRacingSharersBothWays(t *testing.T) {
	racingSharers(t, true, impair.Config{}) // the device runs PAGE_DONE ahead of blocked transfers
}

func racingSharers(t *testing.T, bothWays bool, fc impair.Config) {
	for _, pol := range Policies {
		t.Run(pol, func(t *testing.T) {
			a, b := pairOn(t, pol, 3, fc)
			ps := int(a.PageSize())
			const ports, writers, readers = 16, 6, 2
			writes := 300
			if testing.Short() {
				writes = 60
			}
			region := ps / writers &^ 7
			type dir struct {
				from, to *Node
				peer     uint16
				want     [][]byte // per port
				ws       []*Process
				rs       []*Process
			}
			dirs := []*dir{{from: a, to: b, peer: 2}}
			if bothWays {
				dirs = append(dirs, &dir{from: b, to: a, peer: 1})
			}
			for _, d := range dirs {
				d.want = make([][]byte, ports+1)
				for port := 1; port <= ports; port++ {
					d.want[port] = make([]byte, ps)
				}
				for i := range writers {
					p := d.from.NewProcess(fmt.Sprintf("w%d", i))
					for port := uint16(1); port <= ports; port++ {
						if err := p.MapSend(uint64(port+uint16(i)*ports)*uint64(ps), d.peer, port); err != nil {
							t.Fatal(err)
						}
					}
					d.ws = append(d.ws, p)
				}
				for i := range readers {
					p := d.to.NewProcess(fmt.Sprintf("r%d", i))
					for port := uint16(1); port <= ports; port++ {
						if err := p.MapRecv(uint64(port+uint16(i)*ports)*uint64(ps), d.from.self, port); err != nil {
							t.Fatal(err)
						}
					}
					d.rs = append(d.rs, p)
				}
			}
			stop := make(chan struct{})
			var checker sync.WaitGroup
			var checkErr error
			checker.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					for _, n := range []*Node{a, b} {
						if err := n.Check(); err != nil && checkErr == nil {
							checkErr = err
						}
					}
				}
			})
			var wg sync.WaitGroup
			errc := make(chan error, 2*writers)
			for di, d := range dirs {
				for i, p := range d.ws {
					wg.Go(func() {
						rng := rand.New(rand.NewPCG(uint64(di), uint64(i)))
						for range writes {
							port := 1 + rng.IntN(ports)
							off := i*region + rng.IntN(region)
							n := 1 + rng.IntN(i*region+region-off)
							data := make([]byte, n)
							for j := range data {
								data[j] = byte(rng.Uint32())
							}
							copy(d.want[port][off:], data) // each writer owns its range
							if err := p.Write(uint64(port+i*ports)*uint64(ps)+uint64(off), data); err != nil {
								errc <- err
								return
							}
						}
					})
				}
			}
			wg.Wait()
			close(stop)
			checker.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			if checkErr != nil {
				t.Fatalf("invariants during the run: %v", checkErr)
			}
			quiesce(t, a, b)
			got := make([]byte, ps)
			for _, d := range dirs {
				for ri, r := range d.rs {
					for port := 1; port <= ports; port++ {
						if _, err := r.Read(uint64(port+ri*ports)*uint64(ps), got); err != nil {
							t.Fatal(err)
						}
						if i := firstDiff(got, d.want[port]); i >= 0 {
							t.Fatalf("node %d port %d byte %d: got %d want %d\n%v", d.to.self, port, i, got[i], d.want[port][i], d.to)
						}
					}
				}
			}
			sa, sb := a.Stats(), b.Stats()
			t.Logf("node 1: %+v\nnode 2: %+v", sa, sb)
			if sb.PagesOut+sa.PagesOut < 100 {
				t.Fatalf("too little paging: %d page-outs", sb.PagesOut+sa.PagesOut)
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// The tables are visible as files: one per table, fresh on every read.
func TestTablesMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	a, b := pair(t, "lru", 2)
	w := a.NewProcess("w")
	for port := uint16(1); port <= 3; port++ {
		if err := w.MapSend(uint64(port)*a.PageSize(), 2, port); err != nil {
			t.Fatal(err)
		}
	}
	r := b.NewProcess("r")
	for port := uint16(1); port <= 3; port++ {
		if err := r.MapRecv(uint64(port)*b.PageSize(), 1, port); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	srv, err := a.Mount(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Unmount() })
	for port := uint16(1); port <= 3; port++ { // three ports over two frames: it pages
		if err := w.Write(uint64(port)*a.PageSize(), []byte("hello!!!")); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range a.Tables() {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		if name != "stats" && string(got) != want {
			t.Fatalf("%s through FUSE:\n%s\nwant:\n%s", name, got, want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "stats")); !strings.Contains(string(got), "Faults:") {
		t.Fatalf("stats file: %q", got)
	}
}
