// Package pingpong measures a device pair the way the IPUSH paper's section
// 5.2 does: one side sends a message, the other replies with one of the same
// size as soon as it sees it, and RTT/2 and size/(RTT/2) are reported per
// message size, for PUSH and IPUSH, in the paper's Table 5 conditions that
// have a counterpart here. It only uses the driver API, so it runs the same
// wherever the two drivers are attached (in-process, host processes, guests).
package pingpong

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// Modes and conditions, named as in the --json records.
const (
	ModePush  = "push"
	ModeIPush = "ipush"
	// CondLinkMem is the paper's conditions (1)/(2): the receiver polls only
	// the status tail, advances the status and AMT heads without touching the
	// data, and replies from link memory.
	CondLinkMem = "linkmem"
	// CondHostCopy is conditions (3)/(4): it also reads the status entry and
	// copies the payload out of link memory into ordinary memory.
	CondHostCopy = "hostcopy"
)

// Result is one row of the table (and one --json record).
type Result struct {
	Mode      string  `json:"mode"`
	Condition string  `json:"condition"`
	Size      int     `json:"size"`
	RTTHalfUs float64 `json:"rtt_half_us"` // mean, as the paper reports it
	// RTTHalfP50Us is the median round trip halved: on a shared, noisy
	// machine the mean carries the scheduler's and the hypervisor's tail.
	RTTHalfP50Us float64 `json:"rtt_half_p50_us"`
	// The tail and spread of the timed round trips, halved as the median
	// is: a mean and a median alone hide the stalls a user sees.
	Tails
	MBps  float64 `json:"mbps"`
	Iters int     `json:"iters"`
	Path  string  `json:"path,omitempty"`
	Link  string  `json:"link,omitempty"` // mem, udp, afpacket, tap
	// Attach is how a guest's driver reached its device: "vfio" or
	// "sysfs" (the lab's records only).
	Attach string `json:"attach,omitempty"`
	// Verified counts the messages of this measurement (warm-up included)
	// whose payload was copied out and compared byte for byte with what
	// the sender wrote (Side.Verify): the initiator's, and the responder's
	// when it is in this process. 0 when verification was off.
	Verified int `json:"verified"`
	// NotRung counts the measurement's messages posted while a device's
	// doorbell could not be rung (Side.NotRung), the initiator's and the
	// responder's when it is in this process: each waited for its
	// device's next look, so a record with any measured that wait.
	NotRung int `json:"not_rung,omitempty"`
	Recovery
	// Fault is the fault injection the record was measured under (the
	// --fault spec), "" for none.
	Fault string `json:"fault,omitempty"`
	// Lossless and Ratio set a faulty record beside the same measurement
	// without faults, on the same medium in the same run (AddBaseline), so
	// what the faults cost is read off the record instead of a second run
	// made on another day. Both are absent for a record without faults.
	Lossless *Lossless `json:"lossless,omitempty"`
	Ratio    *Ratio    `json:"ratio,omitempty"`
	// Keyed says every frame was authenticated (--key); Unkeyed and
	// KeyRatio set such a record beside the same measurement without a
	// key, same medium, same run (AddKeyBaseline).
	Keyed    bool      `json:"keyed,omitempty"`
	Unkeyed  *Lossless `json:"unkeyed,omitempty"`
	KeyRatio *Ratio    `json:"key_ratio,omitempty"`
	// Bound says each process of the measurement ran bound to a CPU of
	// its own (internal/cpubind), so two spinning processes could not
	// be put on one core; a record without it ran where the scheduler
	// put it.
	Bound bool `json:"bound,omitempty"`
}

