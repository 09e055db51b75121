// Package wiredoc renders package wire's tables (Fields, TypeDocs,
// FlagDocs, NackDocs) into docs/wire.md and the Wireshark dissector
// tools/wireshark/dimmnet.lua, so what a human or Wireshark reads is what
// the code sends: a type, flag, NACK code or field added in package wire
// reaches both through go generate, and a test fails until it has.
//
// Both files keep their hand-written prose and logic; only the regions
// between "BEGIN GENERATED name" and "END GENERATED name" markers are
// produced here. It lives outside package wire because it names refusal
// codes after uapi's errors, and wire must not depend on uapi.
package wiredoc

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// Generate is the command both files' markers tell a reader to run.
const Generate = "go generate ./vdev/wire"

// Errors from Markdown and Lua, for a file whose markers are broken.
var (
	// ErrMarker means a region marker is missing, repeated, unbalanced or
	// names a region the file type does not have.
	ErrMarker = errors.New("wiredoc: bad generated-region marker")
)

// Markdown returns docs/wire.md (doc) with its generated regions
// ("header", "subs", "types", "flags", "nack", "dissector") rendered
// afresh.
func Markdown(doc string) (string, error) {
	return replace(doc, "<!-- ", " -->", map[string]string{
		"header":    mdHeader(),
		"subs":      mdSubs(),
		"types":     mdTypes(),
		"flags":     mdFlags(),
		"nack":      mdNack(),
		"dissector": mdDissector(),
	})
}

// Lua returns the dissector source (src) with its generated region
// ("tables") rendered afresh.
func Lua(src string) (string, error) {
	return replace(src, "-- ", "", map[string]string{"tables": luaTables()})
}

// replace rewrites every region of src between a line
// open+"BEGIN GENERATED <name> ..."+close and the line
// open+"END GENERATED <name>"+close with regions[name]; each region must
// appear exactly once. The marker lines themselves are rewritten too, so
// their wording stays uniform.
func replace(src, open, close string, regions map[string]string) (string, error) {
	lines := strings.SplitAfter(src, "\n")
	var b strings.Builder
	done := map[string]bool{}
	for i := 0; i < len(lines); i++ {
		name, ok := marker(lines[i], open, close, "BEGIN")
		if !ok {
			if n, end := marker(lines[i], open, close, "END"); end {
				return "", fmt.Errorf("line %d: END of %q without BEGIN: %w", i+1, n, ErrMarker)
			}
			b.WriteString(lines[i])
			continue
		}
		body, known := regions[name]
		if !known || done[name] {
			return "", fmt.Errorf("line %d: region %q unknown or repeated: %w", i+1, name, ErrMarker)
		}
		done[name] = true
		j := i + 1
		for ; j < len(lines); j++ {
			if n, end := marker(lines[j], open, close, "END"); end {
				if n != name {
					return "", fmt.Errorf("line %d: END of %q inside %q: %w", j+1, n, name, ErrMarker)
				}
				break
			}
			if n, begin := marker(lines[j], open, close, "BEGIN"); begin {
				return "", fmt.Errorf("line %d: BEGIN of %q inside %q: %w", j+1, n, name, ErrMarker)
			}
		}
		if j == len(lines) {
			return "", fmt.Errorf("region %q has no END: %w", name, ErrMarker)
		}
		fmt.Fprintf(&b, "%sBEGIN GENERATED %s by %s from package wire; do not edit%s\n", open, name, Generate, close)
		b.WriteString(body)
		fmt.Fprintf(&b, "%sEND GENERATED %s%s\n", open, name, close)
		i = j
	}
	for name := range regions {
		if !done[name] {
			return "", fmt.Errorf("region %q missing: %w", name, ErrMarker)
		}
	}
	return b.String(), nil
}

// marker reports whether line is a kind ("BEGIN" or "END") marker, and
// the region it names.
func marker(line, open, close, kind string) (string, bool) {
	s := strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(s, open+kind+" GENERATED ") || !strings.HasSuffix(s, close) {
		return "", false
	}
	f := strings.Fields(strings.TrimPrefix(s, open+kind+" GENERATED "))
	if len(f) == 0 {
		return "", false
	}
	return f[0], true
}

