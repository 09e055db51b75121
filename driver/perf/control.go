package perf

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// Errors callers test with errors.Is.
var (
	// ErrSpec reports a measurement that cannot be made as asked.
	ErrSpec = errors.New("perf: bad measurement")
	// ErrControl reports a control stream that broke or said something
	// unexpected: the other side is gone or is not a perf responder.
	ErrControl = errors.New("perf: control stream")
	// ErrResponder reports a measurement the responder failed; the error
	// also carries the responder's message.
	ErrResponder = errors.New("perf: the responder failed")
)

// The control protocol, one line each way per step (initiator -> responder):
//
//	lat OP COND SIZE WARM         then "count N" before the last warm-up message
//	stream OP COND SIZE WINDOW WARM WINDOWS BIDIR CHECK
//	trace MODE TOTAL              answered by TOTAL "st RX PLACED STATUS DETECT READ COPIED" lines
//	quit
//
// and the responder answers "done N" (N: messages it verified or
// checked), "err MESSAGE", or "bye" to quit.

// Session is the initiator's end of a pair: its side of the device pair
// and the control stream to the responder (Serve).
type Session struct {
	A     *pingpong.Side
	ctl   io.Writer
	lines chan string
}

// NewSession starts reading the responder's answers from ctl. A
// responder that fails or goes away stops A's waits at once.
func NewSession(a *pingpong.Side, ctl io.ReadWriter) *Session {
	s := &Session{A: a, ctl: ctl, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(ctl)
		for sc.Scan() {
			l := sc.Text()
			if msg, ok := strings.CutPrefix(l, "err "); ok {
				a.Stop(fmt.Errorf("%w: %s", ErrResponder, msg))
			}
			s.lines <- l
		}
		a.Stop(fmt.Errorf("%w: the responder closed it", ErrControl))
		close(s.lines)
	}()
	return s
}

func (s *Session) send(format string, args ...any) error {
	if _, err := fmt.Fprintf(s.ctl, format+"\n", args...); err != nil {
		return fmt.Errorf("%w: %v", ErrControl, err)
	}
	return nil
}

// answer is the responder's next answer: the number after "done".
func (s *Session) answer() (int, error) {
	l, ok := <-s.lines
	if !ok {
		return 0, fmt.Errorf("%w: closed before the responder answered", ErrControl)
	}
	if msg, ok := strings.CutPrefix(l, "err "); ok {
		return 0, fmt.Errorf("%w: %s", ErrResponder, msg)
	}
	n, err := strconv.Atoi(strings.TrimPrefix(l, "done "))
	if err != nil || !strings.HasPrefix(l, "done ") {
		return 0, fmt.Errorf("%w: unexpected answer %q", ErrControl, l)
	}
	return n, nil
}

// Close tells the responder the session is over and waits for its
// goodbye (a responder that already ended has nothing to say).
func (s *Session) Close() error {
	sent := make(chan error, 1)
	go func() { sent <- s.send("quit") }()
	select {
	case l, ok := <-s.lines:
		if ok && l != "bye" {
			return fmt.Errorf("%w: no goodbye (%q)", ErrControl, l)
		}
		return nil
	case <-time.After(closeWait):
		return fmt.Errorf("%w: no goodbye within %v", ErrControl, closeWait)
	}
}

// closeWait bounds the wait for a responder's goodbye.
const closeWait = 10 * time.Second

// maxWindows bounds a stream's timed windows.
const maxWindows = 1 << 20

// maxWarm bounds a latency warm-up (as pingpong's command does).
const maxWarm = 200

// Measure runs one measurement with the responder.
func (s *Session) Measure(sp Spec) (Record, error) {
	if err := sp.valid(); err != nil {
		return Record{}, err
	}
	if sp.Time <= 0 {
		sp.Time = time.Second
	}
	if sp.Pattern == PatternLat {
		return s.lat(sp)
	}
	return s.stream(sp)
}

func (s *Session) lat(sp Spec) (Record, error) {
	warm, it := pingpong.Iters(sp.Size)
	bud := pingpong.Budget{Warm: min(warm, maxWarm), Min: min(20, it), Max: 1 << 20, Time: sp.Time}
	if err := s.send("lat %s %s %d %d", sp.Op, sp.Cond, sp.Size, bud.Warm); err != nil {
		return Record{}, err
	}
	r, err := pingpong.InitiateFor(s.A, sp.Op, sp.Cond, sp.Size, bud, func(n int) error { return s.send("count %d", n) })
	if err != nil {
		return Record{}, err
	}
	n, err := s.answer()
	if err != nil {
		return Record{}, err
	}
	rec := fromLat(r)
	rec.Checked += n
	return rec, nil
}

func (s *Session) stream(sp Spec) (Record, error) {
	ss := pingpong.StreamSpec{Mode: sp.Op, Condition: sp.Cond, Size: sp.Size, Window: sp.Window, Bidir: sp.Bidir, Check: sp.Check}
	// Calibrate, then choose the count of windows that takes about
	// sp.Time. Two windows alone made a poor guide on a loaded host: one
	// stall in them (a peer off its core for milliseconds) made the timed
	// part a few dozen windows, 27 ms of a 1 s --time in one run, and its
	// figure as noisy as that. So the calibration grows by 8x until it
	// takes a tenth of sp.Time.
	ss.Warm, ss.Windows = 1, 2
	checked := 0
	var per int64
	for {
		cal, err := s.runStream(ss)
		if err != nil {
			return Record{}, err
		}
		checked += cal.Checked
		per = max(cal.ElapsedNs/int64(cal.Windows), 1)
		if cal.ElapsedNs >= int64(sp.Time)/10 || ss.Windows >= maxWindows {
			break
		}
		ss.Windows = min(ss.Windows*8, maxWindows)
	}
	ss.Warm, ss.Windows = 1, int(min(max(int64(sp.Time)/per, 2), maxWindows))
	r, err := s.runStream(ss)
	if err != nil {
		return Record{}, err
	}
	rec := fromStream(sp.Pattern, r)
	rec.Checked += checked
	return rec, nil
}