// Recovery is what the devices did to make a lossy link reliable during one
// measurement (the initiator's device, and the responder's when it is in
// this process): the counters' movement.
type Recovery struct {
	Retransmits uint64 `json:"retransmits"`
	Timeouts    uint64 `json:"timeouts"`
	Duplicates  uint64 `json:"duplicates"`
	OutOfOrder  uint64 `json:"out_of_order"`
	NACKs       uint64 `json:"nacks"`
	CRCFail     uint64 `json:"crc_fail"`
	RetxGap     uint64 `json:"retx_gap"`
	RetxTimeout uint64 `json:"retx_timeout"`
	Unordered   uint64 `json:"rx_unordered"`
	SeqNACKs    uint64 `json:"seq_nacks"`
	// Violations are the driver's violations of the datasheet a checked
	// device (--check) saw during the measurement: 0 for a correct driver.
	Violations uint64 `json:"violations"`
}

var recoveryCounters = [...]uapi.Counter{uapi.CtrRetransmits, uapi.CtrTimeouts, uapi.CtrDuplicates, uapi.CtrOutOfOrder, uapi.CtrNACKsRx, uapi.CtrCRCFail,
	uapi.CtrRetxGap, uapi.CtrRetxTimeout, uapi.CtrRxUnordered, uapi.CtrSeqNACKsTx, uapi.CtrViolations}

func snapRecovery(ds ...*driver.Driver) [len(recoveryCounters)]uint64 {
	var v [len(recoveryCounters)]uint64
	for _, d := range ds {
		for i, c := range recoveryCounters {
			v[i] += d.Counter(c)
		}
	}
	return v
}

func recoverySince(before [len(recoveryCounters)]uint64, ds ...*driver.Driver) Recovery {
	a := snapRecovery(ds...)
	return Recovery{a[0] - before[0], a[1] - before[1], a[2] - before[2], a[3] - before[3], a[4] - before[4], a[5] - before[5],
		a[6] - before[6], a[7] - before[7], a[8] - before[8], a[9] - before[9], a[10] - before[10]}
}

// add folds another device's recovery into r.
func (r *Recovery) add(o Recovery) {
	r.Retransmits += o.Retransmits
	r.Timeouts += o.Timeouts
	r.Duplicates += o.Duplicates
	r.OutOfOrder += o.OutOfOrder
	r.NACKs += o.NACKs
	r.CRCFail += o.CRCFail
	r.RetxGap += o.RetxGap
	r.RetxTimeout += o.RetxTimeout
	r.Unordered += o.Unordered
	r.SeqNACKs += o.SeqNACKs
	r.Violations += o.Violations
}

// Sizes returns the message sizes 8 B .. max in powers of 2.
func Sizes(max int) []int {
	var s []int
	for n := 8; n <= max; n *= 2 {
		s = append(s, n)
	}
	return s
}

// Iters picks iteration counts: enough bytes to average over noise, at
// least 100 round trips, at most 20000.
func Iters(size int) (warm, iters int) {
	iters = min(max((64<<20)/size, 100), 20000)
	return max(iters/10, 10), iters
}

// Layout of each side's link memory for the run. src2 is the second
// source buffer a verified run alternates with src (see Side.Verify); it
// lies after the ring, so dst and the ring are where an unverified peer
// expects them.
type layout struct {
	src, dst, ring, ringSize, src2 uint64
}

func plan(maxSize int, lm uint64, verify bool) (layout, error) {
	m := (uint64(maxSize) + 4095) &^ 4095
	l := layout{src: 0, dst: m, ring: 2 * m, ringSize: max(4*m, 1<<20)}
	l.src2 = l.ring + l.ringSize
	need := l.src2
	if verify {
		need += m
	}
	if need > lm {
		return l, fmt.Errorf("pingpong of %d bytes (verify %v) needs %d bytes of link memory, device has %d", maxSize, verify, need, lm)
	}
	return l, nil
}

