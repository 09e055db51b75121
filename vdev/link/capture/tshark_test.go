package capture

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/vdev/wire"
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

// tsharkFields are the fields the test asks tshark for, with how to get
// each from the frame that was written.
var tsharkFields = []struct {
	name string
	want func(h *wire.Header, payload []byte) string
}{
	{"dimmnet.version", func(h *wire.Header, _ []byte) string { return u(h.Version) }},
	{"dimmnet.type", func(h *wire.Header, _ []byte) string { return u(h.Type) }},
	{"dimmnet.flags", func(h *wire.Header, _ []byte) string { return u(h.Flags) }},
	{"dimmnet.flags.pkt_status", flag(wire.FlagPktStatus)},
	{"dimmnet.flags.last", flag(wire.FlagLast)},
	{"dimmnet.flags.first", flag(wire.FlagFirst)},
	{"dimmnet.flags.direct_amt", flag(wire.FlagDirectAMT)},
	{"dimmnet.flags.crc", flag(wire.FlagCRC)},
	{"dimmnet.flags.hold", flag(wire.FlagHold)},
	{"dimmnet.flags.ack_valid", flag(wire.FlagAckValid)},
	{"dimmnet.flags.signal", flag(wire.FlagSignal)},
	{"dimmnet.flags.seq", flag(wire.FlagSeq)},
	{"dimmnet.src_node", func(h *wire.Header, _ []byte) string { return u(h.SrcNode) }},
	{"dimmnet.dst_node", func(h *wire.Header, _ []byte) string { return u(h.DstNode) }},
	{"dimmnet.src_proc", func(h *wire.Header, _ []byte) string { return u(h.SrcProc) }},
	{"dimmnet.dst_proc", func(h *wire.Header, _ []byte) string { return u(h.DstProc) }},
	{"dimmnet.seq", func(h *wire.Header, _ []byte) string { return u(h.Seq) }},
	{"dimmnet.ack", func(h *wire.Header, _ []byte) string { return u(h.Ack) }},
	{"dimmnet.msg_id", func(h *wire.Header, _ []byte) string { return u(h.MsgID) }},
	{"dimmnet.offset", func(h *wire.Header, _ []byte) string { return u(h.Offset) }},
	{"dimmnet.msg_len", func(h *wire.Header, _ []byte) string { return u(h.MsgLen) }},
	{"dimmnet.payload_len", func(h *wire.Header, _ []byte) string { return u(h.PayloadLen) }},
	{"dimmnet.addr", func(h *wire.Header, _ []byte) string { return u(h.Addr) }},
	{"dimmnet.imm", func(h *wire.Header, _ []byte) string { return u(h.Imm) }},
	{"dimmnet.code", func(h *wire.Header, _ []byte) string { return u(h.Code) }},
	{"dimmnet.checksum", func(h *wire.Header, _ []byte) string { return u(h.Checksum) }},
	{"dimmnet.checksum.status", func(h *wire.Header, _ []byte) string {
		switch {
		case h.Flags&wire.FlagCRC == 0:
			return "2" // unverified
		case h.VerifyChecksum():
			return "1"
		}
		return "0"
	}},
	{"dimmnet.payload", func(_ *wire.Header, p []byte) string { return hex.EncodeToString(p) }},
}

func u[T ~uint8 | ~uint16 | ~uint32 | ~uint64](v T) string { return strconv.FormatUint(uint64(v), 10) }

func flag(f wire.Flags) func(*wire.Header, []byte) string {
	return func(h *wire.Header, _ []byte) string {
		if h.Flags&f != 0 {
			return "1"
		}
		return "0"
	}
}

// normalize maps tshark's renderings of one value to the test's: numbers
// in any base to decimal, booleans to 1/0, bytes to plain hex.
func normalize(field, s string) string {
	switch s {
	case "True", "TRUE", "true":
		return "1"
	case "False", "FALSE", "false":
		return "0"
	}
	if field == "dimmnet.payload" {
		return strings.ReplaceAll(s, ":", "")
	}
	if v, err := strconv.ParseUint(s, 0, 64); err == nil {
		return strconv.FormatUint(v, 10)
	}
	return s
}

// tsharkCmd builds a tshark command line that loads the dissector.
// Debian's init.lua sets run_user_scripts_when_superuser = true, so -X
// lua_script works as root too (tshark only warns about running as root);
// the check in TestTsharkDecodesEveryField fails loudly if a tshark build
// ever refuses, rather than skipping.
func tsharkCmd(ctx context.Context, tshark, lua string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tshark, append([]string{"-X", "lua_script:" + lua}, args...)...)
	// A private, empty configuration: no user profile or plugin changes
	// what is decoded.
	cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+os.TempDir()+"/dimmnet-tshark-nonexistent", "LC_ALL=C")
	return cmd
}

