package pingpong

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/internal/cpubind"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/internal/release"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"golang.org/x/sys/unix"
)

// ModeRaw marks a record measured without any device: the floor a
// cross-process run is judged against, taken in the same run on the same
// machine, because on a shared 2-core VM the floor moves from day to day.
const ModeRaw = "raw"

// The raw baselines' conditions, as the --json records name them. Each
// moves 8 bytes (one word) from one process to another and back.
const (
	// CondWord is two processes spinning on one word each in a shared
	// mapping: a cache-line transfer per hand-off, the least any
	// shared-memory link between two processes can cost. Each word is
	// published as the ring publishes a slot, with a release store
	// (release.Store, a plain MOV on amd64), not a locked one that waits
	// for the line to come back.
	CondWord = "word"
	// CondMemcpy is copying a buffer within one process's shared mapping
	// (MB/s, no RTT): the ceiling for moving link memory, which the
	// shared-memory link copies into a ring and out of it again.
	CondMemcpy = "memcpy"
	// CondHandoffSpin goes A -> relay -> B -> relay -> A with all three
	// processes spinning: a device model in a process of its own is such a
	// relay. Three spinners on two cores wait for the scheduler's slice.
	CondHandoffSpin = "handoff_spin"
	// CondHandoffYield is the same hand-off, each waiter calling
	// sched_yield between looks, so a waiting process gives its core to
	// the one that has work.
	CondHandoffYield = "handoff_yield"
	// CondHandoffEventfd is the same hand-off, each waiter blocking on an
	// eventfd the previous hop signals: every hop is a process wake-up.
	CondHandoffEventfd = "handoff_eventfd"
	// CondUDP is a UDP ping-pong over loopback between two processes
	// blocking in recv: what the kernel's own path costs.
	CondUDP = "udp"
)

// RawConditions are the raw baselines in the order RawBaselines measures
// them.
var RawConditions = []string{CondWord, CondHandoffSpin, CondHandoffYield, CondHandoffEventfd, CondUDP}

// HandoffConditions are the three-process hand-offs; the smallest median
// among them is the hand-off limit (HandoffLimit).
var HandoffConditions = []string{CondHandoffSpin, CondHandoffYield, CondHandoffEventfd}

var (
	// ErrRawChild reports that a raw baseline's child process exited
	// before it was told to, or failed.
	ErrRawChild = errors.New("pingpong: a raw baseline's child process failed")
	// ErrRawStuck reports a raw baseline that did not finish within its
	// hard limit: a hand-off that never came back.
	ErrRawStuck = errors.New("pingpong: a raw baseline's round trip did not come back")
	// ErrUnknownRaw reports a condition RawBaseline does not know.
	ErrUnknownRaw = errors.New("pingpong: unknown raw baseline")
)

// The children's roles (subproc): an echo process moves a word from one
// slot of the shared page to another, hop after hop; a UDP echo sends
// back what it receives.
const (
	roleEcho    = "pingpong-raw-echo"
	roleUDPEcho = "pingpong-raw-udp"
)

func init() {
	subproc.Register(roleEcho, rawEcho)
	subproc.Register(roleUDPEcho, rawUDPEcho)
}

// The shared page: one word per 128-byte slot, so no two writers share a
// cache line (nor the adjacent line a prefetcher pulls in with it).
const (
	slotReady = iota // children count themselves in
	slotA2R          // A's ping (the word ping-pong's only ping)
	slotR2B
	slotB2R
	slotR2A // A's pong
)

const (
	slotBytes = 128
	pageBytes = 4096
	// stopWord, stored in place of the next value, makes every echo
	// process pass it on and exit.
	stopWord = ^uint64(0)
)

// A child's descriptors (ExtraFiles start at 3).
const (
	fdMem     = 3
	fdEvRelay = 4 // the relay waits on this (from A and from B)
	fdEvB     = 5
	fdEvA     = 6
	fdUDP     = 3
)

// How a waiter waits for a word to change.
const (
	waitSpin    = "spin"
	waitYield   = "yield"
	waitEventfd = "eventfd"
)