func (s *Session) runStream(ss pingpong.StreamSpec) (pingpong.StreamResult, error) {
	if err := s.send("stream %s %s %d %d %d %d %t %t", ss.Mode, ss.Condition, ss.Size, ss.Window, ss.Warm, ss.Windows, ss.Bidir, ss.Check); err != nil {
		return pingpong.StreamResult{}, err
	}
	r, err := pingpong.InitiateStream(s.A, ss)
	if err != nil {
		return r, err
	}
	n, err := s.answer()
	if err != nil {
		return r, err
	}
	r.Checked += n
	return r, nil
}

// Breakdown runs pingpong's stage breakdown (Table 7) with the responder
// at the other end of the session, its stamps sent back over it: the
// two processes share the host's monotonic clock (--link shm, --attach).
func (s *Session) Breakdown(iters int, progress func(string)) (*pingpong.BreakdownResult, error) {
	return pingpong.BreakdownWith(s.A, iters, func(mode string, total int) (func() ([]pingpong.RespStamps, error), error) {
		if err := s.send("trace %s %d", mode, total); err != nil {
			return nil, err
		}
		return func() ([]pingpong.RespStamps, error) {
			rs := make([]pingpong.RespStamps, 0, total)
			for {
				l, ok := <-s.lines
				if !ok {
					return nil, fmt.Errorf("%w: closed during a traced run", ErrControl)
				}
				if msg, ok := strings.CutPrefix(l, "err "); ok {
					return nil, fmt.Errorf("%w: %s", ErrResponder, msg)
				}
				if strings.HasPrefix(l, "done ") {
					return rs, nil
				}
				var r pingpong.RespStamps
				if _, err := fmt.Sscanf(l, "st %d %d %d %d %d %d", &r.Rx, &r.Placed, &r.Status, &r.Detect, &r.Read, &r.Copied); err != nil {
					return nil, fmt.Errorf("%w: %q: %v", ErrControl, l, err)
				}
				rs = append(rs, r)
			}
		}, nil
	}, progress)
}

// Serve is the responder: it answers the initiator's measurements on ctl
// with b until told to quit or the stream ends.
func Serve(b *pingpong.Side, ctl io.ReadWriter) error {
	in := bufio.NewReader(ctl)
	reply := func(format string, args ...any) error {
		_, err := fmt.Fprintf(ctl, format+"\n", args...)
		return err
	}
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return fmt.Errorf("%w: %v", ErrControl, err)
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "quit":
			return reply("bye")
		case "lat":
			var op, cond string
			var size, warm int
			if _, err := fmt.Sscanf(line, "lat %s %s %d %d", &op, &cond, &size, &warm); err != nil {
				return fmt.Errorf("%w: %q: %v", ErrControl, line, err)
			}
			before := b.Verified
			err := pingpong.RespondFor(b, op, cond, size, warm, func() (int, error) {
				var n int
				l, err := in.ReadString('\n')
				if err != nil {
					return 0, err
				}
				if _, err := fmt.Sscanf(l, "count %d", &n); err != nil {
					return 0, fmt.Errorf("%w: %q: %v", ErrControl, l, err)
				}
				return n, nil
			})
			if err != nil {
				reply("err %s", oneLine(err))
				return err
			}
			if err := reply("done %d", b.Verified-before); err != nil {
				return err
			}
		case "trace":
			var mode string
			var total int
			if _, err := fmt.Sscanf(line, "trace %s %d", &mode, &total); err != nil {
				return fmt.Errorf("%w: %q: %v", ErrControl, line, err)
			}
			b.D.SetTrace(true)
			rs, err := pingpong.TraceRespond(b, mode, total)
			b.D.SetTrace(false)
			if err != nil {
				reply("err %s", oneLine(err))
				return err
			}
			w := bufio.NewWriter(ctl)
			for _, r := range rs {
				fmt.Fprintf(w, "st %d %d %d %d %d %d\n", r.Rx, r.Placed, r.Status, r.Detect, r.Read, r.Copied)
			}
			fmt.Fprintf(w, "done %d\n", len(rs))
			if err := w.Flush(); err != nil {
				return err
			}
		case "stream":
			var ss pingpong.StreamSpec
			if _, err := fmt.Sscanf(line, "stream %s %s %d %d %d %d %t %t", &ss.Mode, &ss.Condition, &ss.Size, &ss.Window, &ss.Warm, &ss.Windows, &ss.Bidir, &ss.Check); err != nil {
				return fmt.Errorf("%w: %q: %v", ErrControl, line, err)
			}
			n, err := pingpong.RespondStream(b, ss)
			if err != nil {
				reply("err %s", oneLine(err))
				return err
			}
			if err := reply("done %d", n); err != nil {
				return err
			}
		default:
			reply("err unknown step %q", f[0])
			return fmt.Errorf("%w: unknown step %q", ErrControl, f[0])
		}
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
