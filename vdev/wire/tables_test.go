package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"go/build"
	"reflect"
	"strings"
	"testing"

	"github.com/google/gopacket"
)

// headerFields lists Header's own fields (not the embedded BaseLayer).
func headerFields() []reflect.StructField {
	var fs []reflect.StructField
	ht := reflect.TypeFor[Header]()
	for i := range ht.NumField() {
		if f := ht.Field(i); !f.Anonymous {
			fs = append(fs, f)
		}
	}
	return fs
}

// Fields must name every Header field once, in wire order, tile the 64
// header bytes, and say where Put writes and DecodeFromBytes reads each
// field: the generated docs and dissector trust it.
func TestFieldsDescribeTheEncoding(t *testing.T) {
	hf := headerFields()
	if len(hf) != len(Fields) {
		t.Fatalf("Header has %d fields, Fields lists %d", len(hf), len(Fields))
	}
	off := 0
	for i, f := range Fields {
		if f.Name != hf[i].Name {
			t.Errorf("Fields[%d] is %s, Header's field %d is %s", i, f.Name, i, hf[i].Name)
		}
		if f.Off != off {
			t.Errorf("%s at offset %d, want %d (gap or overlap)", f.Name, f.Off, off)
		}
		if f.Size != int(hf[i].Type.Size()) {
			t.Errorf("%s: size %d, Go type %v has %d", f.Name, f.Size, hf[i].Type, hf[i].Type.Size())
		}
		if f.Title == "" || f.Doc == "" {
			t.Errorf("%s: no title or doc", f.Name)
		}
		off = f.Off + f.Size
	}
	if off != HeaderLen {
		t.Errorf("Fields cover %d bytes, the header is %d", off, HeaderLen)
	}
	at := map[string]int{}
	for _, f := range Fields {
		at[f.Name] = f.Off
	}
	if at["Tag"] != offTag || at["Checksum"] != offChecksum {
		t.Errorf("offTag %d, offChecksum %d disagree with Fields", offTag, offChecksum)
	}

	for _, f := range Fields {
		// The field alone holds a value with every byte distinct.
		var h Header
		v := reflect.ValueOf(&h).Elem().FieldByName(f.Name)
		want := make([]byte, 8)
		binary.LittleEndian.PutUint64(want, 0x8877665544332211)
		want = want[:f.Size]
		v.SetUint(binary.LittleEndian.Uint64(append(append([]byte(nil), want...), make([]byte, 8-f.Size)...)))
		b := make([]byte, HeaderLen)
		h.Put(b)
		exp := make([]byte, HeaderLen)
		copy(exp[f.Off:], want)
		if !bytes.Equal(b, exp) {
			t.Errorf("Put of %s alone wrote\n%x\nwant\n%x", f.Name, b, exp)
		}
		var d Header
		// Version, type and length errors still fill every field.
		_ = d.DecodeFromBytes(exp, gopacket.NilDecodeFeedback)
		got := reflect.ValueOf(&d).Elem().FieldByName(f.Name).Uint()
		if got != v.Uint() {
			t.Errorf("DecodeFromBytes read %s = %#x, want %#x", f.Name, got, v.Uint())
		}
		for _, o := range Fields {
			if o.Name != f.Name && reflect.ValueOf(&d).Elem().FieldByName(o.Name).Uint() != 0 {
				t.Errorf("decoding bytes of %s alone set %s", f.Name, o.Name)
			}
		}
	}
}

// TypeDocs is the set of valid types: every listed type is valid and
// named, every other value is not.
func TestTypeDocsAreTheValidTypes(t *testing.T) {
	listed := map[Type]bool{}
	prev := Type(0)
	for _, d := range TypeDocs {
		if d.Type <= prev {
			t.Errorf("%s (%d) out of order or repeated", d.Name, d.Type)
		}
		prev = d.Type
		listed[d.Type] = true
		if d.Name == "" || d.Doc == "" || d.Type.String() != d.Name {
			t.Errorf("type %d: name %q doc %q String %q", d.Type, d.Name, d.Doc, d.Type)
		}
	}
	for v := range 256 {
		ty := Type(v)
		if ty.Valid() != listed[ty] {
			t.Errorf("Type(%d).Valid() = %v, listed %v", v, ty.Valid(), listed[ty])
		}
	}
	if listed[0] {
		t.Error("type 0 is listed: an all-zero header would look valid")
	}
}

// Every FlagDocs entry is one bit, in ascending order, with a name
// Flags.String prints; unlisted bits print as hex.
func TestFlagDocsNameEveryBit(t *testing.T) {
	var seen Flags
	prev := Flags(0)
	names := map[string]bool{}
	for _, d := range FlagDocs {
		if d.Flag == 0 || d.Flag&(d.Flag-1) != 0 {
			t.Errorf("%s is %#x, not one bit", d.Name, uint16(d.Flag))
		}
		if d.Flag <= prev || seen&d.Flag != 0 {
			t.Errorf("%s out of order or repeated", d.Name)
		}
		if d.Name == "" || d.Doc == "" || names[strings.ToLower(d.Name)] {
			t.Errorf("flag %#x: name %q doc %q", uint16(d.Flag), d.Name, d.Doc)
		}
		names[strings.ToLower(d.Name)] = true
		prev, seen = d.Flag, seen|d.Flag
		if d.Flag.String() != d.Name {
			t.Errorf("Flags(%#x).String() = %q, want %q", uint16(d.Flag), d.Flag.String(), d.Name)
		}
	}
	if seen != knownFlags {
		t.Errorf("knownFlags %#x, FlagDocs %#x", uint16(knownFlags), uint16(seen))
	}
	if unlisted := ^seen & (seen + 1); unlisted != 0 { // the lowest bit FlagDocs lacks
		if got, want := unlisted.String(), fmt.Sprintf("%#x", uint16(unlisted)); got != want {
			t.Errorf("unlisted bit prints %q, want %q", got, want)
		}
	}
}

// Named NACK codes lie outside the refusal range, and NackCodeName
// names every code by its class.
func TestNackDocsNameTheNonRefusals(t *testing.T) {
	names := map[string]bool{}
	for _, d := range NackDocs {
		if d.Code >= 1 && d.Code <= NackRefusalMax {
			t.Errorf("%s (%d) lies in the refusal range 1..%d", d.Name, d.Code, NackRefusalMax)
		}
		if d.Name == "" || d.Doc == "" || names[d.Name] {
			t.Errorf("NACK code %d: name %q doc %q", d.Code, d.Name, d.Doc)
		}
		names[d.Name] = true
		if NackCodeName(d.Code) != d.Name {
			t.Errorf("NackCodeName(%d) = %q, want %q", d.Code, NackCodeName(d.Code), d.Name)
		}
	}
	for c, want := range map[uint16]string{NackRetry: "RETRY", NackSeqErr: "SEQ_ERR", 1: "REFUSED(1)", NackRefusalMax: "REFUSED(255)", 0x101: "NACK(0x101)"} {
		if got := NackCodeName(c); got != want {
			t.Errorf("NackCodeName(%d) = %q, want %q", c, got, want)
		}
	}
}

// Package wire stays free of uapi: devices and capture tools share it
// without the driver ABI, and only wiredoc names refusals after uapi.
func TestWireDoesNotImportUapi(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasSuffix(imp, "/uapi") || strings.Contains(imp, "/uapi/") {
			t.Errorf("package wire imports %s", imp)
		}
	}
}