// Per-baseline bounds: untimed warm-up round trips, and at most this many
// timed ones (fewer when the time budget ends first).
var rawBounds = map[string]struct{ warm, max int }{
	CondWord:           {1000, 500000},
	CondHandoffSpin:    {5, 300}, // milliseconds each: the scheduler's slice
	CondHandoffYield:   {200, 100000},
	CondHandoffEventfd: {200, 100000},
	CondUDP:            {200, 100000},
}

// RawBaselines measures every raw baseline (RawConditions), each for about
// budget (a few hundred round trips of the slowest, fewer when budget
// ends first), and reports each as a record of size 8 with mode "raw".
// With bind, the processes of each baseline that fit the CPUs this
// process may use run bound one to a CPU (see RawBaseline), as a device
// run bound the same way must be judged. progress, if not nil, is told
// which one runs.
func RawBaselines(budget time.Duration, bind bool, progress func(string)) ([]Result, error) {
	var res []Result
	for i, c := range RawConditions {
		if progress != nil {
			progress(fmt.Sprintf("raw baseline %d/%d: %s", i+1, len(RawConditions), c))
		}
		r, err := RawBaseline(c, budget, bind)
		if err != nil {
			return nil, err
		}
		res = append(res, r)
	}
	return res, nil
}

// RawBaseline measures one raw baseline (see the Cond constants) with real
// processes: this executable started again as the other ends (subproc, so
// a test binary must call subproc.Main in TestMain). The children die with
// this process and are reaped before it returns, error or not.
//
// With bind, and when the baseline's processes (this one and its
// children: two for the word and UDP ping-pongs, three for the
// hand-offs) fit the CPUs this process may use, each runs bound to one of
// them, this process to the first (cpubind.CPUs); this process gets its
// CPUs back before it returns, and every child is bound from its start
// alone. The record's Bound says which it was.
func RawBaseline(cond string, budget time.Duration, bind bool) (Result, error) {
	var r Result
	var err error
	switch cond {
	case CondWord:
		r, err = shmBaseline(cond, waitSpin, budget, bind, [][]hop{{{slotA2R, slotR2A, -1, -1}}})
	case CondHandoffSpin, CondHandoffYield, CondHandoffEventfd:
		wk := strings.TrimPrefix(cond, "handoff_")
		relay := []hop{{slotA2R, slotR2B, fdEvRelay, fdEvB}, {slotB2R, slotR2A, fdEvRelay, fdEvA}}
		b := []hop{{slotR2B, slotB2R, fdEvB, fdEvRelay}}
		r, err = shmBaseline(cond, wk, budget, bind, [][]hop{relay, b})
	case CondUDP:
		r, err = udpBaseline(budget) // never bound: see udpBaseline
	default:
		return Result{}, fmt.Errorf("%w: %q (want one of %s)", ErrUnknownRaw, cond, strings.Join(RawConditions, ", "))
	}
	if err != nil {
		return Result{}, fmt.Errorf("raw baseline %s: %w", cond, err)
	}
	return r, nil
}

// hop is one step of an echo process: wait for slot in to change, store
// the value in slot out (a release store, as every hand-off's: an
// eventfd's signal after it is a locked write in the kernel, so the word
// is visible before the waiter wakes). waitFD and sigFD are the eventfds it waits on
// and signals (eventfd waits only; -1 otherwise).
type hop struct{ in, out, waitFD, sigFD int }

func (h hop) String() string { return fmt.Sprintf("%d,%d,%d,%d", h.in, h.out, h.waitFD, h.sigFD) }

func parseHop(s string) (hop, error) {
	var h hop
	f := strings.Split(s, ",")
	if len(f) != 4 {
		return h, fmt.Errorf("hop %q: want IN,OUT,WAITFD,SIGFD", s)
	}
	v := make([]int, 4)
	for i := range f {
		n, err := strconv.Atoi(f[i])
		if err != nil {
			return h, fmt.Errorf("hop %q: %w", s, err)
		}
		v[i] = n
	}
	h = hop{v[0], v[1], v[2], v[3]}
	if h.in < 0 || h.in*slotBytes >= pageBytes || h.out < 0 || h.out*slotBytes >= pageBytes {
		return h, fmt.Errorf("hop %q: slot out of the page", s)
	}
	return h, nil
}

// word is slot i of a shared page.
func word(mem []byte, i int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[i*slotBytes])) }

