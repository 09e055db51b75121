package regfs

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
)

// Stat is one snapshot of a device's register page for scripts: a
// `dimmnet stat --json` record, as `ethtool -S` or `rdma statistic` give
// counters to scripts. Rates are per second since the previous snapshot
// of a watch (none in the first).
type Stat struct {
	Name       string             `json:"name"`
	Node       uint64             `json:"node"`
	State      string             `json:"state"`
	Time       time.Time          `json:"time"`
	Registers  map[string]uint64  `json:"registers"`
	Counters   map[string]uint64  `json:"counters"`
	Rates      map[string]float64 `json:"rates_per_second,omitempty"`
	Trace      map[string]uint64  `json:"trace"`
	Violations []string           `json:"violations"` // the violation log, decoded (checked devices)
}

// Snap takes a snapshot of the device mapped at region, validated first
// as WriteStat validates it.
func Snap(name string, region []byte) (Stat, error) {
	if _, err := checkRegion(region); err != nil {
		return Stat{}, fmt.Errorf("regfs: %s: %w", name, err)
	}
	r := uapi.Region(region)
	s := Stat{Name: name, Node: r.Load64(uapi.RegNodeID), State: uapi.StateName(r.Load64(uapi.RegState)), Time: time.Now(),
		Registers: map[string]uint64{}, Counters: map[string]uint64{}, Trace: map[string]uint64{}, Violations: []string{}}
	for _, reg := range uapi.Registers {
		s.Registers[reg.Name] = r.Load64(reg.Off)
	}
	for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
		s.Counters[c.String()] = r.Counter(c)
	}
	for i, n := range uapi.TraceNames {
		s.Trace[n] = r.Load64(uapi.RegTrace + 8*uint32(i))
	}
	if r.Load64(uapi.RegFeatures)&uapi.FeatCheck != 0 && r.Counter(uapi.CtrViolations) > 0 {
		s.Violations = strings.Split(strings.TrimSuffix(violationsText(r), "\n"), "\n")
	}
	return s, nil
}

// SetRates sets s's counter rates per second since prev. A counter that
// went backwards (a new device behind the same name) gets no rate.
func (s *Stat) SetRates(prev Stat) {
	dt := s.Time.Sub(prev.Time).Seconds()
	if dt <= 0 {
		return
	}
	s.Rates = map[string]float64{}
	for k, v := range s.Counters {
		if p, ok := prev.Counters[k]; ok && v >= p {
			s.Rates[k] = float64(v-p) / dt
		}
	}
}

// WatchOptions say how Watch prints.
type WatchOptions struct {
	Every time.Duration // 0: one snapshot, no rates
	// Encode, when set, writes each snapshot as a record (JSON) instead
	// of the text table.
	Encode func(any) error
}

// Watch prints snapshots of a device to w until ctx ends: once, or with
// Every set, again each period with every counter's rate per second
// beside its total.
func Watch(ctx context.Context, w io.Writer, name string, region []byte, o WatchOptions) error {
	var prev *Stat
	for {
		s, err := Snap(name, region)
		if err != nil {
			return err
		}
		if prev != nil {
			s.SetRates(*prev)
		}
		if o.Encode != nil {
			err = o.Encode(s)
		} else {
			err = writeStat(w, name, region, &s)
		}
		if err != nil || o.Every <= 0 {
			return err
		}
		prev = &s
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.Every):
			if o.Encode == nil {
				fmt.Fprintln(w)
			}
		}
	}
}