// TestTsharkDecodesEveryField writes frames of every type with varied
// flags and field values to a pcap (through the capture Port), decodes
// them with tshark and the Lua dissector, and checks every field tshark
// prints against what was written.
func TestTsharkDecodesEveryField(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (Debian: apt-get install tshark); skipping the Wireshark dissector test")
	}
	lua := dissector(t)

	rng := rand.New(rand.NewPCG(1, 2))
	var frames [][]byte
	var hdrs []wire.Header
	var payloads [][]byte
	for i := range 40 {
		h := wire.Header{
			Version: wire.Version1,
			Type:    wire.Type(1 + i%6),
			Flags:   wire.Flags(rng.Uint32()) & (1<<9 - 1),
			SrcNode: uint16(rng.Uint32()), DstNode: uint16(rng.Uint32()),
			SrcProc: rng.Uint32(), DstProc: rng.Uint32(),
			Seq: rng.Uint32(), Ack: rng.Uint32(), MsgID: rng.Uint32(),
			Offset: rng.Uint32(), MsgLen: rng.Uint32(),
			Addr: rng.Uint64(), Imm: rng.Uint64(),
			Code:     uint16(rng.Uint32()),
			Checksum: rng.Uint32(), // kept when FlagCRC is clear
		}
		switch i {
		case 0:
			h.Flags = 0
		case 1:
			h.Flags = 1<<9 - 1 // every flag
		case 2:
			h.Addr, h.Imm, h.Seq = 1<<64-1, 1<<63, 1<<32-1 // extremes
		}
		payload := make([]byte, rng.IntN(200))
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		if i == 3 {
			payload = nil
		}
		if i == 4 {
			h.Flags |= wire.FlagCRC
		}
		f := wire.AppendFrame(nil, wire.NodeMAC(h.DstNode), wire.NodeMAC(h.SrcNode), &h, payload)
		if i == 4 {
			f[len(f)-1] ^= 0x40 // a corrupted frame: the dissector must say so
		}
		frames = append(frames, f)
		hdrs = append(hdrs, h)
		payloads = append(payloads, payload)
	}
	path := writePcapFile(t, frames)

	args := []string{"-r", path, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"}
	for _, f := range tsharkFields {
		args = append(args, "-e", f.name)
	}
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
	lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
	if len(lines) != len(frames) {
		t.Fatalf("tshark printed %d lines for %d frames:\n%s\nstderr:\n%s", len(lines), len(frames), stdout.String(), stderr.String())
	}
	for i, line := range lines {
		got := strings.Split(line, "|")
		if len(got) != len(tsharkFields) {
			t.Fatalf("frame %d: %d fields, want %d: %q", i, len(got), len(tsharkFields), line)
		}
		// What the frame says, read back from its bytes (PayloadLen, the
		// computed checksum), not only from the template header.
		var h wire.Header
		fr := frames[i]
		if err := h.DecodeFromBytes(fr[wire.EthHeaderLen:], nopFeedback{}); err != nil {
			t.Fatal(err)
		}
		for j, f := range tsharkFields {
			want := f.want(&h, payloads[i])
			if i == 4 && f.name == "dimmnet.payload" {
				want = hex.EncodeToString(h.Payload) // the corrupted bytes
			}
			if g := normalize(f.name, got[j]); g != want {
				t.Errorf("frame %d (%v %v): %s = %q, wrote %s", i, h.Type, h.Flags, f.name, got[j], want)
			}
		}
		if i == 4 && got[len(got)-2] != "0" {
			t.Errorf("corrupted frame: checksum.status %q, want 0 (bad)", got[len(got)-2])
		}
		if i != 4 && h.Flags&wire.FlagCRC != 0 && got[len(got)-2] != "1" {
			t.Errorf("frame %d: checksum.status %q, want 1 (good)", i, got[len(got)-2])
		}
	}

	// Names: the type's value string and the display filter on a flag.
	cmd = tsharkCmd(ctx, tshark, lua, "-r", path, "-Y", "dimmnet.flags.last == 1 && dimmnet.type == 4", "-T", "fields", "-e", "dimmnet.seq")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	var want strings.Builder
	for _, h := range hdrs {
		if h.Flags&wire.FlagLast != 0 && h.Type == wire.TypePullResp {
			fmt.Fprintln(&want, h.Seq)
		}
	}
	if string(out) != want.String() {
		t.Errorf("filter dimmnet.flags.last == 1 && dimmnet.type == 4 selected seqs\n%s\nwant\n%s", out, want.String())
	}
	cmd = tsharkCmd(ctx, tshark, lua, "-r", path, "-V", "-c", "2")
	out, err = cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v", cmd, err)
	}
	for _, s := range []string{"dimmnet RDMA", "Type: PUSH (1)", "Type: IPUSH (2)", "Checksum status", "Sequence number"} {
		if !bytes.Contains(out, []byte(s)) {
			t.Errorf("tshark -V output lacks %q:\n%s", s, out)
		}
	}
	if t.Failed() {
		t.Logf("first lines of tshark output:\n%s", strings.Join(lines[:3], "\n"))
	}
}

type nopFeedback struct{}

func (nopFeedback) SetTruncated() {}