// Side is one end: a driver and the node it talks to.
type Side struct {
	D    *driver.Driver
	Peer uint16
	l    layout
	ring *driver.Ring
	buf  []byte
	// bytes received since the ring was last freed (linkmem condition)
	unreleased uint64
	// Verify makes every message carry bytes of its own and its receiver
	// check them, so that a lost, stale, misplaced or damaged payload fails
	// the run instead of passing as a fast one: the sender writes a pattern
	// chosen by its node, the mode, condition, size and iteration (see
	// pattern.go), and the receiver, once the status reports the message
	// complete, copies the payload out (in every condition) and compares
	// it byte for byte. Set it on both sides before SetupSide. Verified
	// counts the messages that matched, over the Side's life.
	Verify   bool
	Verified int
	// NotRung counts messages posted while the device's doorbell could
	// not be rung (driver.ErrNotRung): each was sent at the device's next
	// look (up to 100 ms later), so a run with any measured that wait,
	// not the link. A count that grows says the attachment's doorbell is
	// broken.
	NotRung int
	pat     []byte // the pattern messages are cut from (Verify)
	peerSrc []byte // what the peer's SetupSide wrote (a stream's Check)
	// tamper, when set (tests only), runs after the pattern of message
	// iter was written to src and may change it: the sender bug that
	// verification must catch.
	tamper func(mode string, iter int, src []byte)
	// stopped holds why the other side failed (Stop): waits give up.
	stopped atomic.Pointer[error]
}

// ErrCorrupt reports a payload that arrived different from what was sent;
// the error is a *MismatchError that says where.
var ErrCorrupt = errors.New("pingpong: payload differs from what the peer sent")

// ErrPeerFailed reports that a side gave up waiting because the other side
// of the measurement failed (Side.Stop); the error also wraps that cause.
var ErrPeerFailed = errors.New("pingpong: the other side failed")

// Stop makes every wait of s, now and later, fail with ErrPeerFailed and
// cause: the other side failed and will never send what s waits for, so s
// returns at once instead of after the 10-second wait. A stopped Side
// stays stopped. Safe to call from any goroutine.
func (s *Side) Stop(cause error) {
	s.stopped.CompareAndSwap(nil, &cause)
}

// Stopped is why s was stopped (Stop), nil if it was not.
func (s *Side) Stopped() error {
	if c := s.stopped.Load(); c != nil {
		return *c
	}
	return nil
}

// Setup prepares both sides for messages up to maxSize (see SetupSide).
func Setup(a, b *Side, maxSize int) error {
	if err := SetupSide(a, maxSize); err != nil {
		return err
	}
	return SetupSide(b, maxSize)
}

// SetupSide prepares one side for messages up to maxSize: a source buffer,
// a PUSH target, and IPUSH ring 0 fed by the peer's process 0. Each
// process of a two-process run sets up its own side.
func SetupSide(s *Side, maxSize int) error {
	l, err := plan(maxSize, s.D.Geometry().LinkMemSize, s.Verify)
	if err != nil {
		return fmt.Errorf("node %d: %w", s.D.Node(), err)
	}
	s.l = l
	s.D.DiscardStatuses() // a previous user's leftovers are not ours
	if s.ring, err = s.D.SetRing(0, l.ring, l.ringSize, false); err != nil {
		return err
	}
	if err := s.D.MapSender(uapi.GPID(s.Peer, 0), 0); err != nil {
		return err
	}
	s.buf = make([]byte, maxSize)
	if s.Verify {
		s.pat = newPattern(maxSize) // each message's bytes are written before it is sent
		return nil
	}
	src := s.D.LinkMem()[l.src : l.src+uint64(maxSize)]
	for i := range src {
		src[i] = byte(i) ^ byte(s.D.Node())
	}
	return nil
}

// srcOf is where message iter is sent from: always src, or with Verify
// src and src2 in turn, so the next message's pattern can be written
// while the device may still be reading this one.
func (s *Side) srcOf(iter int) uint64 {
	if s.Verify && iter%2 == 1 {
		return s.l.src2
	}
	return s.l.src
}

