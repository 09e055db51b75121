package capture

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/dimmnet/dimmnet/vdev/wire"
	"github.com/dimmnet/dimmnet/vdev/wire/wiredoc"
)

// dissector is the absolute path of tools/wireshark/dimmnet.lua.
func dissector(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	p, err := filepath.Abs(filepath.Join(filepath.Dir(file), "..", "..", "..", "tools", "wireshark", "dimmnet.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// tsharkCmd builds a tshark command line that loads the dissector.
// Debian's init.lua sets run_user_scripts_when_superuser = true, so -X
// lua_script works as root too (tshark only warns about running as root);
// runTshark fails loudly if a tshark build ever refuses, rather than
// skipping.
func tsharkCmd(ctx context.Context, tshark, lua string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tshark, append([]string{"-X", "lua_script:" + lua}, args...)...)
	// A private, empty configuration: no user profile or plugin changes
	// what is decoded.
	cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+os.TempDir()+"/dimmnet-tshark-nonexistent", "LC_ALL=C")
	return cmd
}

// needTshark returns tshark's path and the dissector's, or skips the test.
func needTshark(t *testing.T) (tshark, lua string) {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (Debian: apt-get install tshark); skipping the Wireshark dissector test")
	}
	return tshark, dissector(t)
}

// runTshark runs tshark with the dissector over a capture and returns its
// standard output.
func runTshark(t *testing.T, tshark, lua string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := tsharkCmd(ctx, tshark, lua, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		hint := ""
		if os.Geteuid() == 0 && strings.Contains(stderr.String(), "valid field") {
			hint = "\n(tshark did not load the Lua plugin as root: its init.lua must set run_user_scripts_when_superuser = true, as Debian's does)"
		}
		t.Fatalf("%v: %v\n%s%s", cmd, err, stderr.String(), hint)
	}
	if strings.Contains(stderr.String(), "Lua") {
		t.Fatalf("tshark reported a Lua problem:\n%s", stderr.String())
	}
	return stdout.Bytes()
}

// pdmlField is one field (or protocol) of tshark's PDML output.
type pdmlField struct {
	Name     string      `xml:"name,attr"`
	Show     string      `xml:"show,attr"`
	Showname string      `xml:"showname,attr"`
	Value    string      `xml:"value,attr"`
	Fields   []pdmlField `xml:"field"`
	Protos   []pdmlField `xml:"proto"`
}

// decoded is what tshark made of one frame: its fields by name (in tree
// order, repeated ones several times), and whether anything in it is
// malformed or a Lua error.
type decoded struct {
	fields    map[string][]pdmlField
	malformed []string
	info      string
}

func (d *decoded) walk(f pdmlField) {
	d.fields[f.Name] = append(d.fields[f.Name], f)
	// The malformed expert group (PI_MALFORMED), and the pseudo-protocol
	// Wireshark adds on an exception or a malformed expert item.
	if f.Name == "_ws.malformed" || (f.Name == "_ws.expert.group" && f.Show == "117440512") ||
		strings.Contains(f.Showname, "Lua Error") {
		d.malformed = append(d.malformed, f.Name+" "+f.Showname)
	}
	for _, c := range f.Fields {
		d.walk(c)
	}
	for _, c := range f.Protos {
		d.walk(c)
	}
}

func (d *decoded) one(name string) (pdmlField, bool) {
	fs := d.fields[name]
	if len(fs) != 1 {
		return pdmlField{}, false
	}
	return fs[0], true
}

// decode runs tshark over the capture at path: the PDML tree of every
// frame and its summary line.
func decode(t *testing.T, tshark, lua, path string) []*decoded {
	t.Helper()
	var doc struct {
		Packets []struct {
			Protos []pdmlField `xml:"proto"`
		} `xml:"packet"`
	}
	if err := xml.Unmarshal(runTshark(t, tshark, lua, "-r", path, "-T", "pdml"), &doc); err != nil {
		t.Fatalf("tshark PDML: %v", err)
	}
	infos := strings.Split(strings.TrimSuffix(string(runTshark(t, tshark, lua, "-r", path, "-T", "fields", "-e", "_ws.col.Info")), "\n"), "\n")
	if len(infos) != len(doc.Packets) {
		t.Fatalf("%d summary lines for %d packets", len(infos), len(doc.Packets))
	}
	var out []*decoded
	for i, p := range doc.Packets {
		d := &decoded{fields: map[string][]pdmlField{}, info: infos[i]}
		for _, pr := range p.Protos {
			d.walk(pr)
		}
		out = append(out, d)
	}
	return out
}