// waitChange waits for *p to differ from prev and returns the new value.
// check runs every every-th look (a stop for a parent whose child died,
// a lost parent for a child); its error ends the wait.
func waitChange(p *uint64, prev uint64, wk string, fd int, every int, check func() error) (uint64, error) {
	var b [8]byte
	for n := 1; ; n++ {
		if v := atomic.LoadUint64(p); v != prev {
			return v, nil
		}
		switch wk {
		case waitYield:
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		case waitEventfd:
			if _, err := unix.Read(fd, b[:]); err != nil && !errors.Is(err, unix.EINTR) {
				return 0, fmt.Errorf("wait on eventfd: %w", err)
			}
		}
		if n%every == 0 {
			if err := check(); err != nil {
				return 0, err
			}
		}
	}
}

// signalFD adds 1 to eventfd fd.
func signalFD(fd int) error {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], 1)
	for {
		_, err := unix.Write(fd, b[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("signal eventfd: %w", err)
		}
		return nil
	}
}

// errOrphan ends a child whose parent is gone (Pdeathsig is the first
// line; this covers a parent that died before it took effect).
var errOrphan = errors.New("parent process gone")

// rawEcho is an echo process: args PPID WAIT HOP...; it maps the shared
// page (fd 3), counts itself ready, then performs its hops in turn until
// it sees stopWord, which it passes on.
func rawEcho(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("want PPID WAIT HOP..., got %q", args)
	}
	ppid, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("ppid %q: %w", args[0], err)
	}
	alive := func() error {
		if os.Getppid() != ppid {
			return errOrphan
		}
		return nil
	}
	if err := alive(); err != nil {
		return err
	}
	wk := args[1]
	if wk != waitSpin && wk != waitYield && wk != waitEventfd {
		return fmt.Errorf("wait %q: want spin, yield or eventfd", wk)
	}
	var hops []hop
	for _, s := range args[2:] {
		h, err := parseHop(s)
		if err != nil {
			return err
		}
		hops = append(hops, h)
	}
	mem, err := unix.Mmap(fdMem, 0, pageBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map the shared page: %w", err)
	}
	defer unix.Munmap(mem)
	prev := make([]uint64, len(hops)) // a fresh page is zero; a stop may be there already
	atomic.AddUint64(word(mem, slotReady), 1)
	for {
		for i, h := range hops {
			v, err := waitChange(word(mem, h.in), prev[i], wk, h.waitFD, 1<<12, alive)
			if err != nil {
				return err
			}
			release.Store(word(mem, h.out), v)
			if wk == waitEventfd {
				if err := signalFD(h.sigFD); err != nil {
					return err
				}
			}
			if v == stopWord {
				return nil
			}
			prev[i] = v
		}
	}
}

// family is a measurement's child processes: started dying with us, and
// all reaped (killed if need be) by end, whatever happened.
type family struct {
	kids    []*exec.Cmd
	waited  []chan error
	anyDone chan struct{} // closed when the first child exits
	once    sync.Once
}

func newFamily() *family { return &family{anyDone: make(chan struct{})} }

// start runs role with args as a new child holding files as fd 3, 4, ...,
// bound to CPU cpu alone if cpu >= 0.
func (f *family) start(role string, files []*os.File, cpu int, args ...string) error {
	c, err := subproc.Command(role, args...)
	if err != nil {
		return err
	}
	c.ExtraFiles = files
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cpu >= 0 {
		err = cpubind.Start(c, cpu)
	} else {
		err = c.Start()
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", role, err)
	}
	done := make(chan error, 1)
	f.kids = append(f.kids, c)
	f.waited = append(f.waited, done)
	go func() {
		err := c.Wait()
		f.once.Do(func() { close(f.anyDone) })
		done <- err
	}()
	return nil
}

// end waits up to grace for every child to exit, kills the rest, and
// reaps them all. It returns the first child's failure (ErrRawChild).
func (f *family) end(grace time.Duration) error {
	var first error
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for i, done := range f.waited {
		var err error
		select {
		case err = <-done:
		case <-deadline.C:
			f.killAll()
			err = <-done
			if err == nil {
				err = errors.New("did not stop when told")
			}
		}
		if err != nil && first == nil {
			first = fmt.Errorf("%w: %s: %w", ErrRawChild, f.kids[i].Args[len(f.kids[i].Args)-1], err)
		}
	}
	return first
}