// fill writes the pattern of this side's message iter, n bytes, into its
// source buffer. The buffer's previous message (iter-2) must have been
// received whole by the peer.
func (s *Side) fill(mode, cond string, n, iter int) {
	at := s.srcOf(iter)
	src := s.D.LinkMem()[at : at+uint64(n)]
	o := patternStart(s.D.Node(), mode, cond, n, iter)
	copy(src, s.pat[o:o+n])
	if s.tamper != nil {
		s.tamper(mode, iter, src)
	}
}

// check compares the payload recv copied out with the peer's message
// iter and counts it verified.
func (s *Side) check(mode, cond string, n, iter int) error {
	o := patternStart(s.Peer, mode, cond, n, iter)
	if err := compare(s.buf[:n], s.pat[o:o+n]); err != nil {
		err.Mode, err.Condition, err.Size, err.Iter, err.From, err.To = mode, cond, n, iter, s.Peer, s.D.Node()
		return err
	}
	s.Verified++
	return nil
}

// send posts message iter, n bytes, to the peer.
// A stopped side (Stop) sends nothing more: every measurement loop sends
// once per message, so a stop ends it within a message.
func (s *Side) send(mode string, n, iter int) error {
	return s.sendAt(mode, n, s.srcOf(iter))
}

// stoppedErr is the error of a stopped side, nil if it was not stopped.
func (s *Side) stoppedErr(what string, n int) error {
	if cause := s.stopped.Load(); cause != nil {
		return fmt.Errorf("node %d %s a %d-byte message: %w: %w", s.D.Node(), what, n, ErrPeerFailed, *cause)
	}
	return nil
}

// Stamps are the receiver-side stage times of one message (ns, monotonic).
type Stamps struct {
	Detect, Read, Copied int64
}

// wait waits for the status tail to move, giving up after waitNs or when
// the other side failed (Stop).
func (s *Side) wait(mode string, n int) error {
	deadline := monotime.Now() + waitNs
	for {
		_, err := s.D.WaitTail(waitSliceNs)
		if err == nil {
			return nil
		}
		if cause := s.stopped.Load(); cause != nil {
			return fmt.Errorf("node %d waiting for a %d-byte %s: %w: %w", s.D.Node(), n, mode, ErrPeerFailed, *cause)
		}
		if !errors.Is(err, driver.ErrTimeout) || monotime.Now() >= deadline {
			return fmt.Errorf("node %d waiting for a %d-byte %s: %w", s.D.Node(), n, mode, err)
		}
	}
}

// recv waits for one message and consumes it as the condition says; with
// Verify it also reads the status and copies the payload into s.buf in
// the linkmem condition, for check.
func (s *Side) recv(mode, cond string, n int, st *Stamps) error {
	if err := s.wait(mode, n); err != nil {
		return err
	}
	if st != nil {
		st.Detect = monotime.Now()
	}
	if cond == CondLinkMem && !s.Verify {
		s.D.Skip(1)
		if mode == ModeIPush {
			s.releaseLinkMem(n)
		}
		return nil
	}
	status, ok := s.D.Poll()
	if !ok {
		return fmt.Errorf("node %d: status vanished", s.D.Node())
	}
	if st != nil {
		st.Read = monotime.Now()
	}
	want := uapi.StPUSH
	if mode == ModeIPush {
		want = uapi.StIPUSHMsg
	}
	if status.Type != want || status.Length != uint32(n) {
		return fmt.Errorf("node %d: expected a %d-byte %s status, got %v", s.D.Node(), n, want, status)
	}
	if mode == ModeIPush {
		s.ring.Copy(s.buf[:n], &status) // follows a message that wrapped the ring's end
	} else {
		s.D.CopyOut(s.buf[:n], status.Addr)
	}
	if st != nil {
		st.Copied = monotime.Now()
	}
	if mode == ModeIPush {
		if cond == CondLinkMem {
			s.releaseLinkMem(n)
		} else {
			s.ring.Release(status.End)
		}
	}
	return nil
}