// tsharkCase is one frame the dissector test writes.
type tsharkCase struct {
	why       string
	frame     []byte // as on the wire
	snap      int    // bytes captured, when fewer than the frame
	malformed bool   // the Go parser rejects it, so the dissector must say so
}

// tsharkCases builds frames of every type, every flag and every NACK code
// package wire defines, by iterating its tables, so a type, flag or code
// added there is covered without touching this test; then edge cases and
// the malformed frames the dissector must flag.
func tsharkCases() []tsharkCase {
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(ty wire.Type, flags wire.Flags) wire.Header {
		return wire.Header{
			Version: wire.Version1, Type: ty, Flags: flags,
			SrcNode: uint16(rng.Uint32()), DstNode: uint16(rng.Uint32()),
			SrcProc: rng.Uint32(), DstProc: rng.Uint32(),
			Seq: rng.Uint32(), Ack: rng.Uint32(), MsgID: rng.Uint32(),
			Offset: rng.Uint32(), MsgLen: rng.Uint32(),
			Addr: rng.Uint64(), Imm: rng.Uint64(),
			Code: uint16(rng.Uint32()), Tag: uint16(rng.Uint32()),
			Checksum: rng.Uint32(), // kept when FlagCRC is clear
		}
	}
	payload := func() []byte {
		p := make([]byte, rng.IntN(200))
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	frame := func(h wire.Header, p []byte) []byte {
		return wire.AppendFrame(nil, wire.NodeMAC(h.DstNode), wire.NodeMAC(h.SrcNode), &h, p)
	}
	var cs []tsharkCase
	add := func(why string, h wire.Header, p []byte) {
		cs = append(cs, tsharkCase{why: why, frame: frame(h, p)})
	}

	for _, d := range wire.TypeDocs {
		add("type "+d.Name, random(d.Type, wire.FlagSeq|wire.FlagFirst|wire.FlagLast|wire.FlagAckValid), payload())
	}
	for i, d := range wire.FlagDocs {
		ty := wire.TypeDocs[i%len(wire.TypeDocs)].Type
		add("flag "+d.Name+" alone", random(ty, d.Flag), payload())
		add("flag "+d.Name+" with CRC", random(ty, d.Flag|wire.FlagCRC), payload())
	}
	var all wire.Flags
	for _, d := range wire.FlagDocs {
		all |= d.Flag
	}
	add("every flag", random(wire.TypePush, all), payload())
	add("every bit, undefined ones too", random(wire.TypeAck, 0xFFFF), nil)
	add("no flag", random(wire.TypeIPush, 0), nil)

	// Every NACK code: the named ones, every refusal (named by uapi or
	// not), and undefined codes, which are odd but not malformed.
	codes := []uint16{0x101, 0xFFFF}
	for _, d := range wire.NackDocs {
		codes = append(codes, d.Code)
	}
	for c := uint16(1); c <= wire.NackRefusalMax; c++ {
		codes = append(codes, c)
	}
	for i, c := range codes {
		f := wire.FlagAckValid
		if i%2 == 0 {
			f |= wire.FlagSack
		}
		h := random(wire.TypeNack, f)
		h.Code = c
		add(fmt.Sprintf("NACK code %d", c), h, nil)
	}
	h := random(wire.TypeAck, wire.FlagSack|wire.FlagAckValid)
	h.Ack, h.Imm = 1<<32-3, 0b1011|1<<63 // a SACK across the wrap of the sequence count
	add("SACK across the wrap", h, nil)
	add("PAGE with CRC", random(wire.TypePage, wire.FlagSeq|wire.FlagCRC), payload())
	h = random(wire.TypePushBatch, wire.FlagSeq|wire.FlagFirst|wire.FlagLast|wire.FlagCRC)
	h.MsgLen, h.Offset, h.Addr, h.Imm, h.MsgID, h.DstProc = uint32(len(pushbSubs)), 0, 0, 0, 0, 0
	add("PUSHB with sub-messages", h, pushbPayload())
	h.Imm = 1 // a field PUSHB leaves unused: malformed, no sub-messages shown
	add("PUSHB with its Imm set", h, pushbPayload())
	add("extremes", wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq, Seq: 1<<32 - 1, Addr: 1<<64 - 1, Imm: 1 << 63, Tag: 0xFFFF, Code: 0xFFFF}, nil)

	bad := frame(random(wire.TypePush, wire.FlagSeq|wire.FlagTagged|wire.FlagCRC), payload())
	bad[len(bad)-1] ^= 0x40 // corrupted in flight: a checksum error, not a malformed frame
	cs = append(cs, tsharkCase{why: "corrupted payload", frame: bad})
	cut := frame(random(wire.TypePullResp, wire.FlagSeq|wire.FlagCRC), make([]byte, 300))
	cs = append(cs, tsharkCase{why: "payload cut by the snapshot length", frame: cut, snap: len(cut) - 100})
	cs = append(cs, tsharkCase{why: "header cut by the snapshot length", frame: cut, snap: wire.EthHeaderLen + 20})

	// What the Go parser rejects, the dissector must flag.
	h = random(wire.TypePush, 0)
	h.Version = wire.Version1 + 1
	cs = append(cs, tsharkCase{why: "bad version", frame: frame(h, nil), malformed: true})
	for _, ty := range []wire.Type{0, wire.TypeDocs[len(wire.TypeDocs)-1].Type + 1, 255} {
		cs = append(cs, tsharkCase{why: fmt.Sprintf("bad type %d", ty), frame: frame(random(ty, 0), nil), malformed: true})
	}
	long := frame(random(wire.TypePush, wire.FlagSeq), payload())
	long[wire.EthHeaderLen+36]++ // PayloadLen one more than the frame holds
	cs = append(cs, tsharkCase{why: "PayloadLen beyond the frame", frame: long, malformed: true})
	short := frame(random(wire.TypeAck, 0), nil)
	cs = append(cs, tsharkCase{why: "frame ends inside the header", frame: short[:wire.EthHeaderLen+wire.HeaderLen/2], malformed: true})
	return cs
}