func (f *family) killAll() {
	for _, c := range f.kids {
		if c.Process != nil {
			c.Process.Kill() // an exited child's kill is a no-op
		}
	}
}

// watchdog ends a measurement whose child died or that ran past limit: it
// sets the abort error and calls wake so a blocked wait looks at it. stop
// ends the watch.
func watchdog(f *family, limit time.Duration, abort *atomic.Pointer[error], wake func()) (stop func()) {
	quit := make(chan struct{})
	go func() {
		t := time.NewTimer(limit)
		defer t.Stop()
		var err error
		select {
		case <-quit:
			return
		case <-f.anyDone:
			err = fmt.Errorf("%w: exited in the middle of the measurement", ErrRawChild)
		case <-t.C:
			err = fmt.Errorf("%w (limit %v)", ErrRawStuck, limit)
		}
		abort.CompareAndSwap(nil, &err)
		wake()
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit) }) }
}

// testHookStarted, when set (tests only), runs once a baseline's children
// are started and watched and this process is bound (if it is).
var testHookStarted func(*family)

// bindFamily is the CPU of each process of a baseline of n (this one
// first), or nil to leave them unbound: without bind, or when they do not
// fit (cpubind.CPUs).
func bindFamily(bind bool, n int) ([]int, error) {
	if !bind {
		return nil, nil
	}
	allowed, err := cpubind.Allowed()
	if err != nil {
		return nil, err
	}
	return cpubind.CPUs(n, &allowed), nil
}

// kidCPU is the CPU of child i in cpus (bindFamily), -1 for unbound.
func kidCPU(cpus []int, i int) int {
	if cpus == nil {
		return -1
	}
	return cpus[1+i]
}

// pinSelf binds this process to its CPU in cpus (nil: does nothing); the
// Binding's Restore gives its CPUs back.
func pinSelf(cpus []int) (*cpubind.Binding, error) {
	if cpus == nil {
		return nil, nil
	}
	return cpubind.Pin(cpus[0])
}

// hardLimit is how long one raw baseline may take in all before it is
// called stuck: its budget twice over, and time for processes to start on
// a loaded machine.
func hardLimit(budget time.Duration) time.Duration { return 2*budget + 10*time.Second }