// releaseLinkMem frees the ring the linkmem way, without the status: up to
// the AMT tail, once a quarter of it is used (loading the tail is a
// cache-line transfer from the device; the paper's condition (2) pays it
// for a pointer it reads for free on the card).
func (s *Side) releaseLinkMem(n int) {
	s.unreleased += (uint64(n) + 7) &^ 7
	if s.unreleased >= s.l.ringSize/4 {
		s.ring.ReleaseTo(s.ring.Tail())
		s.unreleased = 0
	}
}

const (
	waitNs = 10_000_000_000
	// waitSliceNs is how often a long wait looks whether the other side
	// failed (Stop).
	waitSliceNs = 100_000_000
)

// Run measures one (mode, condition, size) with a as the initiator and b
// as the responder (b runs on its own goroutine, as a separate process
// would): warm untimed round trips, then iters timed ones. When one side
// fails the other is stopped, and the error returned is the one that
// started it.
func Run(a, b *Side, mode, cond string, size, warm, iters int) (Result, error) {
	return RunFor(a, b, mode, cond, size, Count(warm, iters))
}

// RunFor is Run with the timed round trips chosen by bud.
func RunFor(a, b *Side, mode, cond string, size int, bud Budget) (Result, error) {
	before := snapRecovery(b.D)
	verified, notRung := b.Verified, b.NotRung
	told := make(chan int, 1) // closed once the initiator returns
	errc := make(chan error, 1)
	go func() {
		err := RespondFor(b, mode, cond, size, bud.Warm, func() (int, error) {
			n, ok := <-told
			if !ok {
				return 0, fmt.Errorf("%w before it chose a count", ErrPeerFailed)
			}
			return n, nil
		})
		if err != nil {
			a.Stop(err)
		}
		errc <- err
	}()
	r, err := InitiateFor(a, mode, cond, size, bud, func(n int) error { told <- n; return nil })
	close(told)
	if err != nil {
		b.Stop(err)
	}
	if rerr := <-errc; err == nil || rerr != nil && errors.Is(err, ErrPeerFailed) && !errors.Is(rerr, ErrPeerFailed) {
		err = rerr
	}
	r.Recovery.add(recoverySince(before, b.D))
	r.Verified += b.Verified - verified
	r.NotRung += b.NotRung - notRung
	return r, err
}

// Budget says how many round trips a measurement makes: Warm untimed ones,
// then timed ones taking about Time (estimated from the warm-up's pace),
// at least Min and at most Max of them. A count chosen by time keeps a
// slow path (two processes and a daemon on two cores) from taking minutes
// at the counts a fast one needs to average out its noise.
type Budget struct {
	Warm     int
	Time     time.Duration // 0: Max timed round trips
	Min, Max int
}

// Count is the budget of exactly iters timed round trips after warm.
func Count(warm, iters int) Budget { return Budget{Warm: warm, Min: iters, Max: iters} }

// Pacer spreads a run's time over its measurements: each gets an even
// share of what is left, so one that ran over (a noisy moment, a warm-up
// slower than its pace) is paid back by the ones after it and the run
// ends about when it was meant to.
type Pacer struct {
	end  int64 // monotonic ns
	left int
}

// NewPacer paces steps measurements over total, starting now.
func NewPacer(total time.Duration, steps int) *Pacer {
	return &Pacer{end: monotime.Now() + int64(total), left: steps}
}

// Next is the time for the next measurement (at least a millisecond).
func (p *Pacer) Next() time.Duration {
	share := (p.end - monotime.Now()) / int64(max(p.left, 1))
	p.left--
	return max(time.Duration(share), time.Millisecond)
}

// ErrNoRoundTrips reports a budget that allows no timed round trip.
var ErrNoRoundTrips = errors.New("pingpong: a measurement needs at least one timed round trip")

