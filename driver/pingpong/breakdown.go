package pingpong

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/uapi"
)

// Stage is one row of the paper's Table 7.
type Stage struct {
	Key   string    `json:"key"`
	Name  string    `json:"name"`
	Paper [2]string `json:"paper_us"` // RDMA (PUSH), IPUSH, as printed in the paper
	// Median time of the stage in µs for PUSH and IPUSH; nil where the
	// stage has no counterpart here (H-J: the Prefetch Window).
	PushUs  *float64 `json:"push_us"`
	IPushUs *float64 `json:"ipush_us"`
}

// BreakdownResult is Table 7 for our device: one direction of an 8-byte
// ping-pong in the hostcopy condition, stage by stage.
type BreakdownResult struct {
	Iters      int     `json:"iters"`
	Stages     []Stage `json:"stages"`
	SumPushUs  float64 `json:"sum_push_us"`
	SumIPushUs float64 `json:"sum_ipush_us"`
	// RTT/2 measured during the traced run (the stamps cost a little).
	RTTHalfPushUs  float64 `json:"rtt_half_push_us"`
	RTTHalfIPushUs float64 `json:"rtt_half_ipush_us"`
	// Where the IPUSH-PUSH difference falls.
	DiffUs    float64 `json:"diff_us"`
	DiffStage string  `json:"diff_stage"`
}

var stageDefs = []struct {
	key, name string
	paper     [2]string
}{
	{"A", "post the send command", [2]string{"0.093", "0.093"}},
	{"B", "send processing (command seen, packet framed and sent)", [2]string{"0.428", "0.428"}},
	{"C", "link transit", [2]string{"0.385+α", "0.385+α"}},
	{"D", "receive processing and placement", [2]string{"0.472", "0.512"}},
	{"E", "status write", [2]string{"0.040", "0.040"}},
	{"F", "detection by polling the status tail", [2]string{"0.095~0.284", "0.095~0.284"}},
	{"G", "status read", [2]string{"0.312", "0.312"}},
	{"H", "prefetch request (Prefetch Window)", [2]string{"0.101", "0.101"}},
	{"I", "SO-DIMM to Prefetch Window", [2]string{"0.240", "0.250"}},
	{"J", "prefetch completion poll", [2]string{"0.095~0.284", "0.095~0.284"}},
	{"K/L", "copy to host memory", [2]string{"0.605", "0.605"}},
}

// sample is one ping's stage timestamps (ns, CLOCK_MONOTONIC).
type sample struct {
	t0, t1, tx           int64 // sender driver before/after posting; sender device frame sent
	rx, placed, status   int64 // receiver device
	detect, read, copied int64 // receiver driver
}

// Breakdown runs traced 8-byte ping-pongs (hostcopy condition) for PUSH and
// IPUSH and returns the median of every stage. The trace stamps are taken
// only while this runs (TRACE_CTRL); normal runs pay nothing for them.
func Breakdown(a, b *Side, iters int, progress func(string)) (*BreakdownResult, error) {
	b.D.SetTrace(true)
	defer b.D.SetTrace(false)
	return BreakdownWith(a, iters, func(mode string, total int) (func() ([]RespStamps, error), error) {
		type out struct {
			st  []RespStamps
			err error
		}
		c := make(chan out, 1)
		go func() {
			st, err := TraceRespond(b, mode, total)
			if err != nil {
				a.Stop(err)
			}
			c <- out{st, err}
		}()
		return func() ([]RespStamps, error) { o := <-c; return o.st, o.err }, nil
	}, progress)
}

// RespStamps are the responder's stamps of one traced message: its
// device's (frame received, payload placed, status written) and its
// driver's (status seen, read, payload copied out), in CLOCK_MONOTONIC
// ns, which two processes of one host share.
type RespStamps struct {
	Rx, Placed, Status, Detect, Read, Copied int64
}

// Responder starts the responder's half of total traced round trips of
// mode (TraceRespond, on a goroutine or in another process) and returns
// how to wait for its stamps.
type Responder func(mode string, total int) (wait func() ([]RespStamps, error), err error)

// BreakdownWith is Breakdown with the responder run by respond: in this
// process, or in another whose device's clock is this host's (--link
// shm, --attach), its stamps sent back when it is done. a's device is
// traced here; the responder traces its own.
func BreakdownWith(a *Side, iters int, respond Responder, progress func(string)) (*BreakdownResult, error) {
	if iters <= 0 {
		iters = 20000
	}
	warm := max(iters/10, 10)
	a.D.SetTrace(true)
	defer a.D.SetTrace(false)
	res := &BreakdownResult{Iters: iters}
	med := map[string]map[string]float64{}
	for _, mode := range []string{ModePush, ModeIPush} {
		progress(fmt.Sprintf("breakdown: %s, %d traced round trips", mode, iters))
		wait, err := respond(mode, warm+iters)
		if err != nil {
			return nil, err
		}
		ss, half, err := traced(a, mode, warm, iters)
		rs, rerr := wait()
		if err == nil {
			err = rerr
		}
		if err != nil {
			return nil, err
		}
		if len(rs) != warm+iters {
			return nil, fmt.Errorf("breakdown: the responder sent %d stamps for %d round trips", len(rs), warm+iters)
		}
		for i := range ss {
			r := rs[warm+i]
			ss[i].rx, ss[i].placed, ss[i].status, ss[i].detect, ss[i].read, ss[i].copied = r.Rx, r.Placed, r.Status, r.Detect, r.Read, r.Copied
		}
		m := medians(ss)
		med[mode] = m
		sum := 0.0
		for _, v := range m {
			sum += v
		}
		if mode == ModePush {
			res.SumPushUs, res.RTTHalfPushUs = sum, half
		} else {
			res.SumIPushUs, res.RTTHalfIPushUs = sum, half
		}
	}
	for _, sd := range stageDefs {
		st := Stage{Key: sd.key, Name: sd.name, Paper: sd.paper}
		if v, ok := med[ModePush][sd.key]; ok {
			p, i := v, med[ModeIPush][sd.key]
			st.PushUs, st.IPushUs = &p, &i
			if d := i - p; res.DiffStage == "" || d > res.DiffUs {
				res.DiffUs, res.DiffStage = d, sd.key
			}
		}
		res.Stages = append(res.Stages, st)
	}
	return res, nil
}

