package uapi

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

func TestDescRoundTrip(t *testing.T) {
	d := Desc{Opcode: OpIPUSH, Flags: FlagPktStatus | FlagSignal, DstNode: 0xBEEF, DstProc: 0x12345678, SrcProc: 0x9ABCDEF0,
		Length: 0xFEDCBA98, LocalAddr: 1 << 40, RemoteAddr: 3, Cookie: 0xC0FFEE, Imm: 42, Operand: 7}
	if got := DescFromWords(d.Words()); got != d {
		t.Fatalf("round trip: %+v != %+v", got, d)
	}
}

func TestStatusRoundTrip(t *testing.T) {
	s := Status{Type: StIPUSHPkt, Flags: StFlagLast | StFlagFirst, SrcNode: 9, SrcProc: 144, MsgID: 77, Length: 4096,
		Offset: 8192, AMT: 513, Err: ENoAMTEntry, Opcode: OpPULL, Addr: 1 << 33, End: 99, Cookie: 5, Imm: 6}
	if got := StatusFromWords(s.Words()); got != s {
		t.Fatalf("round trip: %+v != %+v", got, s)
	}
	// the datasheet's offsets are where the words put each field
	w := s.Words()
	if uint8(w[2]>>32) != uint8(OpPULL) || uint16(w[2]>>48) != 513 || uint16(w[3]) != uint16(ENoAMTEntry) {
		t.Fatal("status field offsets disagree with StatusFields")
	}
}

func TestRegionAccessors(t *testing.T) {
	mem, err := unix.Mmap(-1, 0, MinRegionSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := CheckRegion(mem); err != nil {
		t.Fatal(err)
	}
	if err := CheckRegion(mem[:MinRegionSize-4096]); err == nil {
		t.Fatal("a non-power-of-two region was accepted")
	}
	r := Region(mem)
	r.Store64(RegCmdqTail, 5)
	if r.Add64(RegCmdqTail, 2) != 7 || r.Load64(RegCmdqTail) != 7 {
		t.Fatal("atomic accessors disagree")
	}
	d := Desc{Opcode: OpPUSH, Length: 8, Cookie: 1}
	r.WriteDesc(4096, &d, 0)
	if r.Load64At(4096+DescSeqOff) != 1 {
		t.Fatal("SEQ not published")
	}
	if r.ReadDesc(4096) != d {
		t.Fatal("descriptor slot round trip")
	}
	g := Geometry{RegionSize: MinRegionSize, CmdqOff: 4096, CmdqEntries: 16, StatqOff: 8192, StatqEntries: 16,
		AMTOff: 16384, AMTEntries: 4, LLCMOff: 8192, LLCMSize: 16384, ScratchOff: 16384 + 128, ScratchSize: 64,
		LinkMemOff: 65536, LinkMemSize: MinRegionSize - 65536, MTU: 1024, AMTATMirOff: 32768}
	if err := g.Validate(MinRegionSize); err != nil {
		t.Fatal(err)
	}
	bad := g
	bad.LinkMemSize++
	if err := bad.Validate(MinRegionSize); err == nil {
		t.Fatal("link memory past the region end was accepted")
	}
	bad = g
	bad.CmdqEntries = 12
	if err := bad.Validate(MinRegionSize); err == nil {
		t.Fatal("non-power-of-two queue accepted")
	}
}

func TestErrnoIsError(t *testing.T) {
	var err error = fmtWrap(EBadAlign)
	if !errors.Is(err, EBadAlign) || errors.Is(err, EBadAddr) {
		t.Fatal("errors.Is on Errno")
	}
	for e := Errno(0); e < NumErrnos; e++ {
		if e.String() == "" || ErrnoDocs[e] == "" {
			t.Fatalf("errno %d undocumented", e)
		}
	}
	if GPIDNode(GPID(7, 3)) != 7 {
		t.Fatal("GPID")
	}
}

type wrapped struct{ e error }

func (w wrapped) Error() string { return "ctx: " + w.e.Error() }
func (w wrapped) Unwrap() error { return w.e }

func fmtWrap(e error) error { return wrapped{e} }