// shmBaseline runs a hand-off through a shared page: this process is A,
// writing slotA2R and waiting for slotR2A; kids are the echo processes'
// hops. Word and hand-off baselines differ only in their children.
func shmBaseline(cond, wk string, budget time.Duration, bind bool, kids [][]hop) (res Result, err error) {
	cpus, err := bindFamily(bind, 1+len(kids))
	if err != nil {
		return res, err
	}
	mfd, err := unix.MemfdCreate("dimmnet-raw", unix.MFD_CLOEXEC)
	if err != nil {
		return res, fmt.Errorf("memfd: %w", err)
	}
	memFile := os.NewFile(uintptr(mfd), "dimmnet-raw")
	defer memFile.Close()
	if err := unix.Ftruncate(mfd, pageBytes); err != nil {
		return res, fmt.Errorf("size the shared page: %w", err)
	}
	mem, err := unix.Mmap(mfd, 0, pageBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return res, fmt.Errorf("map the shared page: %w", err)
	}
	defer unix.Munmap(mem)
	files := []*os.File{memFile}
	evA := -1
	if wk == waitEventfd {
		for range 3 { // fdEvRelay, fdEvB, fdEvA
			fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC) // blocking: a waiter sleeps in read
			if err != nil {
				return res, fmt.Errorf("eventfd: %w", err)
			}
			ef := os.NewFile(uintptr(fd), "eventfd")
			defer ef.Close()
			files = append(files, ef)
		}
		evA = int(files[fdEvA-3].Fd())
	}
	f := newFamily()
	defer func() {
		// Tell the children to stop wherever each waits (a failed round
		// trip leaves the relay waiting for B), then reap them; a child's
		// failure is the measurement's.
		for _, s := range []int{slotA2R, slotR2B, slotB2R} {
			atomic.StoreUint64(word(mem, s), stopWord)
		}
		if wk == waitEventfd {
			signalFD(int(files[fdEvRelay-3].Fd()))
			signalFD(int(files[fdEvB-3].Fd()))
		}
		if cerr := f.end(5 * time.Second); cerr != nil {
			if err == nil {
				err = cerr
			} else {
				err = fmt.Errorf("%w; %w", err, cerr)
			}
		}
	}()
	for i, hops := range kids {
		args := []string{strconv.Itoa(os.Getpid()), wk}
		for _, h := range hops {
			args = append(args, h.String())
		}
		if err := f.start(roleEcho, files, kidCPU(cpus, i), args...); err != nil {
			return res, err
		}
	}
	// Bound after the children started, so none inherits our one CPU;
	// unbound (and the children told to stop) before we return.
	b, err := pinSelf(cpus)
	if err != nil {
		return res, err
	}
	defer func() {
		if rerr := b.Restore(); rerr != nil && err == nil {
			err = rerr // the next baseline would run on our one CPU
		}
	}()
	var abort atomic.Pointer[error]
	stopWatch := watchdog(f, hardLimit(budget), &abort, func() {
		if evA >= 0 {
			signalFD(evA) // wake our blocked read to see the abort
		}
	})
	defer stopWatch()
	if testHookStarted != nil {
		testHookStarted(f)
	}
	check := func() error {
		if e := abort.Load(); e != nil {
			return *e
		}
		return nil
	}
	for atomic.LoadUint64(word(mem, slotReady)) < uint64(len(kids)) {
		if err := check(); err != nil {
			return res, fmt.Errorf("waiting for the children to map the page: %w", err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	ping, pong := word(mem, slotA2R), word(mem, slotR2A)
	every := 1 << 10 // look at abort every so many spins, or at every wake-up
	if wk != waitSpin {
		every = 1
	}
	sigRelay := -1
	if wk == waitEventfd {
		sigRelay = int(files[fdEvRelay-3].Fd())
	}
	rt := func(i uint64) error {
		release.Store(ping, i)
		if sigRelay >= 0 {
			if err := signalFD(sigRelay); err != nil {
				return err
			}
		}
		v, err := waitChange(pong, i-1, wk, evA, every, check)
		if err != nil {
			return err
		}
		if v != i {
			return fmt.Errorf("sent %d, got %d back", i, v)
		}
		return nil
	}
	res, err = measureRaw(cond, budget, rt)
	res.Bound = cpus != nil
	return res, err
}

// measureRaw runs warm-up round trips (at most a tenth of budget), then
// timed ones until the condition's count or budget is reached, and makes
// the record. rt does round trip number i (from 1).
func measureRaw(cond string, budget time.Duration, rt func(i uint64) error) (Result, error) {
	bd := rawBounds[cond]
	i := uint64(0)
	warmEnd := monotime.Now() + int64(budget/10)
	for n := 0; n < bd.warm && (n == 0 || monotime.Now() < warmEnd); n++ {
		i++
		if err := rt(i); err != nil {
			return Result{}, fmt.Errorf("warm-up round trip %d: %w", i, err)
		}
	}
	rtts := make([]int64, 0, bd.max)
	end := monotime.Now() + int64(budget)
	for len(rtts) < bd.max {
		i++
		t0 := monotime.Now()
		if err := rt(i); err != nil {
			return Result{}, fmt.Errorf("round trip %d: %w", i, err)
		}
		t1 := monotime.Now()
		rtts = append(rtts, t1-t0)
		if t1 >= end {
			break
		}
	}
	var sum int64
	for _, d := range rtts {
		sum += d
	}
	slices.Sort(rtts)
	half := float64(sum) / float64(len(rtts)) / 2 / 1e3
	return Result{Mode: ModeRaw, Condition: cond, Size: 8, RTTHalfUs: half, RTTHalfP50Us: float64(rtts[len(rtts)/2]) / 2 / 1e3,
		Tails: TailsOf(rtts), MBps: 8 / half, Iters: len(rtts), Path: "process"}, nil
}

// udpBaseline ping-pongs 8-byte datagrams with a child over loopback, both
// blocking in recv on plain sockets (no Go poller in the way). It is never
// bound: two processes that block cannot hold one core between them, which
// is all binding prevents, and bound ones ran 2.6-6x slower here (17-35 µs
// against 5.7-6.6: the sleeper is woken on its own, idle vCPU instead of
// on the sender's).
func udpBaseline(budget time.Duration) (res Result, err error) {
	var fds [2]int
	var socks [2]*os.File // they close the sockets, whichever way we return
	for i := range fds {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return res, fmt.Errorf("udp socket: %w", err)
		}
		socks[i] = os.NewFile(uintptr(fd), "udp")
		defer socks[i].Close()
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return res, fmt.Errorf("udp bind: %w", err)
		}
		fds[i] = fd
	}
	for i := range fds {
		other, err := unix.Getsockname(fds[1-i])
		if err != nil {
			return res, fmt.Errorf("udp address: %w", err)
		}
		if err := unix.Connect(fds[i], other); err != nil {
			return res, fmt.Errorf("udp connect: %w", err)
		}
	}
	me := fds[0]
	setTimeout := func(d time.Duration) error {
		tv := unix.NsecToTimeval(d.Nanoseconds())
		if err := unix.SetsockoptTimeval(me, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("udp receive timeout: %w", err)
		}
		return nil
	}
	if err := setTimeout(10 * time.Second); err != nil { // the child's start
		return res, err
	}
	f := newFamily()
	defer func() {
		unix.Write(me, []byte{'s'}) // a 1-byte datagram: stop
		if cerr := f.end(5 * time.Second); cerr != nil {
			if err == nil {
				err = cerr
			} else {
				err = fmt.Errorf("%w; %w", err, cerr)
			}
		}
	}()
	if err := f.start(roleUDPEcho, []*os.File{socks[1]}, -1, strconv.Itoa(os.Getpid())); err != nil {
		return res, err
	}
	if testHookStarted != nil {
		testHookStarted(f)
	}
	var buf [16]byte
	recv := func() (int, error) {
		for {
			n, err := unix.Read(me, buf[:])
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.EAGAIN) {
				return 0, fmt.Errorf("%w: no datagram back in time", ErrRawStuck)
			}
			if err != nil {
				return 0, fmt.Errorf("udp receive: %w", err)
			}
			return n, nil
		}
	}
	if n, err := recv(); err != nil || n != 1 || buf[0] != 'r' { // the child's "ready"
		return res, fmt.Errorf("udp echo did not get ready (%d bytes): %w", n, err)
	}
	if err := setTimeout(2 * time.Second); err != nil {
		return res, err
	}
	var msg [8]byte
	rt := func(i uint64) error {
		binary.NativeEndian.PutUint64(msg[:], i)
		if _, err := unix.Write(me, msg[:]); err != nil {
			return fmt.Errorf("udp send: %w", err)
		}
		n, err := recv()
		if err != nil {
			return err
		}
		if v := binary.NativeEndian.Uint64(buf[:8]); n != 8 || v != i {
			return fmt.Errorf("sent %d, got %d bytes (%d) back", i, n, v)
		}
		return nil
	}
	return measureRaw(CondUDP, budget, rt)
}