// TraceRespond is the responder's half of a traced run: total messages
// of mode received in the hostcopy condition and answered, with the
// stamps of each. Its device must be traced (SetTrace).
func TraceRespond(b *Side, mode string, total int) ([]RespStamps, error) {
	const size = 8
	rs := make([]RespStamps, total)
	for i := 0; i < total; i++ {
		var st Stamps
		if err := b.recv(mode, CondHostCopy, size, &st); err != nil {
			return nil, err
		}
		rs[i] = RespStamps{Rx: b.D.TraceStamp(uapi.TraceRx), Placed: b.D.TraceStamp(uapi.TracePlaced), Status: b.D.TraceStamp(uapi.TraceStatus),
			Detect: st.Detect, Read: st.Read, Copied: st.Copied}
		if err := b.send(mode, size, 0); err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// traced is the initiator's half: its stamps of each traced round trip
// after warm, and RTT/2 (µs).
func traced(a *Side, mode string, warm, iters int) ([]sample, float64, error) {
	const size = 8
	total := warm + iters
	ss := make([]sample, total)
	var start int64
	for i := 0; i < total; i++ {
		if i == warm {
			start = monotime.Now()
		}
		s := &ss[i]
		s.t0 = monotime.Now()
		if err := a.send(mode, size, 0); err != nil {
			return nil, 0, err
		}
		s.t1 = monotime.Now()
		if err := a.recv(mode, CondHostCopy, size, nil); err != nil {
			return nil, 0, err
		}
		s.tx = a.D.TraceStamp(uapi.TraceTx) // nothing traced left a.D since this ping
	}
	el := monotime.Now() - start
	return ss[warm:], float64(el) / float64(iters) / 2 / 1e3, nil
}

func medians(ss []sample) map[string]float64 {
	stage := map[string]func(s *sample) int64{
		"A":   func(s *sample) int64 { return s.t1 - s.t0 },
		"B":   func(s *sample) int64 { return s.tx - s.t1 },
		"C":   func(s *sample) int64 { return s.rx - s.tx },
		"D":   func(s *sample) int64 { return s.placed - s.rx },
		"E":   func(s *sample) int64 { return s.status - s.placed },
		"F":   func(s *sample) int64 { return s.detect - s.status },
		"G":   func(s *sample) int64 { return s.read - s.detect },
		"K/L": func(s *sample) int64 { return s.copied - s.read },
	}
	out := map[string]float64{}
	v := make([]int64, len(ss))
	for k, f := range stage {
		for i := range ss {
			v[i] = f(&ss[i])
		}
		slices.Sort(v)
		out[k] = float64(v[len(v)/2]) / 1e3
	}
	return out
}

// PrintBreakdown prints the stage table beside the paper's Table 7.
func PrintBreakdown(w io.Writer, b *BreakdownResult) {
	fmt.Fprintf(w, "Table 7 for dimmnet: one direction of an 8-byte ping-pong, hostcopy condition, median of %d traced round trips (µs)\n", b.Iters)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\twhat\tPUSH\tIPUSH\tIPUSH-PUSH\tpaper RDMA\tpaper IPUSH\t")
	for _, s := range b.Stages {
		if s.PushUs == nil {
			fmt.Fprintf(tw, "%s)\t%s\tn/a\tn/a\t\t%s\t%s\t\n", s.Key, s.Name, s.Paper[0], s.Paper[1])
			continue
		}
		fmt.Fprintf(tw, "%s)\t%s\t%.3f\t%.3f\t%+.3f\t%s\t%s\t\n", s.Key, s.Name, *s.PushUs, *s.IPushUs, *s.IPushUs-*s.PushUs, s.Paper[0], s.Paper[1])
	}
	fmt.Fprintf(tw, "\tsum of stages (one way)\t%.3f\t%.3f\t%+.3f\t\t\t\n", b.SumPushUs, b.SumIPushUs, b.SumIPushUs-b.SumPushUs)
	fmt.Fprintf(tw, "\tmeasured RTT/2 (traced run)\t%.3f\t%.3f\t%+.3f\t3.84\t3.89\t\n", b.RTTHalfPushUs, b.RTTHalfIPushUs, b.RTTHalfIPushUs-b.RTTHalfPushUs)
	tw.Flush()
	fmt.Fprintf(w, "H-J have no counterpart: link memory is mapped directly, so there is no Prefetch Window to fill and poll.\n")
	fmt.Fprintf(w, "IPUSH-PUSH difference: %+.3f µs in the sum; the largest stage difference is %+.3f µs in %s) — the paper's +0.04 µs falls in D) (24 vs 20 clocks of receive processing).\n",
		b.SumIPushUs-b.SumPushUs, b.DiffUs, b.DiffStage)
	fmt.Fprintf(w, "Each stage is the median over the run; a stage that hands a cache line between cores (B: command seen, C: frame queued, F: status seen) costs one line transfer here.\n")
}
