package perf

import (
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// Opener opens the pair of a medium (mem, shm, udp) for RunTargets; the
// pairs live in a package above this one (driver/pingpong/pairs), which
// the command joins to it.
type Opener func(medium string) (*Pair, error)

// TargetsMedia are the media RunTargets measures, in its order: the
// in-process default, the shared-memory link between two processes, UDP.
var TargetsMedia = []string{"mem", "shm", "udp"}

// RunTargets is issue 34's side-by-side run: the device in process, on
// shm and on udp, the raw floors and Open MPI, in one run, then the
// targets' ratios (or, asJSON, the records). per is each measurement's
// timed part; bind binds the raw floors' processes as shm's are.
func RunTargets(w io.Writer, open Opener, per time.Duration, asJSON, bind bool, progress func(string)) error {
	recs, err := TargetRecords(open, per, bind, progress)
	if err != nil {
		return err
	}
	progress("")
	if asJSON {
		return pingpong.WriteJSON(w, recs)
	}
	Print(w, recs)
	PrintTargets(w, Targets(recs))
	return nil
}

// TargetRecords measures what Targets judges: 8-byte PUSH and IPUSH
// latency on each medium, rate and 64 KiB / 1 MiB bandwidth with the OSU
// window on mem and shm, the floors and Open MPI (whose absence is said
// on stderr and leaves its targets out).
func TargetRecords(open Opener, per time.Duration, bind bool, progress func(string)) ([]Record, error) {
	lat8 := Options{Patterns: []string{PatternLat}, Ops: []string{pingpong.ModePush, pingpong.ModeIPush}, Conds: []string{pingpong.CondLinkMem}, Sizes: []int{8}, Time: per}
	streams := Options{Patterns: []string{PatternRate, PatternBW}, Ops: []string{pingpong.ModePush}, Conds: []string{pingpong.CondLinkMem},
		Sizes: []int{64 << 10, 1 << 20}, Window: DefaultPeerWindow, Time: per}
	var recs []Record
	for _, m := range TargetsMedia {
		opts := []Options{lat8}
		if m != "udp" {
			opts = append(opts, streams)
		}
		r, err := measureOn(open, m, progress, opts...)
		recs = append(recs, r...)
		if err != nil {
			return recs, fmt.Errorf("%s: %w", m, err)
		}
	}
	progress("raw floors")
	raw, err := Raw("udp", streams.Sizes, per, bind)
	if err != nil {
		return recs, err
	}
	recs = append(recs, raw...)
	progress("Open MPI: vader and tcp")
	om, err := OMPI([]int{8, 64 << 10, 1 << 20}, DefaultPeerWindow, per)
	if err != nil {
		fmt.Fprintf(os.Stderr, "perf targets: Open MPI peers: %v\n", err)
	}
	return append(recs, om...), nil
}

// measureOn opens medium's pair, runs each of opts on it and closes it.
func measureOn(open Opener, medium string, progress func(string), opts ...Options) ([]Record, error) {
	p, err := open(medium)
	if err != nil {
		return nil, err
	}
	var recs []Record
	for _, o := range opts {
		r, err := Run(p, o, progress)
		recs = append(recs, r...)
		if err != nil {
			p.Close()
			return recs, err
		}
	}
	return recs, p.Close()
}

// Peers measures the same-run peers of a medium for o: the raw floors
// and, unless noOMPI, Open MPI over vader and tcp with the OSU window
// (whose absence is said on stderr, not an error).
func Peers(medium string, o Options, noOMPI, bind bool, progress func(string)) ([]Record, error) {
	var bwSizes []int
	if slices.Contains(o.Patterns, PatternBW) {
		bwSizes = o.Sizes
	}
	progress("raw floors: word ping-pong, memcpy")
	recs, err := Raw(medium, bwSizes, o.Time, bind)
	if err != nil {
		return nil, err
	}
	if noOMPI {
		return recs, nil
	}
	progress("Open MPI: vader and tcp, lat, bw and rate (window 64)")
	om, err := OMPI(o.Sizes, DefaultPeerWindow, o.Time)
	if err != nil {
		fmt.Fprintf(os.Stderr, "perf: Open MPI peers: %v\n", err)
		return recs, nil
	}
	return append(recs, om...), nil
}

// Sizes are the message sizes of lat and bw: size alone if set, else
// the sweep from 8 bytes to maxSize by 8x (every power of two with
// sweep), maxSize always included.
func Sizes(size, maxSize int, sweep bool) []int {
	if size > 0 {
		return []int{size}
	}
	var sizes []int
	for _, s := range pingpong.Sizes(maxSize) {
		if sweep || s == 8 || s == maxSize || isPow8(s) {
			sizes = append(sizes, s)
		}
	}
	return sizes
}

// isPow8 says whether n is a power of 8 (the sweep's default sizes).
func isPow8(n int) bool {
	for n > 1 && n%8 == 0 {
		n /= 8
	}
	return n == 1
}