// iters chooses the timed count from the warm-up's round trips (ns): the
// second half's mean pace, the first having paid for switching size and
// mode.
func (b Budget) iters(warm []int64) (int, error) {
	n := b.Max
	if b.Time > 0 && len(warm) > 0 {
		tail := warm[len(warm)/2:]
		var sum int64
		for _, d := range tail {
			sum += d
		}
		pace := max(sum/int64(len(tail)), 1)
		n = int(min(int64(b.Time)/pace, int64(b.Max)))
	}
	n = max(n, b.Min)
	if n < 1 {
		return 0, fmt.Errorf("%w: budget %+v", ErrNoRoundTrips, b)
	}
	return n, nil
}

// decideAt is the message before which both sides settle the timed count:
// the last warm-up message, so the responder has learned it (perhaps from
// a pipe, a wake-up) before the first timed one is sent.
func decideAt(warm int) int { return max(warm-1, 0) }

// Respond is the responder's half: total times, wait for a message and
// answer it with one of the same size. With Verify the message is copied
// out before the reply (the next message overwrites it) but compared after
// it, and the next reply's pattern is written then too, so the round trip
// carries only the copy.
func Respond(b *Side, mode, cond string, size, total int) error {
	return respond(b, mode, cond, size, 0, func() (int, error) { return total, nil })
}

// RespondFor is the responder's half of InitiateFor: after warm-1
// messages it calls count for the number of timed ones the initiator
// chose (and told it through tell), then serves warm+count in all.
func RespondFor(b *Side, mode, cond string, size, warm int, count func() (int, error)) error {
	return respond(b, mode, cond, size, decideAt(warm), func() (int, error) {
		n, err := count()
		if err != nil {
			return 0, fmt.Errorf("node %d: the count of timed %d-byte %s messages: %w", b.D.Node(), size, mode, err)
		}
		return warm + n, nil
	})
}

// respond serves messages until the total that total, called before
// message at, returns.
func respond(b *Side, mode, cond string, size, at int, total func() (int, error)) error {
	n := at + 1 // until told
	for i := 0; i < n; i++ {
		if i == at {
			var err error
			if n, err = total(); err != nil {
				return err
			}
			if i >= n {
				break
			}
		}
		if err := b.recv(mode, cond, size, nil); err != nil {
			return err
		}
		if b.Verify && i == 0 {
			// Only now is the initiator done with the previous
			// measurement's replies, which may have used this buffer.
			b.fill(mode, cond, size, 0)
		}
		if err := b.send(mode, size, i); err != nil {
			return err
		}
		if b.Verify {
			if err := b.check(mode, cond, size, i); err != nil {
				return err
			}
			if i+1 < n {
				b.fill(mode, cond, size, i+1) // reply i-1 has arrived: message i was sent after it
			}
		}
	}
	return nil
}

// Initiate is the initiator's half: warm round trips, then iters timed ones.
// With Verify, writing each message's pattern and checking each reply
// happen outside the timed round trips.
func Initiate(a *Side, mode, cond string, size, warm, iters int) (Result, error) {
	return InitiateFor(a, mode, cond, size, Count(warm, iters), func(int) error { return nil })
}

