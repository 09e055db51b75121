package regfs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/dimmnet/dimmnet/uapi"
)

// This file is the one place where register page words become text: the
// FUSE files and WriteStat both call these functions, so `cat
// registers/STATE` and `dimmnet stat` can never disagree. Every word of the
// region is loaded with uapi's atomic accessors, as any driver must.

// checkRegion validates a region before anything is decoded from it: size
// and alignment (uapi.CheckRegion), magic, ABI version (every offset below
// depends on it) and geometry, so a corrupt page cannot make a reader index
// outside the mapping.
func checkRegion(b []byte) (uapi.Geometry, error) {
	if err := uapi.CheckRegion(b); err != nil {
		return uapi.Geometry{}, err
	}
	r := uapi.Region(b)
	if m := r.Load64(uapi.RegMagic); m != uapi.Magic {
		return uapi.Geometry{}, fmt.Errorf("magic %#x: not a dimmnet device", m)
	}
	if v := r.Load64(uapi.RegABIVersion); v != uapi.ABIVersion {
		return uapi.Geometry{}, fmt.Errorf("ABI version %d, regfs decodes %d", v, uapi.ABIVersion)
	}
	g := r.ReadGeometry()
	if err := g.Validate(uint64(len(b))); err != nil {
		return uapi.Geometry{}, err
	}
	return g, nil
}

// featuresText names the set bits of a FEATURES value; unknown bits show
// as BIT<n> so nothing the device reports is hidden.
func featuresText(v uint64) string {
	if names := uapi.Features(v); len(names) > 0 {
		return strings.Join(names, " ")
	}
	return "none"
}

// magicText shows the magic's bytes as ASCII ("DIMMNET1" when right).
func magicText(v uint64) string {
	b := make([]byte, 8)
	for i := range b {
		c := byte(v >> (8 * i))
		if c < 0x20 || c > 0x7e {
			c = '.'
		}
		b[i] = c
	}
	s := `"` + string(b) + `"`
	if v != uapi.Magic {
		s += " (not a dimmnet device)"
	}
	return s
}

// gpidText spells a GPID out as node and local process.
func gpidText(g uint64) string {
	return fmt.Sprintf("gpid %d (node %d proc %d)", g, g/uapi.ProcsPerNode, g%uapi.ProcsPerNode)
}

// amtatEntryText decodes an AMT Address Table value (AMTAT_DATA, mirror).
func amtatEntryText(v uint64) string {
	if v&uapi.AMTATValid == 0 {
		return "invalid"
	}
	return fmt.Sprintf("valid amt %d", uint16(v))
}

// amtatOpText names an AMTAT_CTRL op.
func amtatOpText(op uint64) string {
	switch op {
	case 0:
		return "none"
	case uapi.AMTATOpRead:
		return "read"
	case uapi.AMTATOpWrite:
		return "write"
	}
	return "unknown"
}

// amtatResultText names an AMTAT_DONE result.
func amtatResultText(res uint64) string {
	switch res {
	case uapi.AMTATResultOK:
		return "ok"
	case uapi.AMTATResultErr:
		return "error"
	}
	return "unknown"
}

// errorText decodes the ERROR register: code | opcode<<16 | index<<32.
func errorText(v uint64) string {
	if v == 0 {
		return "none"
	}
	return fmt.Sprintf("code %s opcode %s cmd %d", uapi.Errno(uint16(v)).String(), uapi.Opcode(uint8(v>>16)), uint32(v>>32))
}

// sizeText is a byte count in decimal with its hex and, when whole, its
// binary unit: the three ways a reader checks a layout.
func sizeText(v uint64) string {
	s := fmt.Sprintf("%d (%#x", v, v)
	switch {
	case v >= 1<<30 && v%(1<<30) == 0:
		s += fmt.Sprintf(", %d GiB", v>>30)
	case v >= 1<<20 && v%(1<<20) == 0:
		s += fmt.Sprintf(", %d MiB", v>>20)
	case v >= 1<<10 && v%(1<<10) == 0:
		s += fmt.Sprintf(", %d KiB", v>>10)
	}
	return s + ")"
}