// Abbrev is the dissector's name for a Go field or flag name, as in
// display filters: "PayloadLen" is "payload_len", "DirectAMT"
// "direct_amt", "MsgID" "msg_id".
func Abbrev(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) && i > 0 &&
			(unicode.IsLower(r[i-1]) || (i+1 < len(r) && unicode.IsLower(r[i+1]) && unicode.IsUpper(r[i-1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(c))
	}
	return b.String()
}

// NackName names a NACK code as the dissector shows it: the NackDocs
// name, the uapi error a refusal carries, "REFUSED(n)" for a refusal
// code uapi does not define, or "" for an undefined code.
func NackName(c uint16) string {
	for _, d := range wire.NackDocs {
		if d.Code == c {
			return d.Name
		}
	}
	if c >= 1 && c <= wire.NackRefusalMax {
		if c < uint16(uapi.NumErrnos) {
			return uapi.Errno(c).String()
		}
		return fmt.Sprintf("REFUSED(%d)", c)
	}
	return ""
}

// nackCodes lists the named NACK codes in ascending order, with their
// meaning: NackDocs and the refusals uapi defines.
func nackCodes() []wire.NackDoc {
	var cs []wire.NackDoc
	for c := 0; c <= 0xFFFF; c++ {
		n := NackName(uint16(c))
		if n == "" || strings.HasPrefix(n, "REFUSED(") {
			continue
		}
		doc := ""
		for _, d := range wire.NackDocs {
			if d.Code == uint16(c) {
				doc = d.Doc
			}
		}
		if doc == "" {
			doc = "refusal: " + uapi.ErrnoDocs[c]
		}
		cs = append(cs, wire.NackDoc{Code: uint16(c), Name: n, Doc: doc})
	}
	return cs
}

// mdCell makes s safe in a Markdown table cell.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func mdHeader() string {
	var b strings.Builder
	b.WriteString("| off | size | field | meaning |\n|----:|-----:|-------|---------|\n")
	for _, f := range wire.Fields {
		fmt.Fprintf(&b, "| %d | %d | %s | %s |\n", f.Off, f.Size, f.Name, mdCell(f.Doc))
	}
	return b.String()
}

func mdSubs() string {
	var b strings.Builder
	b.WriteString("| off | size | field | meaning |\n|----:|-----:|-------|---------|\n")
	for _, f := range wire.SubFields {
		fmt.Fprintf(&b, "| %d | %d | %s | %s |\n", f.Off, f.Size, f.Name, mdCell(f.Doc))
	}
	fmt.Fprintf(&b, "\nA frame carries 1..%d sub-messages (`wire.MaxSubs`), each %d bytes of sub-header (`wire.SubLen`) and its data padded with zeros to a multiple of 8 bytes.\n", wire.MaxSubs, wire.SubLen)
	return b.String()
}

func mdTypes() string {
	var b strings.Builder
	b.WriteString("| value | name | meaning |\n|------:|------|---------|\n")
	valid := map[int]bool{}
	for _, d := range wire.TypeDocs {
		valid[int(d.Type)] = true
		fmt.Fprintf(&b, "| %d | %s | %s |\n", d.Type, d.Name, mdCell(d.Doc))
	}
	fmt.Fprintf(&b, "\nOther values (%s) are invalid and rejected (`ErrBadType`).\n", ranges(0, 255, func(v int) bool { return !valid[v] }))
	return b.String()
}

func mdFlags() string {
	var b strings.Builder
	b.WriteString("| bit | mask | name | meaning |\n|----:|-------:|------|---------|\n")
	var known wire.Flags
	for _, d := range wire.FlagDocs {
		known |= d.Flag
		fmt.Fprintf(&b, "| %d | 0x%04x | %s | %s |\n", bit(d.Flag), uint16(d.Flag), d.Name, mdCell(d.Doc))
	}
	if rest := ranges(0, 15, func(i int) bool { return known&(1<<i) == 0 }); rest != "" {
		fmt.Fprintf(&b, "| %s | | — | undefined: sent as 0, carried through unchanged on receive |\n", rest)
	}
	return b.String()
}

func mdNack() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Codes 1..%d are refusals: %s. The refusals `uapi` defines are named after its errors.\n\n", wire.NackRefusalMax, wire.NackRefusalDoc)
	b.WriteString("| code | name | meaning |\n|-----:|------|---------|\n")
	unnamed := func() { // the refusal codes uapi does not define yet
		if first := uint16(uapi.NumErrnos); first <= wire.NackRefusalMax {
			fmt.Fprintf(&b, "| %d..%d | REFUSED(n) | not named by this version: a protocol error, counted RX_BAD_NACK and ignored (no command fails with it) |\n", first, wire.NackRefusalMax)
		}
	}
	for _, c := range nackCodes() {
		if c.Code > wire.NackRefusalMax && unnamed != nil {
			unnamed()
			unnamed = nil
		}
		fmt.Fprintf(&b, "| %d | %s | %s |\n", c.Code, c.Name, mdCell(c.Doc))
	}
	if unnamed != nil {
		unnamed()
	}
	b.WriteString("\nOther codes are undefined and, like unnamed refusals, counted RX_BAD_NACK and ignored; the dissector shows them unnamed.\n")
	return b.String()
}

