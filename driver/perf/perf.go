// Package perf measures a device pair the way NIC users read figures:
// perftest's ib_write_lat / ib_write_bw and the OSU benchmarks'
// osu_latency, osu_bw (a window of messages in flight) and osu_mbw_mr
// (message rate). The ping-pong of driver/pingpong measures the IPUSH
// paper's conditions; this package reuses its loop for latency (adding
// the tails) and its windowed stream for bandwidth and rate, and runs the
// same three patterns on Open MPI (vader and tcp) and the raw floors in
// the same run, so every figure has a same-run peer to be judged by.
//
// The two sides talk over a control stream (Serve on the responder):
// an in-process pair over a pipe, a child process over its stdin and
// stdout, two hosts over TCP. The data itself only crosses the device.
package perf

import (
	"fmt"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// Patterns, as the records' "pattern" names them.
const (
	PatternLat  = "lat"  // ping-pong RTT/2 with its tails
	PatternBW   = "bw"   // a window of messages in flight, MB/s
	PatternRate = "rate" // 8-byte messages with a window in flight, messages per second
)

// Libraries, as the records' "lib" names them.
const (
	LibDimmnet   = "dimmnet"
	LibOMPIVader = "ompi-vader"
	LibOMPITCP   = "ompi-tcp"
	LibRaw       = "raw"
)

// RateSize is the message size of the rate pattern (osu_mbw_mr's smallest).
const RateSize = 8

// DefaultPeerWindow is the window the OSU benchmarks use and the Open MPI
// peers run with.
const DefaultPeerWindow = 64

// Record is one measurement, as --json prints it.
type Record struct {
	Pattern string `json:"pattern"`
	Lib     string `json:"lib"`
	Medium  string `json:"medium"`
	// Op is push or ipush for the device; send for Open MPI; word,
	// memcpy or udp for the raw floors.
	Op string `json:"op"`
	// Cond is the receiver's condition (pingpong.CondLinkMem or
	// CondHostCopy); empty for the peers.
	Cond   string `json:"cond,omitempty"`
	Size   int    `json:"size"`
	Window int    `json:"window,omitempty"`
	Bidir  bool   `json:"bidir,omitempty"`
	// The latency figures (RTT/2 for lat), µs.
	P50Us   float64 `json:"p50_us,omitempty"`
	P99Us   float64 `json:"p99_us,omitempty"`
	P999Us  float64 `json:"p999_us,omitempty"`
	MeanUs  float64 `json:"mean_us,omitempty"`
	MinUs   float64 `json:"min_us,omitempty"`
	MaxUs   float64 `json:"max_us,omitempty"`
	StdevUs float64 `json:"stdev_us,omitempty"`
	// MBps is size / RTT/2 for lat (the paper's figure), the stream's
	// payload rate for bw and rate (both directions with bidir).
	MBps     float64 `json:"mbps,omitempty"`
	MsgsPerS float64 `json:"msgs_per_s,omitempty"`
	// Iters is the timed round trips (lat) or messages (bw, rate).
	Iters int `json:"iters,omitempty"`
	// TransportWindow is the device transport's window of packets in
	// flight per peer, which bounds a stream apart from Window (the
	// commands in flight): both are reported.
	TransportWindow int `json:"transport_window,omitempty"`
	MaxInflight     int `json:"max_inflight,omitempty"`
	// Checked counts messages compared byte for byte (tests, --check-data).
	Checked int `json:"checked,omitempty"`
	// Retransmits and Timeouts are the devices' recovery during the
	// measurement (a lossless medium shows what the scheduler cost).
	Retransmits uint64 `json:"retransmits,omitempty"`
	Timeouts    uint64 `json:"timeouts,omitempty"`
	// Binding says how the two ends were placed: "bound" (one CPU each),
	// "unbound", or "one-process".
	Binding string `json:"binding,omitempty"`
	Note    string `json:"note,omitempty"`
	Info
}

// Spec is one measurement of the device.
type Spec struct {
	Pattern string
	Op      string // pingpong.ModePush or ModeIPush
	Cond    string // pingpong.CondLinkMem or CondHostCopy
	Size    int
	Window  int
	Bidir   bool
	// Time is about how long the timed part takes.
	Time time.Duration
	// Check: the receivers compare every streamed message (hostcopy) or
	// every ping-pong payload (both conditions) with what was sent.
	Check bool
}

func (sp Spec) valid() error {
	switch sp.Pattern {
	case PatternLat, PatternBW, PatternRate:
	default:
		return fmt.Errorf("%w: pattern %q (want lat, bw or rate)", ErrSpec, sp.Pattern)
	}
	if sp.Op != pingpong.ModePush && sp.Op != pingpong.ModeIPush {
		return fmt.Errorf("%w: op %q (want push or ipush)", ErrSpec, sp.Op)
	}
	if sp.Cond != pingpong.CondLinkMem && sp.Cond != pingpong.CondHostCopy {
		return fmt.Errorf("%w: condition %q (want linkmem or hostcopy)", ErrSpec, sp.Cond)
	}
	if sp.Size < 1 || (sp.Pattern != PatternLat && sp.Window < 1) {
		return fmt.Errorf("%w: size %d, window %d", ErrSpec, sp.Size, sp.Window)
	}
	return nil
}

// fromLat makes a lat record of a ping-pong result.
func fromLat(r pingpong.Result) Record {
	return Record{Pattern: PatternLat, Lib: LibDimmnet, Op: r.Mode, Cond: r.Condition, Size: r.Size,
		P50Us: r.RTTHalfP50Us, P99Us: r.P99Us, P999Us: r.P999Us, MeanUs: r.RTTHalfUs, MinUs: r.MinUs, MaxUs: r.MaxUs, StdevUs: r.StdevUs,
		MBps: r.MBps, Iters: r.Iters, Checked: r.Verified, Retransmits: r.Retransmits, Timeouts: r.Timeouts}
}

// fromStream makes a bw or rate record of a stream's result.
func fromStream(pattern string, r pingpong.StreamResult) Record {
	return Record{Pattern: pattern, Lib: LibDimmnet, Op: r.Mode, Cond: r.Condition, Size: r.Size, Window: r.Window, Bidir: r.Bidir,
		MBps: r.MBps, MsgsPerS: r.MsgsPerS, Iters: r.Msgs, Checked: r.Checked, Retransmits: r.Retransmits, Timeouts: r.Timeouts}
}
