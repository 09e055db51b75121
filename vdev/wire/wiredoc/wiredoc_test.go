package wiredoc

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// The checked-in document and dissector must be exactly what the tables
// generate, so neither can drift from the code again.
func TestGeneratedFilesUpToDate(t *testing.T) {
	for _, f := range []struct {
		path   string
		render func(string) (string, error)
	}{
		{"../../../docs/wire.md", Markdown},
		{"../../../tools/wireshark/dimmnet.lua", Lua},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.render(string(b))
		if err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
		if got != string(b) {
			t.Errorf("%s disagrees with package wire: run %s", f.path, Generate)
		}
	}
}

// Every type, flag, named NACK code and field reaches both outputs, under
// the names tools and people use.
func TestGeneratedRegionsListEverything(t *testing.T) {
	md, lua := mdHeader()+mdTypes()+mdFlags()+mdNack()+mdDissector(), luaTables()
	for _, d := range wire.TypeDocs {
		want(t, md, fmt.Sprintf("| %d | %s |", d.Type, d.Name))
		want(t, lua, fmt.Sprintf("[%d] = %q,", d.Type, d.Name))
	}
	for _, d := range wire.FlagDocs {
		want(t, md, fmt.Sprintf("| 0x%04x | %s |", uint16(d.Flag), d.Name))
		want(t, md, "`dimmnet.flags."+Abbrev(d.Name)+"`")
		want(t, lua, fmt.Sprintf("mask = 0x%04x", uint16(d.Flag)))
	}
	for _, d := range wire.NackDocs {
		want(t, md, fmt.Sprintf("| %d | %s |", d.Code, d.Name))
		want(t, lua, fmt.Sprintf("[%d] = %q,", d.Code, d.Name))
	}
	for e := uapi.Errno(1); e < uapi.NumErrnos; e++ {
		want(t, md, fmt.Sprintf("| %d | %s | refusal: %s |", e, e.String(), uapi.ErrnoDocs[e]))
		want(t, lua, fmt.Sprintf("[%d] = %q,", e, e.String()))
	}
	for _, f := range wire.Fields {
		want(t, md, fmt.Sprintf("| %d | %d | %s |", f.Off, f.Size, f.Name))
		want(t, md, "`dimmnet."+Abbrev(f.Name)+"`")
		want(t, lua, fmt.Sprintf("{ key = %q, off = %d, size = %d }", Abbrev(f.Name), f.Off, f.Size))
	}
	// Undefined values are said to be undefined: type 0, the values
	// after the last type, the bits above the last flag, and the
	// refusals uapi does not name.
	want(t, md, "Other values (0, ")
	if last := wire.TypeDocs[len(wire.TypeDocs)-1].Type; last < 255 {
		want(t, md, fmt.Sprintf("%d..255) are invalid", last+1))
	}
	if top := bit(wire.FlagDocs[len(wire.FlagDocs)-1].Flag); top < 15 {
		want(t, md, fmt.Sprintf("| %d..15 | | — | undefined", top+1))
	}
	if uint16(uapi.NumErrnos) <= wire.NackRefusalMax {
		want(t, md, fmt.Sprintf("| %d..%d | REFUSED(n) |", uapi.NumErrnos, wire.NackRefusalMax))
	}
}

func want(t *testing.T, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Errorf("generated text lacks %q", sub)
	}
}

// Hand-written text outside the markers survives; broken markers are
// errors rather than silently dropped or duplicated text.
func TestRegionMarkers(t *testing.T) {
	regions := map[string]string{"a": "new a\n", "b": "new b\n"}
	src := "intro\n-- BEGIN GENERATED a\nold\n-- END GENERATED a\nmiddle\n-- BEGIN GENERATED b stale words\n-- END GENERATED b\nend\n"
	got, err := replace(src, "-- ", "", regions)
	if err != nil {
		t.Fatal(err)
	}
	wantText := "intro\n-- BEGIN GENERATED a by " + Generate + " from package wire; do not edit\nnew a\n-- END GENERATED a\nmiddle\n" +
		"-- BEGIN GENERATED b by " + Generate + " from package wire; do not edit\nnew b\n-- END GENERATED b\nend\n"
	if got != wantText {
		t.Fatalf("got\n%s\nwant\n%s", got, wantText)
	}
	again, err := replace(got, "-- ", "", regions)
	if err != nil || again != got {
		t.Fatalf("second pass changed the text (%v)", err)
	}
	for name, bad := range map[string]string{
		"missing region":    "-- BEGIN GENERATED a\n-- END GENERATED a\n",
		"no END":            "-- BEGIN GENERATED a\n-- BEGIN GENERATED b\n-- END GENERATED b\n",
		"END without BEGIN": "-- END GENERATED a\n-- BEGIN GENERATED b\n-- END GENERATED b\n",
		"repeated":          "-- BEGIN GENERATED a\n-- END GENERATED a\n-- BEGIN GENERATED a\n-- END GENERATED a\n-- BEGIN GENERATED b\n-- END GENERATED b\n",
		"unknown":           "-- BEGIN GENERATED c\n-- END GENERATED c\n-- BEGIN GENERATED a\n-- END GENERATED a\n-- BEGIN GENERATED b\n-- END GENERATED b\n",
		"crossed":           "-- BEGIN GENERATED a\n-- END GENERATED b\n",
	} {
		if _, err := replace(bad, "-- ", "", regions); !errors.Is(err, ErrMarker) {
			t.Errorf("%s: error %v, want ErrMarker", name, err)
		}
	}
}

// Abbrev keeps the display-filter names Wireshark users already type.
func TestAbbrevKeepsFilterNames(t *testing.T) {
	for in, out := range map[string]string{
		"Version": "version", "SrcNode": "src_node", "MsgID": "msg_id", "PayloadLen": "payload_len",
		"PktStatus": "pkt_status", "DirectAMT": "direct_amt", "CRC": "crc", "AckValid": "ack_valid",
	} {
		if got := Abbrev(in); got != out {
			t.Errorf("Abbrev(%q) = %q, want %q", in, got, out)
		}
	}
}

// NackName names refusals after uapi's errors and leaves undefined codes
// unnamed.
func TestNackName(t *testing.T) {
	for c, n := range map[uint16]string{
		wire.NackRetry: "RETRY", wire.NackSeqErr: "SEQ_ERR", uint16(uapi.EBadTag): "BAD_TAG",
		uint16(uapi.ERemoteAddr): "REMOTE_ADDR", wire.NackRefusalMax: "REFUSED(255)", 0x101: "",
	} {
		if got := NackName(c); got != n {
			t.Errorf("NackName(%d) = %q, want %q", c, got, n)
		}
	}
}