func mdDissector() string {
	var b strings.Builder
	b.WriteString("| field | label | meaning |\n|-------|-------|---------|\n")
	for _, f := range protoFields() {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", f.abbr, f.title, mdCell(f.doc))
	}
	return b.String()
}

// ranges renders the values v in lo..hi with in(v) as "a, b..c".
func ranges(lo, hi int, in func(int) bool) string {
	var parts []string
	for v := lo; v <= hi; v++ {
		if !in(v) {
			continue
		}
		w := v
		for w+1 <= hi && in(w+1) {
			w++
		}
		if w == v {
			parts = append(parts, fmt.Sprint(v))
		} else {
			parts = append(parts, fmt.Sprintf("%d..%d", v, w))
		}
		v = w
	}
	return strings.Join(parts, ", ")
}

func bit(f wire.Flags) int {
	for i := range 16 {
		if f == 1<<i {
			return i
		}
	}
	return -1
}

// protoField is one field the dissector registers.
type protoField struct {
	key   string // its name in the dissector's pf table
	abbr  string // display-filter name
	title string
	doc   string // in docs/wire.md's list of fields
	lua   string // the ProtoField constructor call, with the full meaning as its blurb
}

// protoFields lists every field the dissector registers: the header
// fields, one boolean per flag bit, and the fields it derives.
func protoFields() []protoField {
	var fs []protoField
	for _, f := range wire.Fields {
		key := Abbrev(f.Name)
		abbr := "dimmnet." + key
		disp, vs := "base.DEC", "nil"
		if f.Hex {
			disp = "base.HEX"
		}
		if f.Name == "Type" {
			vs = "types"
		}
		fs = append(fs, protoField{key, abbr, f.Title, "header field " + f.Name,
			fmt.Sprintf("ProtoField.uint%d(%s, %s, %s, %s, nil, %s)", 8*f.Size, lq(abbr), lq(f.Title), disp, vs, lq(f.Doc))})
	}
	for _, f := range wire.SubFields {
		key := "sub." + Abbrev(f.Name)
		abbr := "dimmnet." + key
		disp := "base.DEC"
		if f.Hex {
			disp = "base.HEX"
		}
		fs = append(fs, protoField{key, abbr, f.Title, "PUSHB sub-header field " + f.Name,
			fmt.Sprintf("ProtoField.uint%d(%s, %s, %s, nil, nil, %s)", 8*f.Size, lq(abbr), lq(f.Title), disp, lq(f.Doc))})
	}
	for _, d := range wire.FlagDocs {
		key := "flags." + Abbrev(d.Name)
		abbr := "dimmnet." + key
		doc := fmt.Sprintf("flag bit %d, %s", bit(d.Flag), d.Name)
		fs = append(fs, protoField{key, abbr, d.Name, doc,
			fmt.Sprintf("ProtoField.bool(%s, %s, 16, nil, 0x%04x, %s)", lq(abbr), lq(d.Name), uint16(d.Flag), lq(d.Doc))})
	}
	for _, e := range []struct{ key, title, doc, ctor string }{
		{"nack_code", "NACK code", fmt.Sprintf("NACK: Code by name (as in the NACK code table); lets a filter such as dimmnet.nack_code == %d pick NACKs only", wire.NackSeqErr), "ProtoField.uint16(%s, %s, base.DEC, nack_names, nil, %s)"},
		{"sack.seq", "Selectively acked", "with flag Sack: one per sequence number the bitmap in Imm reports received (Ack+2+i for bit i)", "ProtoField.uint32(%s, %s, base.DEC, nil, nil, %s)"},
		{"checksum.status", "Checksum status", "generated: 1 good, 0 bad (CRC32C recomputed by the dissector; also an expert error and [BAD CRC] in the summary), 2 not verified (flag CRC clear or payload cut by the capture)", "ProtoField.uint8(%s, %s, base.DEC, { [0] = \"Bad\", [1] = \"Good\", [2] = \"Unverified\" }, nil, %s)"},
		{"payload", "Payload", "the PayloadLen payload bytes", "ProtoField.bytes(%s, %s, base.NONE, %s)"},
		{"sub", "Sub-message", "PUSHB: one per sub-message whose framing parses (as a receiver checks it), numbered from 0 (the bit of a refusal NACK's Imm that names it)", "ProtoField.uint8(%s, %s, base.DEC, nil, nil, %s)"},
		{"sub.data", "Data", "PUSHB: a sub-message's Len bytes", "ProtoField.bytes(%s, %s, base.NONE, %s)"},
		{"auth.counter", "Frame counter", "with flag Auth: the trailer's frame counter, the nonce of the tag under the session's key; a receiver takes each counter once", "ProtoField.uint64(%s, %s, base.DEC, nil, nil, %s)"},
		{"auth.tag", "Authentication tag", "with flag Auth: AES-GMAC (HELLO: HMAC-SHA256, first 16 bytes) over the frame and the counter; the dissector cannot check it without the key", "ProtoField.bytes(%s, %s, base.NONE, %s)"},
	} {
		abbr := "dimmnet." + e.key
		fs = append(fs, protoField{e.key, abbr, e.title, e.doc, fmt.Sprintf(e.ctor, lq(abbr), lq(e.title), lq(e.doc))})
	}
	return fs
}