// pushbSubs are the sub-messages of the well-formed PUSHB case, whose
// fields the dissector must show one by one.
var pushbSubs = []wire.Sub{
	{Addr: 64, Imm: 7, MsgID: 1, Len: 8, SrcProc: 32},
	{Addr: 1<<40 + 8, Imm: 1 << 63, MsgID: 1<<32 - 1, Len: 3, SrcProc: 33, Flags: wire.FlagSignal},
	{Addr: 4096, MsgID: 9, Len: 17, SrcProc: 34},
}

// pushbData is sub-message i's data.
func pushbData(i int) []byte { return bytes.Repeat([]byte{byte(0xA0 + i)}, int(pushbSubs[i].Len)) }

func pushbPayload() []byte {
	var p []byte
	for i := range pushbSubs {
		p = wire.AppendSub(p, &pushbSubs[i], pushbData(i))
	}
	return p
}

// writeCases writes the frames to a pcap file, cut to their snapshot
// lengths.
func writeCases(t *testing.T, cs []tsharkCase) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dimmnet.pcap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pcapgo.NewWriterNanos(f)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	ts := time.Now()
	for i, c := range cs {
		data := c.frame
		if c.snap > 0 {
			data = data[:c.snap]
		}
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Microsecond), CaptureLength: len(data), Length: len(c.frame)}
		if err := w.WritePacket(ci, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// showValue parses a PDML show attribute: decimal, hex or a boolean.
func showValue(s string) (uint64, error) {
	switch s {
	case "True", "true":
		return 1, nil
	case "False", "false":
		return 0, nil
	}
	return strconv.ParseUint(s, 0, 64)
}

// TestTsharkDecodesEveryField writes frames of every type, flag and NACK
// code the wire tables define (and edge cases) to a pcap, decodes them
// with tshark and the Lua dissector, and checks every field, every name
// and the summary line against what was written; only the frames the Go
// parser rejects may be marked malformed.
func TestTsharkDecodesEveryField(t *testing.T) {
	tshark, lua := needTshark(t)
	cs := tsharkCases()
	got := decode(t, tshark, lua, writeCases(t, cs))
	if len(got) != len(cs) {
		t.Fatalf("tshark decoded %d frames, %d written", len(got), len(cs))
	}
	seenType, seenFlag, seenCode := map[wire.Type]bool{}, map[wire.Flags]bool{}, map[uint16]bool{}
	for i, c := range cs {
		d := got[i]
		if _, ok := d.fields["dimmnet"]; !ok {
			t.Errorf("frame %d (%s): no dimmnet layer", i, c.why)
			continue
		}
		if c.malformed != (len(d.malformed) > 0) {
			t.Errorf("frame %d (%s): malformed %v, want %v: %q", i, c.why, len(d.malformed) > 0, c.malformed, d.malformed)
		}
		captured := c.frame
		if c.snap > 0 {
			captured = captured[:c.snap]
		}
		if len(captured) < wire.FrameOverhead {
			continue // no header to check
		}
		var h wire.Header
		err := h.DecodeFromBytes(c.frame[wire.EthHeaderLen:], gopacket.NilDecodeFeedback)
		if (err != nil) != c.malformed {
			t.Fatalf("frame %d (%s): Go decodes it with %v", i, c.why, err)
		}
		checkFrame(t, fmt.Sprintf("frame %d (%s, %v %v)", i, c.why, h.Type, h.Flags), d, &h, captured[wire.FrameOverhead:], c.snap > 0)
		if !c.malformed {
			seenType[h.Type] = true
			for _, fd := range wire.FlagDocs {
				if h.Flags&fd.Flag != 0 {
					seenFlag[fd.Flag] = true
				}
			}
			if h.Type == wire.TypeNack {
				seenCode[h.Code] = true
			}
		}
	}
	// The cases really cover the tables (a guard on this test itself).
	for _, d := range wire.TypeDocs {
		if !seenType[d.Type] {
			t.Errorf("no frame of type %s checked", d.Name)
		}
	}
	for _, d := range wire.FlagDocs {
		if !seenFlag[d.Flag] {
			t.Errorf("no frame with flag %s checked", d.Name)
		}
	}
	for c := uint16(0); c <= wire.NackRefusalMax; c++ {
		if !seenCode[c] {
			t.Errorf("no NACK with code %d checked", c)
		}
	}
	for _, d := range wire.NackDocs {
		if !seenCode[d.Code] {
			t.Errorf("no NACK with code %s checked", d.Name)
		}
	}

	// A display filter on a derived field selects exactly its frames.
	path := writeCases(t, cs)
	out := runTshark(t, tshark, lua, "-r", path, "-Y", fmt.Sprintf("dimmnet.nack_code == %d", wire.NackSeqErr), "-T", "fields", "-e", "frame.number")
	var want []string
	for i, c := range cs {
		if !c.malformed && len(c.frame) >= wire.FrameOverhead && wire.Type(c.frame[wire.EthHeaderLen+1]) == wire.TypeNack &&
			uint16(c.frame[wire.EthHeaderLen+56])|uint16(c.frame[wire.EthHeaderLen+57])<<8 == wire.NackSeqErr {
			want = append(want, strconv.Itoa(i+1))
		}
	}
	if g := strings.Fields(string(out)); !slices.Equal(g, want) || len(want) == 0 {
		t.Errorf("filter dimmnet.nack_code == %d selected frames %v, want %v", wire.NackSeqErr, g, want)
	}
}

// checkFrame compares what tshark decoded with the header h and the
// captured payload bytes.
func checkFrame(t *testing.T, what string, d *decoded, h *wire.Header, payload []byte, cut bool) {
	t.Helper()
	val := func(name string) (pdmlField, uint64, bool) {
		f, ok := d.one(name)
		if !ok {
			t.Errorf("%s: %s appears %d times", what, name, len(d.fields[name]))
			return f, 0, false
		}
		v, err := showValue(f.Show)
		if err != nil {
			t.Errorf("%s: %s = %q: %v", what, name, f.Show, err)
			return f, 0, false
		}
		return f, v, true
	}
	for _, fd := range wire.Fields {
		name := "dimmnet." + wiredoc.Abbrev(fd.Name)
		wrote := reflect.ValueOf(h).Elem().FieldByName(fd.Name).Uint()
		if _, v, ok := val(name); ok && v != wrote {
			t.Errorf("%s: %s = %#x, wrote %#x", what, name, v, wrote)
		}
	}
	if f, ok := d.one("dimmnet.type"); ok {
		name := h.Type.String()
		if !h.Type.Valid() {
			name = "Unknown"
		}
		if !strings.Contains(f.Showname, ": "+name+" (") {
			t.Errorf("%s: type shown as %q, want %s", what, f.Showname, name)
		}
	}
	if f, ok := d.one("dimmnet.flags"); ok {
		want := "(" + h.Flags.String() + ")"
		if h.Flags == 0 {
			want = "(none)"
		}
		if !strings.HasSuffix(f.Showname, want) {
			t.Errorf("%s: flags shown as %q, want suffix %q", what, f.Showname, want)
		}
	}
	for _, fd := range wire.FlagDocs {
		name := "dimmnet.flags." + wiredoc.Abbrev(fd.Name)
		want := uint64(0)
		if h.Flags&fd.Flag != 0 {
			want = 1
		}
		if _, v, ok := val(name); ok && v != want {
			t.Errorf("%s: %s = %d, want %d", what, name, v, want)
		}
	}

	codeName := ""
	if h.Type == wire.TypeNack {
		codeName = wiredoc.NackName(h.Code)
		if codeName == "" {
			codeName = fmt.Sprintf("NACK(%#x)", h.Code)
		}
		if _, v, ok := val("dimmnet.nack_code"); ok && v != uint64(h.Code) {
			t.Errorf("%s: nack_code %d, wrote %d", what, v, h.Code)
		}
		if f, ok := d.one("dimmnet.code"); ok && !strings.HasSuffix(f.Showname, "("+codeName+")") {
			t.Errorf("%s: code shown as %q, want it named %s", what, f.Showname, codeName)
		}
		if !strings.Contains(d.info, " code="+codeName+" ") {
			t.Errorf("%s: summary %q does not name code %s", what, d.info, codeName)
		}
	} else if n := len(d.fields["dimmnet.nack_code"]); n != 0 {
		t.Errorf("%s: nack_code on a %v", what, h.Type)
	}

	checkSubs(t, what, d, h, payload, cut)

	var sacked []string
	if h.Flags&wire.FlagSack != 0 {
		for i := range 64 {
			if h.Imm&(1<<i) != 0 {
				sacked = append(sacked, strconv.FormatUint(uint64(h.Ack+2+uint32(i)), 10))
			}
		}
	}
	var gotSacked []string
	for _, f := range d.fields["dimmnet.sack.seq"] {
		gotSacked = append(gotSacked, f.Show)
	}
	if !slices.Equal(gotSacked, sacked) {
		t.Errorf("%s: SACK of Ack %d, bitmap %#x shown as %v, want %v", what, h.Ack, h.Imm, gotSacked, sacked)
	}
	if (h.Flags&wire.FlagSack != 0) != strings.Contains(d.info, " sack=") {
		t.Errorf("%s: summary %q and flag Sack disagree", what, d.info)
	}

	if f, ok := d.one("dimmnet.tag"); ok && (h.Flags&wire.FlagTagged != 0) != strings.HasSuffix(f.Showname, "(LMMC port)") {
		t.Errorf("%s: tag shown as %q", what, f.Showname)
	}
	if (h.Flags&wire.FlagTagged != 0) != strings.Contains(d.info, fmt.Sprintf(" tag=%d ", h.Tag)) {
		t.Errorf("%s: summary %q and flag Tagged disagree", what, d.info)
	}

	wantStatus := uint64(2)
	if h.Flags&wire.FlagCRC != 0 && !cut {
		h.Payload = payload[:min(len(payload), int(h.PayloadLen))]
		h.Contents = nil // re-encoded: every header byte is a field
		if h.VerifyChecksum() {
			wantStatus = 1
		} else {
			wantStatus = 0
		}
	}
	if _, v, ok := val("dimmnet.checksum.status"); ok && v != wantStatus {
		t.Errorf("%s: checksum.status %d, want %d", what, v, wantStatus)
	}
	if (wantStatus == 0) != strings.Contains(d.info, "[BAD CRC]") {
		t.Errorf("%s: summary %q and checksum status %d disagree", what, d.info, wantStatus)
	}

	shown := payload[:min(len(payload), int(h.PayloadLen))]
	if f := d.fields["dimmnet.payload"]; len(shown) > 0 && (len(f) != 1 || f[0].Value != hex.EncodeToString(shown)) {
		t.Errorf("%s: payload %v, want %x", what, f, shown)
	}

	if h.Type.Valid() {
		want := fmt.Sprintf("%v %d>%d seq=%d ", h.Type, h.SrcNode, h.DstNode, h.Seq)
		if !strings.HasPrefix(d.info, want) {
			t.Errorf("%s: summary %q, want prefix %q", what, d.info, want)
		}
		if h.Flags != 0 && !strings.Contains(d.info, "["+h.Flags.String()+"]") {
			t.Errorf("%s: summary %q lacks the flags [%v]", what, d.info, h.Flags)
		}
	}
}

// checkSubs compares the PUSHB sub-messages tshark shows with those the
// payload holds: every field of each, when the framing parses as a
// receiver checks it (wire.CheckBatch), none otherwise.
func checkSubs(t *testing.T, what string, d *decoded, h *wire.Header, payload []byte, cut bool) {
	t.Helper()
	var want []wire.Sub
	var data [][]byte
	if h.Type == wire.TypePushBatch && !cut && len(payload) >= int(h.PayloadLen) {
		pl := payload[:h.PayloadLen]
		if wire.CheckBatch(h, pl) == nil {
			for range h.MsgLen {
				s, b, r, _ := wire.NextSub(pl)
				want, data, pl = append(want, s), append(data, b), r
			}
		}
	}
	if got := len(d.fields["dimmnet.sub"]); got != len(want) {
		t.Errorf("%s: %d sub-messages shown, want %d", what, got, len(want))
		return
	}
	if (len(want) > 0) != strings.Contains(d.info, fmt.Sprintf(" subs=%d ", len(want))) {
		t.Errorf("%s: summary %q and %d sub-messages disagree", what, d.info, len(want))
	}
	for i, s := range want {
		for _, fd := range wire.SubFields {
			name := "dimmnet.sub." + wiredoc.Abbrev(fd.Name)
			fs := d.fields[name]
			if len(fs) != len(want) {
				t.Errorf("%s: %s appears %d times, want %d", what, name, len(fs), len(want))
				continue
			}
			var wrote uint64
			if fd.Name != "Reserved" {
				wrote = reflect.ValueOf(s).FieldByName(fd.Name).Uint()
			}
			if v, err := showValue(fs[i].Show); err != nil || v != wrote {
				t.Errorf("%s: sub-message %d %s = %q (%v), wrote %#x", what, i, name, fs[i].Show, err, wrote)
			}
		}
		if ds := d.fields["dimmnet.sub.data"]; len(ds) != len(want) || !strings.EqualFold(strings.ReplaceAll(ds[i].Value, ":", ""), hex.EncodeToString(data[i])) {
			t.Errorf("%s: sub-message %d data shown wrong (want %x)", what, i, data[i])
		}
	}
}