// rawUDPEcho is the UDP echo process: args PPID; its connected socket is
// fd 3. It says ready with a 1-byte datagram, returns every 8-byte one,
// and exits on a 1-byte one.
func rawUDPEcho(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("want PPID, got %q", args)
	}
	if ppid, err := strconv.Atoi(args[0]); err != nil || os.Getppid() != ppid {
		return errOrphan
	}
	if _, err := unix.Write(fdUDP, []byte{'r'}); err != nil {
		return fmt.Errorf("udp ready: %w", err)
	}
	var buf [16]byte
	for {
		n, err := unix.Read(fdUDP, buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("udp receive: %w", err)
		}
		if n == 1 {
			return nil
		}
		if _, err := unix.Write(fdUDP, buf[:n]); err != nil {
			return fmt.Errorf("udp send: %w", err)
		}
	}
}

// HandoffLimit is the hand-off limit: the raw hand-off record (A -> relay
// -> B -> relay -> A) with the smallest median, what an attached driver
// and a device in its own process can at best do on this machine. ok is
// false when raw has no hand-off record.
func HandoffLimit(raw []Result) (limit Result, ok bool) {
	for _, r := range raw {
		if r.Mode != ModeRaw || !slices.Contains(HandoffConditions, r.Condition) {
			continue
		}
		if !ok || r.RTTHalfP50Us < limit.RTTHalfP50Us {
			limit, ok = r, true
		}
	}
	return limit, ok
}

