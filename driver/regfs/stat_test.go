package regfs

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

func TestWriteStat(t *testing.T) {
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var ds []*driver.Driver
	for _, dev := range l.Devices {
		d, err := driver.Open(driver.InProcessDevice(dev))
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	a, b := ds[0], ds[1]
	if _, err := a.Push(2, 0, 0, 64, uapi.FlagSignal, 1); err != nil {
		t.Fatal(err)
	}
	wait(t, b)
	wait(t, a)

	var buf bytes.Buffer
	if err := WriteStat(&buf, "node1", l.Devices[0].Region()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if lines[0] != fmt.Sprintf("node1: dimmnet node 1, ABI %d, running", uapi.ABIVersion) {
		t.Errorf("header %q", lines[0])
	}
	if want := 1 + 4 + len(uapi.Registers) + int(uapi.NumCounters) + int(uapi.NumTrace) + 1; len(lines) != want {
		t.Errorf("%d lines, want %d:\n%s", len(lines), want, out)
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "not a checked device") {
		t.Errorf("an unchecked device's violations section says %q", last)
	}
	// Every entry line has its access class and value in the same columns.
	col := -1
	values := map[string]string{}
	for _, ln := range lines[1:] {
		if ln == "violations" {
			break // free text, below the aligned columns
		}
		if !strings.HasPrefix(ln, "  ") {
			continue
		}
		i := strings.Index(ln, " RO  ")
		if j := strings.Index(ln, " RW  "); i < 0 || (j >= 0 && j < i) {
			i = j
		}
		if i < 0 {
			t.Errorf("no access column: %q", ln)
			continue
		}
		if col >= 0 && i != col {
			t.Errorf("misaligned: %q (column %d, others %d)", ln, i, col)
		}
		col = i
		values[strings.TrimSpace(ln[:i])] = ln[i+5:]
	}
	r := uapi.Region(l.Devices[0].Region())
	for name, want := range map[string]string{
		"NODE_ID":      "1",
		"STATE":        "1 running",
		"MAGIC":        `0x3154454e4d4d4944 "DIMMNET1"`,
		"TRACE_CTRL":   "0 off",
		"CMDS":         "1",
		"TX_BYTES":     fmt.Sprint(64 * (1 + r.Counter(uapi.CtrRetransmits))), // a timer run out under load resends
		"CMDQ_HEAD":    "1",
		"MTU":          fmt.Sprint(r.Load64(uapi.RegMTU)),
		"LINKMEM_SIZE": sizeText(r.Load64(uapi.RegLinkMemSize)),
		"TRACE_TX":     "0",
	} {
		if values[name] != want {
			t.Errorf("%s = %q, want %q", name, values[name], want)
		}
	}
	if !strings.Contains(out, "\n  TRACE_CTRL ") || !strings.Contains(values["FEATURES"], "AMTAT") {
		t.Errorf("output:\n%s", out)
	}

	buf.Reset()
	if err := WriteStat(&buf, "junk", make([]byte, 1<<20)); err == nil || buf.Len() != 0 {
		t.Errorf("junk region: %v, %d bytes written", err, buf.Len())
	}
}

func TestParseValue(t *testing.T) {
	for in, want := range map[string]uint64{
		"0": 0, "5\n": 5, " 42 \n": 42, "010": 10, "0x10": 16, "0XfF\n": 255,
		"18446744073709551615": 1<<64 - 1, "0xffffffffffffffff": 1<<64 - 1,
	} {
		if got, err := parseValue([]byte(in)); err != nil || got != want {
			t.Errorf("parseValue(%q) = %d, %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", " ", "x", "0x", "-1", "+1", "1 2", "1e3", "0o7", "0b1", "1_000", "0x1g", "18446744073709551616"} {
		if _, err := parseValue([]byte(in)); err == nil {
			t.Errorf("parseValue(%q) accepted", in)
		}
	}
}

func TestValueText(t *testing.T) {
	for _, c := range []struct {
		off  uint32
		v    uint64
		want string
	}{
		{uapi.RegState, 2, "2 stopped"},
		{uapi.RegState, 9, "9 unknown"},
		{uapi.RegFeatures, uapi.FeatIPUSH | uapi.FeatPULL | 1<<40, "0x10000000009 IPUSH PULL BIT40"},
		{uapi.RegFeatures, 0, "0x0 none"},
		{uapi.RegError, uint64(uapi.EBadAddr) | uint64(uapi.OpPUSH)<<16 | 7<<32, "0x700030005 code BAD_ADDR opcode PUSH cmd 7"},
		{uapi.RegAMTATCtrl, 5<<8 | uapi.AMTATOpWrite, "0x502 seq 5 op write"},
		{uapi.RegAMTATDone, 5<<8 | uapi.AMTATResultErr, "0x501 seq 5 result error"},
		{uapi.RegAMTATData, uapi.AMTATValid | 3, "0x80000003 valid amt 3"},
		{uapi.RegAMTATData, 3, "0x3 invalid"},
		{uapi.RegAMTATSel, 35, "35 gpid 35 (node 2 proc 3)"},
		{uapi.RegRingFullMode, 1, "1 nack"},
		{uapi.RegDevSleep, 1, "1 sleeping"},
		{uapi.RegRegionSize, 16 << 20, "16777216 (0x1000000, 16 MiB)"},
		{uapi.RegLinkMemSize, 1000, "1000 (0x3e8)"},
		{uapi.RegCmdqOff, 4096, "0x1000 (4096)"},
		{uapi.RegNodeID, 7, "7"},
		{uapi.RegMagic, 0x41, `0x41 "A......." (not a dimmnet device)`},
	} {
		if got := valueText(c.off, c.v); got != c.want {
			t.Errorf("valueText(%#x, %#x) = %q, want %q", c.off, c.v, got, c.want)
		}
	}
}

func TestStatPos(t *testing.T) {
	const n = 4
	for _, c := range []struct {
		s, head, tail uint64
		want          ringPos
	}{
		{0, 0, 0, ringPos{}},
		{1, 0, 1, ringPos{}},
		{0, 0, 1, ringPos{idx: 0, valid: true, pending: true}},
		{0, 1, 1, ringPos{idx: 0, valid: true}},
		{1, 3, 6, ringPos{idx: 5, valid: true, pending: true}},
		{2, 3, 6, ringPos{idx: 2, valid: true}},
		{3, 3, 6, ringPos{idx: 3, valid: true, pending: true}},
	} {
		if got := statPos(c.s, c.head, c.tail, n); got != c.want {
			t.Errorf("statPos(%d, %d, %d) = %+v, want %+v", c.s, c.head, c.tail, got, c.want)
		}
	}
}

// Snapshots carry every counter; rates are the difference over the time
// between two snapshots, and the text shows them beside the totals.
func TestSnapRates(t *testing.T) {
	l, err := vdev.NewLocal(vdev.Config{}, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	region := l.Devices[0].Region()
	s1, err := Snap("node1", region)
	if err != nil {
		t.Fatal(err)
	}
	d, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := d.Post(&uapi.Desc{Opcode: uapi.OpNOP, Flags: uapi.FlagSignal}); err != nil {
			t.Fatal(err)
		}
		wait(t, d)
	}
	s2, err := Snap("node1", region)
	if err != nil {
		t.Fatal(err)
	}
	s2.SetRates(s1)
	moved := s2.Counters["CMDS"] - s1.Counters["CMDS"]
	if moved < 3 || len(s2.Counters) != int(uapi.NumCounters) {
		t.Fatalf("CMDS moved %d, %d counters", moved, len(s2.Counters))
	}
	want := float64(moved) / s2.Time.Sub(s1.Time).Seconds()
	if got := s2.Rates["CMDS"]; got != want || got <= 0 {
		t.Errorf("CMDS rate %v, want %v", got, want)
	}
	var b bytes.Buffer
	if err := writeStat(&b, "node1", region, &s2); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "/s\n") || !strings.Contains(b.String(), fmt.Sprintf("%d", s2.Counters["CMDS"])) {
		t.Errorf("no rates in the text:\n%s", b.String())
	}
	if _, err := Snap("x", region[:4096]); err == nil {
		t.Error("a short region snapped")
	}
}