// InitiateFor is Initiate with the timed count chosen by bud after warm-1
// round trips and passed to tell before the last warm one, so that a
// responder in another process (RespondFor) serves exactly as many.
func InitiateFor(a *Side, mode, cond string, size int, bud Budget, tell func(iters int) error) (Result, error) {
	warm := bud.Warm
	before := snapRecovery(a.D)
	verified, notRung := a.Verified, a.NotRung
	var start, paused int64
	var rtts []int64
	warmRTTs := make([]int64, 0, warm)
	at := decideAt(warm)
	total := at + 1 // until decided
	for i := 0; i < total; i++ {
		if i == at {
			n, err := bud.iters(warmRTTs)
			if err != nil {
				return Result{}, err
			}
			if err := tell(n); err != nil {
				return Result{}, fmt.Errorf("node %d: tell the responder %d timed round trips: %w", a.D.Node(), n, err)
			}
			total, rtts = warm+n, make([]int64, n)
		}
		var p0 int64
		if a.Verify {
			p0 = monotime.Now()
			a.fill(mode, cond, size, i)
		}
		t0 := monotime.Now()
		if i == warm {
			start = t0
		} else if i > warm && a.Verify {
			paused += t0 - p0
		}
		if err := a.send(mode, size, i); err != nil {
			return Result{}, err
		}
		if err := a.recv(mode, cond, size, nil); err != nil {
			return Result{}, err
		}
		t1 := monotime.Now()
		if i >= warm {
			rtts[i-warm] = t1 - t0
		} else {
			warmRTTs = append(warmRTTs, t1-t0)
		}
		if a.Verify {
			if err := a.check(mode, cond, size, i); err != nil {
				return Result{}, err
			}
			if i >= warm {
				paused += monotime.Now() - t1
			}
		}
	}
	iters := total - warm
	el := monotime.Now() - start - paused
	half := float64(el) / float64(iters) / 2 / 1e3
	slices.Sort(rtts)
	return Result{Mode: mode, Condition: cond, Size: size, RTTHalfUs: half, MBps: float64(size) / half, Iters: iters,
		RTTHalfP50Us: float64(rtts[len(rtts)/2]) / 2 / 1e3, Tails: TailsOf(rtts), Recovery: recoverySince(before, a.D), Verified: a.Verified - verified,
		NotRung: a.NotRung - notRung}, nil
}

// Tails are the order statistics of a measurement's round trips, each
// halved (RTT/2, in µs), as perftest and the OSU benchmarks report them.
type Tails struct {
	P99Us   float64 `json:"rtt_half_p99_us"`
	P999Us  float64 `json:"rtt_half_p999_us"`
	MinUs   float64 `json:"rtt_half_min_us"`
	MaxUs   float64 `json:"rtt_half_max_us"`
	StdevUs float64 `json:"rtt_half_stdev_us"`
}

// TailsOf computes the tails of sorted round trips (ns); zero for none.
func TailsOf(sorted []int64) Tails {
	n := len(sorted)
	if n == 0 {
		return Tails{}
	}
	half := func(ns float64) float64 { return ns / 2 / 1e3 }
	var sum float64
	for _, v := range sorted {
		sum += float64(v)
	}
	mean := sum / float64(n)
	var sq float64
	for _, v := range sorted {
		sq += (float64(v) - mean) * (float64(v) - mean)
	}
	return Tails{P99Us: half(float64(sorted[Rank(n, 0.99)])), P999Us: half(float64(sorted[Rank(n, 0.999)])),
		MinUs: half(float64(sorted[0])), MaxUs: half(float64(sorted[n-1])), StdevUs: half(math.Sqrt(sq / float64(n)))}
}

// Rank is the index of quantile q in n sorted values (the nearest rank).
func Rank(n int, q float64) int {
	return min(max(int(math.Ceil(q*float64(n)))-1, 0), n-1)
}

// PaperPoint is what the IPUSH paper's Fig. 8 states for one mode and
// condition on the DIMMnet-2 hardware (its plot is missing from our copy):
// the minimum RTT/2, at 8 bytes of data behind a 16-byte header, and the
// maximum bandwidth, size not stated. Plots mark them beside our curves.
type PaperPoint struct {
	Mode, Condition string
	MinRTTHalfUs    float64 // at PaperMinSize bytes of data
	MaxMBps         float64
}

// PaperMinSize is the data size of the paper's minimum RTT/2.
const PaperMinSize = 8

// PaperFig8 are the IPUSH paper's Fig. 8 values: SO-DIMM to SO-DIMM
// (linkmem, Table 5 conditions (1)/(2)) and with the copy to host memory
// (hostcopy, (3)/(4)).
var PaperFig8 = []PaperPoint{
	{ModePush, CondLinkMem, 1.74, 644},
	{ModeIPush, CondLinkMem, 1.78, 643},
	{ModePush, CondHostCopy, 3.84, 242},
	{ModeIPush, CondHostCopy, 3.89, 241},
}