// RawRatio is a device's 8-byte linkmem RTT/2 over a raw baseline of the
// same run: how many floors the device's round trip costs.
type RawRatio struct {
	Mode     string  // push or ipush
	Baseline string  // a raw condition, or "handoff_limit"
	P50      float64 // median over median
	Mean     float64 // mean over mean
}

// BaselineHandoffLimit names the hand-off limit in a RawRatio.
const BaselineHandoffLimit = "handoff_limit"

// RawRatios sets each device's 8-byte linkmem record in device (PUSH and
// IPUSH) beside each raw record, and the hand-off limit.
func RawRatios(device, raw []Result) []RawRatio {
	var out []RawRatio
	base := slices.Clone(raw)
	if l, ok := HandoffLimit(raw); ok {
		l.Condition = BaselineHandoffLimit
		base = append(base, l)
	}
	for _, mode := range []string{ModePush, ModeIPush} {
		d, ok := find(device, mode, CondLinkMem, 8)
		if !ok {
			continue
		}
		for _, b := range base {
			if b.Mode != ModeRaw {
				continue
			}
			out = append(out, RawRatio{Mode: mode, Baseline: b.Condition, P50: d.RTTHalfP50Us / b.RTTHalfP50Us, Mean: d.RTTHalfUs / b.RTTHalfUs})
		}
	}
	return out
}

func find(res []Result, mode, cond string, size int) (Result, bool) {
	for _, r := range res {
		if r.Mode == mode && r.Condition == cond && r.Size == size {
			return r, true
		}
	}
	return Result{}, false
}

// PrintRaw prints the raw baselines of a run, each with the device's
// 8-byte linkmem RTT/2 over it (from device, when it has those records),
// and the hand-off limit with the device's ratios to it and to UDP.
func PrintRaw(w io.Writer, device, raw []Result) {
	ratio := map[[2]string]RawRatio{}
	for _, q := range RawRatios(device, raw) {
		ratio[[2]string{q.Mode, q.Baseline}] = q
	}
	fmt.Fprintln(w, "\nraw baselines, same run: 8 bytes between processes without the device, RTT/2 in µs;")
	fmt.Fprintln(w, "device / baseline = the device's 8 B linkmem RTT/2 over it, median (mean);")
	fmt.Fprintln(w, "bound = each process of the baseline on a CPU of its own")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "baseline\tmedian µs\tmean µs\tround trips\tPUSH / baseline\tIPUSH / baseline\tbound\t")
	for _, r := range raw {
		if r.Mode != ModeRaw || r.Condition == CondMemcpy {
			continue
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%d\t", r.Condition, r.RTTHalfP50Us, r.RTTHalfUs, r.Iters)
		for _, mode := range []string{ModePush, ModeIPush} {
			if q, ok := ratio[[2]string{mode, r.Condition}]; ok {
				fmt.Fprintf(tw, "%sx (%sx)\t", fmtRatio(q.P50), fmtRatio(q.Mean))
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintf(tw, "%s\t\n", yesNo(r.Bound))
	}
	tw.Flush()
	l, ok := HandoffLimit(raw)
	if !ok {
		return
	}
	fmt.Fprintf(w, "hand-off limit (smallest hand-off median): %.2f µs, %s\n", l.RTTHalfP50Us, l.Condition)
	for _, mode := range []string{ModePush, ModeIPush} {
		d, ok := find(device, mode, CondLinkMem, 8)
		if !ok {
			continue
		}
		fmt.Fprintf(w, "  %-5s 8 B linkmem median %.2f µs = %sx the hand-off limit", mode, d.RTTHalfP50Us, fmtRatio(ratio[[2]string{mode, BaselineHandoffLimit}].P50))
		if q, ok := ratio[[2]string{mode, CondUDP}]; ok {
			fmt.Fprintf(w, "; %sx UDP loopback", fmtRatio(q.P50))
		}
		fmt.Fprintln(w)
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// fmtRatio keeps two significant digits for small ratios and drops the
// fraction of large ones (a device against the word ping-pong).
func fmtRatio(x float64) string {
	switch {
	case math.IsInf(x, 0) || math.IsNaN(x):
		return fmt.Sprint(x)
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 0.1:
		return fmt.Sprintf("%.2f", x)
	}
	return fmt.Sprintf("%.4f", x)
}