// lq quotes s as a Lua string literal.
func lq(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

func luaTables() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("local HEADER_LEN = %d\n", wire.HeaderLen)
	p("local VERSION = %d\n", wire.Version1)
	p("local ETHERTYPE = 0x%04X\n", uint16(wire.EtherType))
	p("local ETH_HEADER_LEN = %d\n", wire.EthHeaderLen)
	p("local AUTH_TRAILER_LEN = %d\n\n", wire.AuthTrailerLen)

	p("-- Packet types (wire.TypeDocs): names by value, values by name.\nlocal types = {\n")
	for _, d := range wire.TypeDocs {
		p("    [%d] = %s,\n", d.Type, lq(d.Name))
	}
	p("}\nlocal TYPE = {\n")
	for _, d := range wire.TypeDocs {
		p("    %s = %d,\n", d.Name, d.Type)
	}
	p("}\n\n")

	p("-- Flag bits (wire.FlagDocs), lowest first, and masks by name.\nlocal flagbits = {\n")
	for _, d := range wire.FlagDocs {
		p("    { key = %s, name = %s, mask = 0x%04x },\n", lq("flags."+Abbrev(d.Name)), lq(d.Name), uint16(d.Flag))
	}
	p("}\nlocal FLAG = {\n")
	for _, d := range wire.FlagDocs {
		p("    %s = 0x%04x,\n", d.Name, uint16(d.Flag))
	}
	p("}\n\n")

	p("-- NACK codes (wire.NackDocs; refusals named after uapi's errors).\nlocal NACK = {\n")
	for _, d := range wire.NackDocs {
		p("    %s = %d,\n", d.Name, d.Code)
	}
	p("}\nlocal NACK_REFUSAL_MAX = %d\nlocal nack_names = {\n", wire.NackRefusalMax)
	for _, c := range nackCodes() {
		p("    [%d] = %s,\n", c.Code, lq(c.Name))
	}
	p("}\nfor c = 1, NACK_REFUSAL_MAX do\n    nack_names[c] = nack_names[c] or string.format(\"REFUSED(%%d)\", c)\nend\n\n")

	p("-- Header fields (wire.Fields) in wire order; F[key] finds one.\nlocal fields = {\n")
	for _, f := range wire.Fields {
		p("    { key = %s, off = %d, size = %d },\n", lq(Abbrev(f.Name)), f.Off, f.Size)
	}
	p("}\nlocal F = {}\nfor _, fd in ipairs(fields) do F[fd.key] = fd end\n\n")

	p("-- PUSHB sub-header fields (wire.SubFields) in wire order; SF[key] finds one.\n")
	p("local SUB_LEN = %d\nlocal MAX_SUBS = %d\nlocal subfields = {\n", wire.SubLen, wire.MaxSubs)
	for _, f := range wire.SubFields {
		p("    { key = %s, off = %d, size = %d },\n", lq(Abbrev(f.Name)), f.Off, f.Size)
	}
	p("}\nlocal SF = {}\nfor _, fd in ipairs(subfields) do SF[fd.key] = fd end\n\n")

	p("-- Protocol fields: the header fields, one boolean per flag bit, and\n-- what the dissector derives. pf[key] finds one.\n")
	p("local pf, pflist = {}, {}\nlocal function field(key, p)\n    pf[key] = p\n    pflist[#pflist + 1] = p\nend\n")
	for _, f := range protoFields() {
		p("field(%s, %s)\n", lq(f.key), f.lua)
	}
	return b.String()
}
