package link

import (
	"net"
	"testing"

	"golang.org/x/net/bpf"
)

// The station filter keeps frames for its MAC and group addresses and
// drops frames for any other station, whatever their length.
func TestStationFilter(t *testing.T) {
	me := net.HardwareAddr{0x02, 0x44, 0x4e, 0x00, 0x01, 0x02}
	vm, err := bpf.NewVM(rawToInstructions(t, stationFilter(me)))
	if err != nil {
		t.Fatal(err)
	}
	frame := func(dst net.HardwareAddr) []byte {
		f := append(append([]byte{}, dst...), 0x02, 0, 0, 0, 0, 9, 0x88, 0xb5)
		return append(f, make([]byte, 100)...)
	}
	for _, c := range []struct {
		dst  net.HardwareAddr
		keep bool
	}{
		{me, true},
		{net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, true},
		{net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}, true},  // multicast
		{net.HardwareAddr{0x02, 0x44, 0x4e, 0x00, 0x01, 0x03}, false}, // last byte differs
		{net.HardwareAddr{0x02, 0x44, 0x4e, 0x01, 0x01, 0x02}, false}, // first word differs
		{net.HardwareAddr{0x02, 0x44, 0x4e, 0x00, 0x02, 0x02}, false}, // fifth byte differs
	} {
		n, err := vm.Run(frame(c.dst))
		if err != nil {
			t.Fatalf("%s: %v", c.dst, err)
		}
		if kept := n > 0; kept != c.keep {
			t.Errorf("frame for %s: kept %v (returned %d), want %v", c.dst, kept, n, c.keep)
		}
		if c.keep && n < 114 {
			t.Errorf("frame for %s: only %d bytes kept", c.dst, n)
		}
	}
}

func rawToInstructions(t *testing.T, raw []bpf.RawInstruction) []bpf.Instruction {
	t.Helper()
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("station filter does not disassemble")
	}
	return ins
}
