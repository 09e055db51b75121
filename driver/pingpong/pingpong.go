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
	"runtime"
	"slices"

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
	MBps         float64 `json:"mbps"`
	Iters        int     `json:"iters"`
	Path         string  `json:"path,omitempty"`
	Link         string  `json:"link,omitempty"` // mem, udp, afpacket, tap
	Recovery
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
}

var recoveryCounters = [...]uapi.Counter{uapi.CtrRetransmits, uapi.CtrTimeouts, uapi.CtrDuplicates, uapi.CtrOutOfOrder, uapi.CtrNACKsRx, uapi.CtrCRCFail,
	uapi.CtrRetxGap, uapi.CtrRetxTimeout, uapi.CtrRxUnordered, uapi.CtrSeqNACKsTx}

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
		a[6] - before[6], a[7] - before[7], a[8] - before[8], a[9] - before[9]}
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

// Layout of each side's link memory for the run.
type layout struct {
	src, dst, ring, ringSize uint64
}

func plan(maxSize int, lm uint64) (layout, error) {
	m := (uint64(maxSize) + 4095) &^ 4095
	l := layout{src: 0, dst: m, ring: 2 * m, ringSize: max(4*m, 1<<20)}
	if l.ring+l.ringSize > lm {
		return l, fmt.Errorf("pingpong of %d bytes needs %d bytes of link memory, device has %d", maxSize, l.ring+l.ringSize, lm)
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
	// Verify checks every payload copied out (hostcopy) against the peer's
	// source pattern; Verified counts the messages that matched.
	Verify   bool
	Verified int
}

// ErrCorrupt reports a payload that arrived different from what was sent.
var ErrCorrupt = errors.New("pingpong: payload differs from what the peer sent")

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
	l, err := plan(maxSize, s.D.Geometry().LinkMemSize)
	if err != nil {
		return err
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
	src := s.D.LinkMem()[l.src : l.src+uint64(maxSize)]
	for i := range src {
		src[i] = byte(i) ^ byte(s.D.Node())
	}
	return nil
}

// send posts one message of n bytes to the peer.
func (s *Side) send(mode string, n int) error {
	for {
		var err error
		if mode == ModePush {
			_, err = s.D.Push(s.Peer, s.l.src, s.l.dst, uint32(n), 0, 0)
		} else {
			_, err = s.D.IPush(s.Peer, uapi.GPID(s.Peer, 0), s.l.src, uint32(n), 0, 0, 0)
		}
		if !errors.Is(err, driver.ErrQueueFull) {
			return err
		}
		runtime.Gosched()
	}
}

// Stamps are the receiver-side stage times of one message (ns, monotonic).
type Stamps struct {
	Detect, Read, Copied int64
}

// recv waits for one message and consumes it as the condition says.
func (s *Side) recv(mode, cond string, n int, st *Stamps) error {
	if _, err := s.D.WaitTail(waitNs); err != nil {
		return fmt.Errorf("node %d waiting for a %d-byte %s: %w", s.D.Node(), n, mode, err)
	}
	if st != nil {
		st.Detect = monotime.Now()
	}
	if cond == CondLinkMem {
		s.D.Skip(1)
		if mode == ModeIPush {
			// Free the ring without reading the status: up to the AMT tail,
			// once a quarter of it is used (loading the tail is a cache-line
			// transfer from the device; the paper's condition (2) pays it
			// for a pointer it reads for free on the card).
			s.unreleased += (uint64(n) + 7) &^ 7
			if s.unreleased >= s.l.ringSize/4 {
				s.ring.ReleaseTo(s.ring.Tail())
				s.unreleased = 0
			}
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
	s.D.CopyOut(s.buf[:n], status.Addr)
	if s.Verify {
		for i, c := range s.buf[:n] {
			if c != byte(i)^byte(s.Peer) { // SetupSide's pattern on the peer
				return fmt.Errorf("node %d: byte %d of a %d-byte %s from node %d: %w", s.D.Node(), i, n, mode, s.Peer, ErrCorrupt)
			}
		}
		s.Verified++
	}
	if st != nil {
		st.Copied = monotime.Now()
	}
	if mode == ModeIPush {
		s.ring.Release(status.End)
	}
	return nil
}

const waitNs = 10_000_000_000

// Run measures one (mode, condition, size) with a as the initiator and b
// as the responder (b runs on its own goroutine, as a separate process would).
func Run(a, b *Side, mode, cond string, size, warm, iters int) (Result, error) {
	before := snapRecovery(b.D)
	errc := make(chan error, 1)
	go func() { errc <- Respond(b, mode, cond, size, warm+iters) }()
	r, err := Initiate(a, mode, cond, size, warm, iters)
	if err2 := <-errc; err == nil {
		err = err2
	}
	r.Recovery.add(recoverySince(before, b.D))
	return r, err
}

// Respond is the responder's half: total times, wait for a message and
// answer it with one of the same size.
func Respond(b *Side, mode, cond string, size, total int) error {
	for i := 0; i < total; i++ {
		if err := b.recv(mode, cond, size, nil); err != nil {
			return err
		}
		if err := b.send(mode, size); err != nil {
			return err
		}
	}
	return nil
}

// Initiate is the initiator's half: warm round trips, then iters timed ones.
func Initiate(a *Side, mode, cond string, size, warm, iters int) (Result, error) {
	total := warm + iters
	before := snapRecovery(a.D)
	var start int64
	rtts := make([]int64, iters)
	for i := 0; i < total; i++ {
		t0 := monotime.Now()
		if i == warm {
			start = t0
		}
		if err := a.send(mode, size); err != nil {
			return Result{}, err
		}
		if err := a.recv(mode, cond, size, nil); err != nil {
			return Result{}, err
		}
		if i >= warm {
			rtts[i-warm] = monotime.Now() - t0
		}
	}
	el := monotime.Now() - start
	half := float64(el) / float64(iters) / 2 / 1e3
	slices.Sort(rtts)
	return Result{Mode: mode, Condition: cond, Size: size, RTTHalfUs: half, MBps: float64(size) / half, Iters: iters,
		RTTHalfP50Us: float64(rtts[len(rtts)/2]) / 2 / 1e3, Recovery: recoverySince(before, a.D)}, nil
}
