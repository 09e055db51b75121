package wire

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// The fast path's reason to exist is zero allocations per packet; pin it,
// including the error paths a flood of bad frames would take.
func TestZeroAllocs(t *testing.T) {
	h := sampleHeader(FlagCRC | FlagLast)
	payload := payloadOf(1024)
	buf := make([]byte, 0, 2048)
	frame := AppendFrame(nil, macB, macA, &h, payload)
	p := NewParser()

	if n := testing.AllocsPerRun(1000, func() {
		buf = AppendFrame(buf[:0], macB, macA, &h, payload)
	}); n != 0 {
		t.Errorf("AppendFrame: %v allocs/op", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, _, err := p.Parse(frame); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Parse: %v allocs/op", n)
	}

	bad := map[string][]byte{
		"short":     frame[:5],
		"truncated": frame[:40],
		"length":    frame[:FrameOverhead+10],
		"ethertype": func() []byte { c := bytes.Clone(frame); c[12] = 0x08; c[13] = 0x00; return c }(),
		"checksum":  func() []byte { c := bytes.Clone(frame); c[len(c)-1] ^= 1; return c }(),
		"version":   func() []byte { c := bytes.Clone(frame); c[EthHeaderLen] = 9; return c }(),
	}
	for name, f := range bad {
		if n := testing.AllocsPerRun(1000, func() {
			if _, _, err := p.Parse(f); err == nil {
				t.Fatal("accepted")
			}
		}); n != 0 {
			t.Errorf("Parse %s: %v allocs/op", name, n)
		}
	}
}

// A head sent with its payload gathered behind it is the frame AppendFrame
// builds, checksum included, and the parser takes it.
func TestAppendHeadGathers(t *testing.T) {
	for _, flags := range []Flags{0, FlagCRC} {
		h := sampleHeader(flags | FlagLast)
		payload := payloadOf(1000)
		head := AppendHead(nil, macB, macA, &h, payload)
		if len(head) != FrameOverhead {
			t.Fatalf("head of %d bytes, want %d", len(head), FrameOverhead)
		}
		whole := AppendFrame(nil, macB, macA, &h, payload)
		if got := append(head, payload...); !bytes.Equal(got, whole) {
			t.Fatalf("flags %v: head+payload differs from AppendFrame", flags)
		}
		if _, pl, err := NewParser().Parse(whole); err != nil || !bytes.Equal(pl, payload) {
			t.Fatalf("flags %v: parse: %v", flags, err)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	for _, n := range []int{0, 1024, 8192} {
		for _, flags := range []Flags{0, FlagCRC} {
			b.Run(fmt.Sprintf("payload=%d/flags=%v", n, flags), func(b *testing.B) {
				h := sampleHeader(flags)
				frame := AppendFrame(nil, macB, macA, &h, payloadOf(n))
				p := NewParser()
				b.SetBytes(int64(len(frame)))
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := p.Parse(frame); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkAppendFrame(b *testing.B) {
	for _, n := range []int{0, 1024, 8192} {
		for _, flags := range []Flags{0, FlagCRC} {
			b.Run(fmt.Sprintf("payload=%d/flags=%v", n, flags), func(b *testing.B) {
				h := sampleHeader(flags)
				payload := payloadOf(n)
				buf := make([]byte, 0, FrameOverhead+n)
				b.SetBytes(int64(FrameOverhead + n))
				b.ReportAllocs()
				for b.Loop() {
					buf = AppendFrame(buf[:0], macB, macA, &h, payload)
				}
			})
		}
	}
}

// FuzzParse checks that Parse never panics and that whatever it accepts
// survives a re-encode with AppendFrame unchanged, i.e. the encoder and
// decoder agree on every frame the device would act on.
func FuzzParse(f *testing.F) {
	for _, flags := range []Flags{0, FlagCRC, FlagCRC | FlagDirectAMT | FlagSignal, 0xffff} {
		for _, n := range []int{0, 1, 64, 300} {
			for _, td := range TypeDocs {
				ty := td.Type
				h := sampleHeader(flags)
				h.Type = ty
				f.Add(AppendFrame(nil, macB, macA, &h, payloadOf(n)))
			}
		}
	}
	h := sampleHeader(FlagCRC)
	padded := AppendFrame(nil, macB, macA, &h, nil)
	f.Add(append(padded, make([]byte, 20)...))
	f.Add([]byte{})
	f.Add(padded[:EthHeaderLen])

	f.Fuzz(func(t *testing.T, frame []byte) {
		p1, p2 := NewParser(), NewParser()
		h1, pl1, err := p1.Parse(frame)
		hr, plr, errr := layerParse(frame)
		switch {
		case (err == nil) != (errr == nil) || err != nil && !errors.Is(err, errr):
			t.Fatalf("Parse: %v, gopacket's layer parser: %v", err, errr)
		case err == nil && (fieldsOf(h1) != fieldsOf(hr) || !bytes.Equal(pl1, plr)):
			t.Fatalf("Parse and gopacket's layer parser differ\n got %+v\nwant %+v", fieldsOf(h1), fieldsOf(hr))
		}
		if err != nil {
			if h1 != nil || pl1 != nil {
				t.Fatalf("error %v with non-nil results", err)
			}
			if !isSentinel(err) {
				t.Fatalf("non-sentinel error %v", err)
			}
			return
		}
		if uint32(len(pl1)) != h1.PayloadLen {
			t.Fatalf("payload %d bytes, PayloadLen %d", len(pl1), h1.PayloadLen)
		}
		re := AppendFrame(nil, p1.DstMAC(), p1.SrcMAC(), h1, pl1)
		h2, pl2, err := p2.Parse(re)
		if err != nil {
			t.Fatalf("re-encoded frame rejected: %v\norig %x\nre   %x", err, frame, re)
		}
		a, b := fieldsOf(h1), fieldsOf(h2)
		if a != b {
			t.Fatalf("header changed\n got %+v\nwant %+v", b, a)
		}
		if !bytes.Equal(pl1, pl2) {
			t.Fatalf("payload changed")
		}
		if !bytes.Equal(re[:EthHeaderLen], frame[:EthHeaderLen]) {
			t.Fatalf("ethernet header changed")
		}
	})
}

// layerParse is Parse as a gopacket.DecodingLayerParser over the same
// two layers does it: what Parse, which runs the layers' decoders
// without it, must agree with.
func layerParse(frame []byte) (*Header, []byte, error) {
	if len(frame) < EthHeaderLen {
		return nil, nil, ErrTruncated
	}
	var eth layers.Ethernet
	var h Header
	dlp := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &h)
	dlp.IgnoreUnsupported = true
	var decoded []gopacket.LayerType
	err := dlp.DecodeLayers(frame, &decoded)
	switch {
	case eth.EthernetType != EtherType:
		return nil, nil, ErrNotDimmnet
	case err != nil:
		return nil, nil, err
	case len(decoded) < 2:
		return nil, nil, ErrTruncated
	case h.Flags&FlagCRC != 0 && ComputeChecksum(h.Contents, h.Payload) != h.Checksum:
		return nil, nil, ErrChecksum
	}
	return &h, h.Payload, nil
}

func isSentinel(err error) bool {
	for _, s := range []error{ErrNotDimmnet, ErrTruncated, ErrVersion, ErrBadType, ErrLength, ErrChecksum} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