// regKind says how a register's value is shown.
type regKind int

const (
	kindDec   regKind = iota // a count or id: decimal
	kindAddr                 // an offset or address: hex, decimal
	kindSize                 // a byte count: decimal, hex, unit
	kindMagic                // MAGIC
	kindFeat                 // FEATURES
	kindState                // STATE
	kindBool                 // 0/1 flag with a name for 1 (see boolNames)
	kindGPID                 // AMTAT_SEL
	kindAMTAT                // AMTAT_DATA
	kindCtrl                 // AMTAT_CTRL
	kindDone                 // AMTAT_DONE
	kindMode                 // RINGFULL_MODE
	kindError                // ERROR
)

// regKinds maps register offsets to their decoding; absent means decimal.
var regKinds = map[uint32]regKind{
	uapi.RegMagic:        kindMagic,
	uapi.RegFeatures:     kindFeat,
	uapi.RegRegionSize:   kindSize,
	uapi.RegState:        kindState,
	uapi.RegCmdqOff:      kindAddr,
	uapi.RegStatqOff:     kindAddr,
	uapi.RegAMTOff:       kindAddr,
	uapi.RegLLCMOff:      kindAddr,
	uapi.RegLLCMSize:     kindSize,
	uapi.RegScratchOff:   kindAddr,
	uapi.RegScratchSize:  kindSize,
	uapi.RegLinkMemOff:   kindAddr,
	uapi.RegLinkMemSize:  kindSize,
	uapi.RegPageSizeReg:  kindSize,
	uapi.RegAMTATMirOff:  kindAddr,
	uapi.RegDevSleep:     kindBool,
	uapi.RegDrvWait:      kindBool,
	uapi.RegTraceCtrl:    kindBool,
	uapi.RegAMTATSel:     kindGPID,
	uapi.RegAMTATData:    kindAMTAT,
	uapi.RegAMTATCtrl:    kindCtrl,
	uapi.RegAMTATDone:    kindDone,
	uapi.RegRingFullMode: kindMode,
	uapi.RegWinBase:      kindAddr,
	uapi.RegWinSize:      kindSize,
	uapi.RegError:        kindError,
}

// boolNames says what 0 and 1 mean for the flag registers.
var boolNames = map[uint32][2]string{
	uapi.RegDevSleep:  {"awake", "sleeping"},
	uapi.RegDrvWait:   {"polling", "waiting"},
	uapi.RegTraceCtrl: {"off", "on"},
}

// registerText renders the current value of register reg in region r as
// one line without the newline: the number first (decimal, or hex where the
// bits matter), then its decoding. The number comes first so a script can
// take the first field, and writing it back to a register file stores the
// same value.
func registerText(r uapi.Region, reg uapi.Reg) string {
	return valueText(reg.Off, r.Load64(reg.Off))
}

// valueText decodes value v of the register at off.
func valueText(off uint32, v uint64) string {
	switch regKinds[off] {
	case kindAddr:
		return fmt.Sprintf("%#x (%d)", v, v)
	case kindSize:
		return sizeText(v)
	case kindMagic:
		return fmt.Sprintf("%#x %s", v, magicText(v))
	case kindFeat:
		return fmt.Sprintf("%#x %s", v, featuresText(v))
	case kindState:
		return fmt.Sprintf("%d %s", v, uapi.StateName(v))
	case kindBool:
		n := boolNames[off]
		if v <= 1 {
			return fmt.Sprintf("%d %s", v, n[v])
		}
		return fmt.Sprintf("%d", v)
	case kindGPID:
		return fmt.Sprintf("%d %s", v, gpidText(v))
	case kindAMTAT:
		return fmt.Sprintf("%#x %s", v, amtatEntryText(v))
	case kindCtrl:
		return fmt.Sprintf("%#x seq %d op %s", v, v>>8, amtatOpText(v&0xff))
	case kindDone:
		return fmt.Sprintf("%#x seq %d result %s", v, v>>8, amtatResultText(v&0xff))
	case kindMode:
		switch v {
		case uapi.RingFullHold:
			return "0 hold"
		case uapi.RingFullNACK:
			return "1 nack"
		}
		return fmt.Sprintf("%d unknown", v)
	case kindError:
		return fmt.Sprintf("%#x %s", v, errorText(v))
	}
	return strconv.FormatUint(v, 10)
}

