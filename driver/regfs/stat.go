package regfs

import (
	"bufio"
	"fmt"
	"io"

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
	if _, err := checkRegion(region); err != nil {
		return fmt.Errorf("regfs: %s: %w", name, err)
	}
	r := uapi.Region(region)
	bw := bufio.NewWriter(w)
	line := func(name string, a uapi.Access, val string) {
		fmt.Fprintf(bw, "  %-*s  %s  %s\n", statWidth, name, a, val)
	}
	fmt.Fprintf(bw, "%s: dimmnet node %d, ABI %d, %s\n", name, r.Load64(uapi.RegNodeID),
		r.Load64(uapi.RegABIVersion), stateText(r.Load64(uapi.RegState)))
	fmt.Fprintln(bw, "registers")
	for _, reg := range uapi.Registers {
		line(reg.Name, reg.Access, registerText(r, reg))
	}
	fmt.Fprintln(bw, "counters")
	for c := uapi.Counter(0); c < uapi.NumCounters; c++ {
		line(c.String(), uapi.RO, counterText(r, c))
	}
	fmt.Fprintln(bw, "trace")
	for i, n := range uapi.TraceNames {
		line(n, uapi.RO, traceText(r, i))
	}
	return bw.Flush()
}
