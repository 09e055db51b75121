package perf

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// The sweep's sizes: one size alone, else 8 B by 8x to the largest, which
// is always in, or every power of two.
func TestSizes(t *testing.T) {
	for _, c := range []struct {
		size, max int
		sweep     bool
		want      []int
	}{
		{64, 1 << 20, false, []int{64}},
		{0, 4096, false, []int{8, 64, 512, 4096}},
		{0, 1 << 20, false, []int{8, 64, 512, 4096, 32768, 262144, 1 << 20}},
		{0, 64, true, []int{8, 16, 32, 64}},
	} {
		if got := Sizes(c.size, c.max, c.sweep); !slices.Equal(got, c.want) {
			t.Errorf("Sizes(%d, %d, %t) = %v, want %v", c.size, c.max, c.sweep, got, c.want)
		}
	}
}

// A medium that cannot be opened ends the targets' run with an error
// naming it, and what was measured before stays in the records.
func TestTargetsNameFailingMedium(t *testing.T) {
	errNoShm := errors.New("no shared memory here")
	open := func(medium string) (*Pair, error) {
		if medium == "shm" {
			return nil, errNoShm
		}
		p, _ := pair(t, medium, 1<<20, false)
		return p, nil
	}
	recs, err := TargetRecords(open, 20*time.Millisecond, false, func(string) {})
	if !errors.Is(err, errNoShm) || !strings.HasPrefix(err.Error(), "shm: ") {
		t.Fatalf("err %v, want shm's failure named", err)
	}
	var lat, rate int
	for _, r := range recs {
		if r.Medium != "mem" {
			t.Errorf("a record of %s, measured after shm failed", r.Medium)
		}
		switch r.Pattern {
		case PatternLat:
			lat++
		case PatternRate:
			rate++
			if r.MsgsPerS <= 0 || r.Window != DefaultPeerWindow {
				t.Errorf("rate record %+v: no messages or not the OSU window", r)
			}
		}
	}
	if lat != 2 || rate != 1 {
		t.Errorf("mem measured %d lat and %d rate records, want 2 and 1", lat, rate)
	}
}