// counterText is a counter's value.
func counterText(r uapi.Region, c uapi.Counter) string {
	return strconv.FormatUint(r.Counter(c), 10)
}

// traceText is trace stamp i's value (CLOCK_MONOTONIC ns).
func traceText(r uapi.Region, i int) string {
	return strconv.FormatUint(r.Load64(uapi.RegTrace+8*uint32(i)), 10)
}

// errBadValue is what parseValue returns for text that is not a number.
var errBadValue = errors.New("not a decimal or 0x-hex number")

// parseValue parses what a user writes to a register file: one decimal or
// 0x-prefixed hex number, surrounding blanks and a newline allowed. A
// leading zero is decimal (not octal) so "010" means ten, as it reads.
func parseValue(b []byte) (uint64, error) {
	s := strings.TrimSpace(string(b))
	base := 10
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		s, base = s[2:], 16
	}
	if s == "" || s[0] == '+' || s[0] == '-' || strings.ContainsRune(s, '_') {
		return 0, errBadValue
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		return 0, errBadValue
	}
	return v, nil
}

// ringPos is where a slot's content sits in a free-running ring.
type ringPos struct {
	idx     uint64 // free-running index of the slot's content
	valid   bool   // the slot holds an entry at all
	pending bool   // head <= idx < tail
}

// cmdqText renders every slot of the command queue, one per line: slot,
// the free-running index its SEQ word publishes, whether it is pending
// (between CMDQ_HEAD and CMDQ_TAIL) and the decoded descriptor.
func cmdqText(r uapi.Region, g uapi.Geometry) string {
	head, tail := r.Load64(uapi.RegCmdqHead), r.Load64(uapi.RegCmdqTail)
	var b strings.Builder
	fmt.Fprintf(&b, "# head %d tail %d entries %d\n", head, tail, g.CmdqEntries)
	for s := uint64(0); s < g.CmdqEntries; s++ {
		w := r.ReadWords8(g.CmdqOff + s*uapi.DescSize)
		seq := w[uapi.DescSeqOff/8]
		if seq == 0 {
			fmt.Fprintf(&b, "%4d empty\n", s)
			continue
		}
		idx := seq - 1
		state := "done"
		if idx >= head && idx < tail {
			state = "pending"
		}
		fmt.Fprintf(&b, "%4d idx %d %s %s\n", s, idx, state, descText(uapi.DescFromWords(w)))
	}
	return b.String()
}

// flagsText names descriptor flag bits.
func flagsText(f uint8) string {
	var names []string
	for _, n := range uapi.FlagNames {
		if f&n.Bit != 0 {
			names = append(names, n.Name)
		}
	}
	if rest := f &^ uapi.FlagsValid; rest != 0 {
		names = append(names, fmt.Sprintf("%#x", rest))
	}
	if len(names) == 0 {
		return "-"
	}
	return strings.Join(names, "|")
}

// descText decodes one command descriptor on one line.
func descText(d uapi.Desc) string {
	return fmt.Sprintf("%s flags %s dst %d proc %d src %d len %d local %#x remote %#x cookie %#x imm %#x",
		d.Opcode, flagsText(d.Flags), d.DstNode, d.DstProc, d.SrcProc, d.Length, d.LocalAddr, d.RemoteAddr, d.Cookie, d.Imm)
}

// statPos finds the free-running index of status slot s's latest content:
// the largest index below tail that maps to s.
func statPos(s, head, tail, n uint64) ringPos {
	if tail == 0 {
		return ringPos{}
	}
	last := tail - 1
	back := (last - s) & (n - 1)
	if back > last {
		return ringPos{}
	}
	idx := last - back
	return ringPos{idx: idx, valid: true, pending: idx >= head}
}

