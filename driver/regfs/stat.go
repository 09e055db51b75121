package regfs

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/dimmnet/dimmnet/uapi"
)

// statWidth is the name column's width: the longest register, counter or
// trace name, so every section of WriteStat lines up in the same columns.
var statWidth = func() int {
	w := 0
	for _, r := range uapi.Registers {
		w = max(w, len(r.Name))
	}
	for _, n := range uapi.CounterNames {
		w = max(w, len(n))
	}
	for _, n := range uapi.TraceNames {
		w = max(w, len(n))
	}
	return w
}()

// WriteStat prints one snapshot of device name's registers (decoded, with
// their access class), counters and trace stamps to w, in aligned columns.
// It is `dimmnet stat` without a mount: the decoding is the one the regfs
// files use, so both views agree. The region is validated first (size,
// magic, ABI version, geometry) and an invalid one is an error, not output.
func WriteStat(w io.Writer, name string, region []byte) error {
	return writeStat(w, name, region, nil)
}

// writeStat is WriteStat; with a snapshot, the counters are the
// snapshot's, each followed by its rate when the snapshot has rates.
func writeStat(w io.Writer, name string, region []byte, snap *Stat) error {
	if _, err := checkRegion(region); err != nil {
		return fmt.Errorf("regfs: %s: %w", name, err)
	}
	r := uapi.Region(region)
	bw := bufio.NewWriter(w)
	line := func(name string, a uapi.Access, val string) {
		fmt.Fprintf(bw, "  %-*s  %s  %s\n", statWidth, name, a, val)
	}
	fmt.Fprintf(bw, "%s: dimmnet node %d, ABI %d, %s\n", name, r.Load64(uapi.RegNodeID),
		r.Load64(uapi.RegABIVersion), uapi.StateName(r.Load64(uapi.RegState)))
	fmt.Fprintln(bw, "registers")
	for _, reg := range uapi.Registers {
		line(reg.Name, reg.Access, registerText(r, reg))
	}
	fmt.Fprintln(bw, "counters")
	for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
		if snap == nil {
			line(c.String(), uapi.RO, counterText(r, c))
			continue
		}
		v := fmt.Sprintf("%-20d", snap.Counters[c.String()])
		if rate, ok := snap.Rates[c.String()]; ok {
			v += fmt.Sprintf("%14.1f/s", rate)
		}
		line(c.String(), uapi.RO, strings.TrimRight(v, " "))
	}
	fmt.Fprintln(bw, "trace")
	for i, n := range uapi.TraceNames {
		line(n, uapi.RO, traceText(r, i))
	}
	fmt.Fprintln(bw, "violations")
	for _, l := range strings.Split(strings.TrimSuffix(violationsText(r), "\n"), "\n") {
		fmt.Fprintf(bw, "  %s\n", l)
	}
	return bw.Flush()
}

// violationsText lists a checked device's violation log, one line each,
// naming the rule and the datasheet section that states it.
func violationsText(r uapi.Region) string {
	if r.Load64(uapi.RegFeatures)&uapi.FeatCheck == 0 {
		return "not a checked device (serve --check, pingpong --check)\n"
	}
	vs := r.ReadViolations()
	total := r.Load64(uapi.CtrViolations.Off())
	if total == 0 {
		return "none\n"
	}
	var b []byte
	for _, v := range vs {
		where := fmt.Sprintf("%#x", v.Where)
		for _, reg := range uapi.Registers {
			if uint64(reg.Off) == v.Where {
				where = reg.Name
			}
		}
		if v.Where >= uint64(uapi.RegCounters) && v.Where < uint64(uapi.CtrViolations.Off())+8 && (v.Where-uint64(uapi.RegCounters))%8 == 0 {
			where = uapi.Counter((v.Where - uint64(uapi.RegCounters)) / 8).String()
		}
		section := ""
		if v.Kind >= 1 && v.Kind < uapi.NumViolationKinds {
			section = uapi.ViolationDocs[v.Kind-1].Section
		}
		b = fmt.Appendf(b, "#%d %v index %d at %s: expected %#x, got %#x (datasheet: %s)\n", v.Seq, v.Kind, v.Index, where, v.Expected, v.Got, section)
	}
	if n := uint64(len(vs)); total > n {
		b = fmt.Appendf(b, "%d violations in all; the log keeps the latest %d, at most %d a second\n", total, uapi.ViolLogEntries, uapi.ViolLogPerSecond)
	}
	return string(b)
}