// statqText renders every slot of the receive status ring, one per line:
// slot, free-running index, pending (published by the device but not yet
// consumed by the driver, between STATQ_HEAD and STATQ_TAIL) or done, and
// the entry decoded by uapi.Status.String.
func statqText(r uapi.Region, g uapi.Geometry) string {
	head, tail := r.Load64(uapi.RegStatqHead), r.Load64(uapi.RegStatqTail)
	var b strings.Builder
	fmt.Fprintf(&b, "# head %d tail %d entries %d\n", head, tail, g.StatqEntries)
	for s := uint64(0); s < g.StatqEntries; s++ {
		st := r.ReadStatus(g.StatqOff + s*uapi.StatusSize)
		p := statPos(s, head, tail, g.StatqEntries)
		if !p.valid || st.Type == 0 {
			fmt.Fprintf(&b, "%4d empty\n", s)
			continue
		}
		state := "done"
		if p.pending {
			state = "pending"
		}
		fmt.Fprintf(&b, "%4d idx %d %s %s\n", s, p.idx, state, st.String())
	}
	return b.String()
}

// amtFlagsText names AMT entry flags.
func amtFlagsText(f uint32) string {
	var names []string
	if f&uapi.AMTFlagValid != 0 {
		names = append(names, "VALID")
	}
	if f&uapi.AMTFlagDevHead != 0 {
		names = append(names, "DEV_HEAD")
	}
	if rest := f &^ (uapi.AMTFlagValid | uapi.AMTFlagDevHead); rest != 0 {
		names = append(names, fmt.Sprintf("%#x", rest))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, " ")
}

// amtText renders AMT entry i: base, size, flags, head, tail and the bytes
// in use (tail - head).
func amtText(r uapi.Region, g uapi.Geometry, i uint64) string {
	e := g.AMTOff + i*uapi.AMTSize
	base := r.Load64At(e + uapi.AMTBase)
	cfg := r.Load64At(e + uapi.AMTCfg)
	head := r.Load64At(e + uapi.AMTHead)
	tail := r.Load64At(e + uapi.AMTTail)
	return fmt.Sprintf("base  %#x\nsize  %d\nflags %s\nhead  %d\ntail  %d\nused  %d\n",
		base, uint32(cfg), amtFlagsText(uint32(cfg>>32)), head, tail, tail-head)
}

// amtatText lists every GPID with a valid entry in the AMT Address Table
// mirror, one per line.
func amtatText(r uapi.Region, g uapi.Geometry) string {
	var b strings.Builder
	for gp := uint64(0); gp < g.AMTATEntries; gp++ {
		v := r.Load32At(g.AMTATMirOff + 4*gp)
		if v&uapi.AMTATValid != 0 {
			fmt.Fprintf(&b, "%s -> amt %d\n", gpidText(gp), uint16(v))
		}
	}
	return b.String()
}

// infoText is the device's short summary: identity, state and layout.
func infoText(r uapi.Region) string {
	g := r.ReadGeometry()
	var b strings.Builder
	p := func(k, format string, a ...any) { fmt.Fprintf(&b, "%-9s "+format+"\n", append([]any{k}, a...)...) }
	p("node", "%d", r.Load64(uapi.RegNodeID))
	p("abi", "%d", r.Load64(uapi.RegABIVersion))
	p("state", "%s", valueText(uapi.RegState, r.Load64(uapi.RegState)))
	p("features", "%s", featuresText(r.Load64(uapi.RegFeatures)))
	p("mtu", "%d", g.MTU)
	p("region", "%s", sizeText(g.RegionSize))
	p("cmdq", "off %#x entries %d", g.CmdqOff, g.CmdqEntries)
	p("statq", "off %#x entries %d", g.StatqOff, g.StatqEntries)
	p("amt", "off %#x entries %d", g.AMTOff, g.AMTEntries)
	p("amtat", "mirror %#x entries %d", g.AMTATMirOff, g.AMTATEntries)
	p("llcm", "off %#x size %d", g.LLCMOff, g.LLCMSize)
	p("scratch", "off %#x size %d", g.ScratchOff, g.ScratchSize)
	p("linkmem", "off %#x size %d", g.LinkMemOff, g.LinkMemSize)
	p("page", "%d", g.PageSize)
	p("vectors", "%d", r.Load64(uapi.RegVectors))
	return b.String()
}
