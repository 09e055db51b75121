package vdev

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// The pair fuzzer drives two devices, nodes 1 and 2, through a script of
// driver commands, engine passes and link faults, and checks the
// transport's promises after every step: the one-frame targets in
// fuzz_test.go cannot reach a bug that needs a lost ACK, a resend and a
// refusal in a particular order.
//
// Link memory layout of both nodes (offsets in link memory):
const (
	pfSrc      = 0          // PUSH and IPUSH sources: nothing remote writes here
	pfWin      = 16 << 10   // the exposed window: PUSH targets, PULL sources
	pfPull     = 32 << 10   // PULL destinations
	pfRing     = 48 << 10   // IPUSH rings, pfRingStep apart
	pfRingStep = 4 << 10    // ring k is at pfRing + k*pfRingStep
	pfRingSize = 2048       // bytes per ring (at most)
	pfInit     = 64 << 10   // link memory below starts patterned, above it zero
	pfSlot     = 1 << 10    // command addresses are slots this far apart
	pfTag      = 0x5a << 56 // command immediates: pfTag | node<<48 | index
	pfMaxOps   = 600        // a script's operations beyond this are ignored
	pfRounds   = 20000      // quiesce passes (each node) before a hang is reported
)

// pfPattern is node n's initial byte at link address a: distinct per node
// and address, so data from the wrong place or node does not compare equal.
func pfPattern(n int, a int) byte {
	x := uint32(a)*2654435761 + uint32(n+1)*0x9E3779B9
	return byte(x>>24) ^ byte(x>>11)
}

// pfCmd is one command a script posted, and what was seen of it.
type pfCmd struct {
	node   int // 0 (node 1) or 1 (node 2)
	idx    uint64
	desc   uapi.Desc
	posted int // logical time of posting
	ended  int // logical time it was seen complete (a status, or its job gone); -1: not yet
	stats  int // completion statuses (DONE, PULL_DONE, ERROR)
	err    uapi.Errno
	statAt int  // its completion's position in the node's status log
	inQ    bool // its job was seen in a destination queue
	rxMsgs int  // message-complete statuses the receiver posted for it
	rxPkts map[uint32]uint32
	// the receiver sent a refusal NACK for one of its packets: it must
	// end with an error (the refusal's, or UNREACHABLE if the sender gave
	// up first), never DONE, whatever became of the NACK on the link
	refused uapi.Errno
}

// needsStatus reports whether the command must end with exactly one
// status: signalled ones, PULLs, and (found at the end) any that failed.
func (c *pfCmd) needsStatus() bool {
	return c.desc.Flags&uapi.FlagSignal != 0 || c.desc.Opcode == uapi.OpPULL
}

// pfRig is the two devices and the link between them, which the test
// holds in its hands: each direction is a queue of frames that moves only
// when a device is stepped, and that the script drops from, duplicates,
// reorders, corrupts and injects into.
type pfRig struct {
	t      testing.TB
	dev    [2]*Device
	wire   [2][][]byte // wire[i]: frames node i sent that the other has not received
	limbo  [2][][]byte // frames taken off wire[i], to arrive later
	hist   [2][][]byte // the last frames node i sent, for replays
	depth  int         // frames a direction holds before Send says link.ErrFull
	now    int64       // the devices' clock (ns): virtual, so a script replays exactly
	clock  int         // logical time: one tick per operation
	forged bool        // a forged control frame went in: the data invariants are off

	cmds   [2][]*pfCmd
	seen   [2]uint64 // statuses read
	log    [2][]uapi.Status
	ring   [2][4]uint64 // each ring's END as of the last status read: where the driver frees to
	pages  [2][]uint16  // paging requests the driver has yet to answer with PAGE_DONE, by node
	sent   [2]map[uint64]bool
	dataTx [2]uint64 // data frames sent
	resent [2]uint64 // data frames whose (epoch, seq) had been sent before
	acks   [2]uint64 // standalone ACKs sent
	gapNAK [2]uint64 // SEQ_ERR NACKs sent
	epochs [2]map[uint16]bool
	parser *wire.Parser
	trace  *strings.Builder
}

// pfPort is node i's attachment to the rig's link. It is not Lossless,
// so the retransmission timeout starts at 100 µs, and it asks for CRCs,
// so a corrupted frame is caught by the receiver, as on a real wire.
type pfPort struct {
	r   *pfRig
	me  int
	mtu int
}

func (p *pfPort) MTU() int              { return p.mtu }
func (p *pfPort) MAC() net.HardwareAddr { return wire.NodeMAC(uint16(p.me + 1)) }
func (p *pfPort) Buffer() []byte        { return make([]byte, 0, p.mtu) }
func (p *pfPort) Release([]byte)        {}
func (p *pfPort) SetNotify(func())      {}
func (p *pfPort) Close() error          { return nil }
func (p *pfPort) NeedsCRC() bool        { return true }

func (p *pfPort) Send(f []byte) error {
	if !bytes.Equal(f[:6], wire.NodeMAC(uint16(2-p.me))) {
		return link.ErrNoRoute // only the two of them on this link
	}
	if len(p.r.wire[p.me]) >= p.r.depth {
		return link.ErrFull
	}
	p.r.sniff(p.me, f)
	p.r.wire[p.me] = append(p.r.wire[p.me], f)
	return nil
}

// Recv reads the statuses the previous frame made before the next frame
// can change memory: a message reported complete is checked as it was then.
func (p *pfPort) Recv() []byte {
	p.r.scan(p.me)
	q := &p.r.wire[1-p.me]
	if len(*q) == 0 {
		return nil
	}
	f := (*q)[0]
	*q = (*q)[1:]
	return f
}

// pfConfig is what a script's first two bytes choose.
type pfConfig struct {
	cfg      Config
	payload  int
	depth    int
	winSize  uint64
	ringSize uint64
}

func pfDecodeConfig(c0, c1 byte) pfConfig {
	return pfConfig{
		cfg: Config{
			Window:        []int{2, 4, 8, 16}[c0&3],
			MaxTimeouts:   2 + int(c0>>2&3),
			RingFullMode:  int(c0 >> 4 & 1),
			MaxInflight:   []int{2, 4, 256, 256}[c0>>5&3],
			CmdEntries:    16,
			StatusEntries: []int{4, 16, 64, 64}[c1&3],
			AMTEntries:    4,
			AMTATEntries:  64,
		},
		payload: []int{64, 128, 128, 256}[c1>>2&3],
		depth:   []int{3, 8, 64, 64}[c1>>4&3],
		winSize: []uint64{16 << 10, 16 << 10, 8 << 10, 16 << 10}[c1>>6&3],
		// a 1536-byte ring cannot keep a 1000-byte message whole from
		// every position: its status says where it wrapped
		ringSize: []uint64{pfRingSize, pfRingSize, pfRingSize, 1536}[c1>>6&3],
	}
}

func newPfRig(t testing.TB, pc pfConfig) *pfRig {
	r := &pfRig{t: t, depth: pc.depth, now: 0x1234 << 24, parser: wire.NewParser()}
	if os.Getenv("DIMMNET_PFTRACE") != "" {
		r.trace = &strings.Builder{}
	}
	for i := range 2 {
		c := pc.cfg
		c.Node, c.RegionSize = uint16(i+1), 1<<20
		d, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		d.clock = func() int64 { return r.now }
		d.AttachPort(&pfPort{r: r, me: i, mtu: pc.payload + wire.FrameOverhead})
		for a := range pfInit {
			d.lm[a] = pfPattern(i, a)
		}
		d.r.Store64(uapi.RegWinBase, pfWin)
		d.r.Store64(uapi.RegWinSize, pc.winSize)
		// Rings 0 and 1 for GPIDs 0 and 2 (GPID 1 has no entry); ring 2 is
		// not valid, ring 3 is malformed (a misaligned base).
		for k, base := range []uint64{pfRing, pfRing + pfRingStep, 0, pfRing + 2*pfRingStep + 4} {
			e := d.g.AMTOff + uint64(k)*uapi.AMTSize
			d.r.Store64At(e+uapi.AMTBase, base)
			if k != 2 {
				d.r.Store64At(e+uapi.AMTCfg, pc.ringSize|uint64(uapi.AMTFlagValid)<<32)
			}
		}
		d.amtat[0], d.amtat[2] = uapi.AMTATValid, uapi.AMTATValid|1 // rings 0 and 1
		// The window's first two page frames belong to LMMC port 1, the
		// next two to port 2: a TAGGED PUSH for port 1 lands only there.
		for f := uint64(0); f < 4; f++ {
			d.r.Store32At(d.g.FrameTagOff+4*(pfWin/d.g.PageSize+f), uint32(1+f/2))
		}
		r.dev[i] = d
		r.sent[i] = map[uint64]bool{}
	}
	return r
}

func (r *pfRig) fatalf(format string, args ...any) {
	r.t.Helper()
	if r.trace != nil {
		r.t.Logf("trace:\n%s", r.trace.String())
	} else {
		r.t.Logf("(set DIMMNET_PFTRACE=1 for the script's trace)")
	}
	r.t.Fatalf("t=%d: "+format, append([]any{r.clock}, args...)...)
}

func (r *pfRig) tracef(format string, args ...any) {
	if r.trace != nil {
		fmt.Fprintf(r.trace, "%4d ", r.clock)
		fmt.Fprintf(r.trace, format, args...)
		r.trace.WriteByte('\n')
	}
}

// sniff looks at every frame a node sends, before it is on the wire: it
// counts what the counters must agree with, and a data packet on a new
// sequence number must belong to a command still in flight and not
// failed or refused.
func (r *pfRig) sniff(n int, f []byte) {
	r.hist[n] = append(r.hist[n], f)
	if len(r.hist[n]) > 64 {
		r.hist[n] = r.hist[n][1:]
	}
	h, _, err := r.parser.Parse(f)
	if err != nil {
		r.fatalf("node %d sent a frame that does not parse: %v", n+1, err)
	}
	if r.trace != nil {
		r.tracef("  node %d sends %s flags %v seq %d ack %d msg %d off %d len %d code %#x tag %#x", n+1, h.Type, h.Flags, h.Seq, h.Ack, h.MsgID, h.Offset, h.PayloadLen, h.Code, h.Tag)
	}
	switch h.Type {
	case wire.TypeAck:
		r.acks[n]++
		return
	case wire.TypeNack:
		if h.Code == wire.NackSeqErr {
			r.gapNAK[n]++
		}
		if h.Code != wire.NackRetry && h.Code <= wire.NackRefusalMax {
			// The sender's packet it names, if the receiver refuses it in
			// the sender's current session.
			p, rp := r.dev[1-n].peers[uint16(n+1)], r.dev[n].peers[uint16(2-n)]
			if p != nil && rp != nil && rp.rx.Epoch() == p.tx.Epoch() {
				if i := int32(h.Seq - p.tx.Acked() - 1); i >= 0 && int(i) < len(p.sent) && p.sent[i].j != nil {
					if c := r.cmds[1-n][p.sent[i].j.idx]; c.refused == 0 {
						c.refused = uapi.Errno(h.Code)
						r.tracef("  (refuses node %d #%d)", 2-n, c.idx)
					}
				}
			}
		}
		return
	}
	r.dataTx[n]++
	if r.epochs[n] == nil {
		r.epochs[n] = map[uint16]bool{}
	}
	r.epochs[n][h.Code] = true
	key := uint64(h.Code)<<32 | uint64(h.Seq)
	if r.sent[n][key] {
		r.resent[n]++
		return
	}
	r.sent[n][key] = true
	if h.Type == wire.TypePullResp {
		return
	}
	d := r.dev[n]
	var j *job
	for _, p := range d.peerList {
		for _, x := range p.q {
			if x.msgID == h.MsgID {
				j = x
			}
		}
	}
	if j == nil {
		r.fatalf("node %d sent a new %s packet (seq %d) of message %d, which no command in flight has", n+1, h.Type, h.Seq, h.MsgID)
	}
	r.scan(n)
	c := r.cmds[n][j.idx]
	if j.finished || j.err != uapi.EOK || c.stats > 0 {
		r.fatalf("node %d sent a new packet (seq %d) of command %d after it ended (err %v, %d statuses)", n+1, h.Seq, j.idx, j.err, c.stats)
	}
	for _, s := range d.compQ {
		if s.Type == uapi.StError && s.End == j.idx {
			r.fatalf("node %d sent a new packet (seq %d) of command %d, whose ERROR is queued", n+1, h.Seq, j.idx)
		}
	}
}

// post writes a descriptor into node n's command queue, as a driver does;
// false when the queue has no free slot.
func (r *pfRig) post(n int, desc uapi.Desc) bool {
	d := r.dev[n]
	idx := uint64(len(r.cmds[n]))
	if idx-d.r.Load64(uapi.RegCmdqHead) >= d.g.CmdqEntries {
		return false
	}
	desc.Cookie = 0xc0 + idx
	desc.Imm = pfTag | uint64(n)<<48 | idx
	c := &pfCmd{node: n, idx: idx, desc: desc, posted: r.clock, ended: -1, statAt: -1}
	r.cmds[n] = append(r.cmds[n], c)
	d.r.WriteDesc(d.g.CmdqOff+(idx&(d.g.CmdqEntries-1))*uapi.DescSize, &desc, idx)
	r.tracef("node %d posts #%d %s flags %#x len %d local %#x remote %#x proc %d/%d", n+1, idx, desc.Opcode, desc.Flags, desc.Length, desc.LocalAddr, desc.RemoteAddr, desc.SrcProc, desc.DstProc)
	return true
}

// Script tables: a command's opcode (low nibble of its first byte) and
// length (low nibble of its second).
var (
	pfOps = [16]uapi.Opcode{uapi.OpPUSH, uapi.OpPUSH, uapi.OpPUSH, uapi.OpPUSH, uapi.OpPUSH, uapi.OpIPUSH, uapi.OpIPUSH, uapi.OpIPUSH,
		uapi.OpPULL, uapi.OpPULL, uapi.OpPULL, uapi.OpFENCE, uapi.OpNOP, 0, 99, uapi.OpREADDONE}
	pfLengths = [16]uint32{8, 64, 128, 200, 256, 384, 1000, 1024, 2048, 4096, 1, 13, 136, 0, 520, 3000}
)

// postScript decodes a command from three script bytes: opcode and flags,
// length, addresses.
func (r *pfRig) postScript(n int, op, ln, ad byte) {
	desc := uapi.Desc{Opcode: pfOps[op&15], DstNode: uint16(2 - n), Length: pfLengths[ln&15]}
	if op>>4&3 != 3 {
		desc.Flags |= uapi.FlagSignal
	}
	if op&0x40 != 0 {
		desc.Flags |= uapi.FlagPktStatus
	}
	if op&0x80 != 0 { // a flag that is valid only sometimes
		desc.Flags |= []uint8{uapi.FlagDirectAMT, uapi.FlagTagged, 0x80, uapi.FlagTagged}[ln>>4&3]
		desc.Operand = uint64(ln >> 6 & 3) // port 0 is invalid, 1 and 2 own window frames
	}
	lslot, rslot := uint64(ad&7), uint64(ad>>3&7)
	desc.LocalAddr = pfSrc + lslot*pfSlot
	desc.RemoteAddr = pfWin + rslot*pfSlot
	switch desc.Opcode {
	case uapi.OpPULL:
		desc.LocalAddr = pfPull + lslot*pfSlot
	case uapi.OpIPUSH:
		desc.SrcProc = uint32(rslot % 3) // GPID 1 has no AMT Address Table entry
		desc.DstProc = 7
		if desc.Flags&uapi.FlagDirectAMT != 0 {
			desc.RemoteAddr = rslot // 2 and 3 are bad entries, 4 and up beyond the AMT
		}
	}
	switch ad >> 6 {
	case 2: // misaligned
		desc.RemoteAddr += 4
	case 3: // outside the window (refused there), or a bad node
		if ln&0x80 != 0 {
			desc.DstNode = []uint16{uint16(n + 1), 9}[ln>>6&1]
		} else {
			desc.RemoteAddr = pfPull + rslot*pfSlot
		}
	}
	r.post(n, desc)
}

// cmdOfImm finds the command a receive status names by its immediate.
func (r *pfRig) cmdOfImm(rx int, s *uapi.Status, op uapi.Opcode) *pfCmd {
	n, idx := int(s.Imm>>48&0xff), s.Imm&0xffffffffffff
	if s.Imm>>56 != pfTag>>56 || n != 1-rx || idx >= uint64(len(r.cmds[n])) {
		r.fatalf("node %d status %v names no command node %d posted", rx+1, *s, 2-rx)
	}
	c := r.cmds[n][idx]
	if c.desc.Opcode != op {
		r.fatalf("node %d status %v for command %d, a %s", rx+1, *s, idx, c.desc.Opcode)
	}
	return c
}

// scan reads the statuses node n posted since the last look and checks
// each as a driver would see it, at the moment it appears.
func (r *pfRig) scan(n int) {
	d := r.dev[n]
	for r.seen[n] < d.statTail {
		s := d.r.ReadStatus(d.g.StatqOff + (r.seen[n]&(d.g.StatqEntries-1))*uapi.StatusSize)
		r.seen[n]++
		r.log[n] = append(r.log[n], s)
		r.tracef("  node %d status %v", n+1, s)
		r.status(n, &s)
	}
}

func (r *pfRig) status(n int, s *uapi.Status) {
	switch s.Type {
	case uapi.StDone, uapi.StError, uapi.StPULLDone:
		r.completion(n, s)
	case uapi.StPUSH:
		c := r.cmdOfImm(n, s, uapi.OpPUSH)
		r.received(n, c, s, c.desc.RemoteAddr)
	case uapi.StIPUSHMsg, uapi.StIPUSHPkt:
		c := r.cmdOfImm(n, s, uapi.OpIPUSH)
		if s.AMT > 1 {
			r.fatalf("node %d placed IPUSH #%d in ring %d, which is not valid", n+1, c.idx, s.AMT)
		}
		r.ring[n][s.AMT] = max(r.ring[n][s.AMT], s.End)
		r.received(n, c, s, 0)
	case uapi.StPageReq:
		c := r.cmdOfImm(n, s, uapi.OpPAGE)
		if c.rxMsgs++; c.rxMsgs > 1 || s.SrcNode != uint16(c.node+1) || s.Addr != c.desc.RemoteAddr {
			r.fatalf("node %d PAGE_REQ %v for %+v (%d of them)", n+1, *s, c.desc, c.rxMsgs)
		}
		r.pages[n] = append(r.pages[n], s.SrcNode)
	case uapi.StRingFull:
	default:
		r.fatalf("node %d posted an unexpected status %v", n+1, *s)
	}
}

// completion checks a command's own status: one per command, of the kind
// its opcode and flags call for; a FENCE's only after every command
// before it completed; a PULL's only with its data in place.
func (r *pfRig) completion(n int, s *uapi.Status) {
	if s.End >= uint64(len(r.cmds[n])) {
		r.fatalf("node %d completion %v for a command never posted", n+1, *s)
	}
	c := r.cmds[n][s.End]
	c.stats++
	if c.stats > 1 {
		r.fatalf("node %d command %d (%s) completed twice: %v", n+1, c.idx, c.desc.Opcode, *s)
	}
	c.statAt, c.err = len(r.log[n])-1, s.Err
	if c.ended < 0 {
		c.ended = r.clock
	}
	if c.refused != 0 && s.Type != uapi.StError && !r.forged {
		r.fatalf("node %d command %d (%s) was refused (%v) but completed %v", n+1, c.idx, c.desc.Opcode, c.refused, *s)
	}
	if s.Cookie != c.desc.Cookie || s.Opcode != c.desc.Opcode {
		r.fatalf("node %d completion %v does not match command %d %+v", n+1, *s, c.idx, c.desc)
	}
	switch s.Type {
	case uapi.StError:
		if s.Err == uapi.EOK {
			r.fatalf("node %d ERROR without a reason: %v", n+1, *s)
		}
		return
	case uapi.StPULLDone:
		if c.desc.Opcode != uapi.OpPULL || s.Length != c.desc.Length || s.Addr != c.desc.LocalAddr {
			r.fatalf("node %d PULL_DONE %v for %+v", n+1, *s, c.desc)
		}
		r.checkData(c, n, c.desc.LocalAddr, 1-n, c.desc.RemoteAddr, c.desc.Length, "PULL_DONE")
		return
	}
	if c.desc.Flags&uapi.FlagSignal == 0 || c.desc.Opcode == uapi.OpPULL {
		r.fatalf("node %d DONE %v for a command that asked for none: %+v", n+1, *s, c.desc)
	}
	switch c.desc.Opcode {
	case uapi.OpFENCE:
		for _, p := range r.dev[n].peerList {
			for _, j := range p.q {
				if j.idx < c.idx {
					r.fatalf("node %d FENCE #%d done while command %d before it is in flight", n+1, c.idx, j.idx)
				}
			}
		}
		for _, e := range r.cmds[n][:c.idx] {
			if e.needsStatus() && e.stats == 0 {
				r.fatalf("node %d FENCE #%d done before command %d (%s) completed", n+1, c.idx, e.idx, e.desc.Opcode)
			}
		}
	case uapi.OpPAGE:
		if !r.forged && c.rxMsgs != 1 {
			r.fatalf("node %d DONE for PAGE #%d but node %d reported %d requests", n+1, c.idx, 2-n, c.rxMsgs)
		}
	case uapi.OpPUSH, uapi.OpIPUSH:
		if r.forged {
			return
		}
		// Acknowledged means placed: the receiver has reported it.
		rx := 1 - n
		r.scan(rx)
		pkt := c.desc.Flags&uapi.FlagPktStatus != 0
		switch {
		case pkt && r.pktBytes(c) != c.desc.Length:
			r.fatalf("node %d DONE for #%d but node %d reported %d of its %d bytes", n+1, c.idx, rx+1, r.pktBytes(c), c.desc.Length)
		case !pkt && c.desc.Flags&uapi.FlagTagged == 0 && c.rxMsgs != 1:
			r.fatalf("node %d DONE for #%d but node %d reported it complete %d times", n+1, c.idx, rx+1, c.rxMsgs)
		}
		if c.desc.Opcode == uapi.OpPUSH {
			r.checkData(c, rx, c.desc.RemoteAddr, n, c.desc.LocalAddr, c.desc.Length, "DONE")
		}
	}
}

func (r *pfRig) pktBytes(c *pfCmd) uint32 {
	var sum uint32
	for _, n := range c.rxPkts {
		sum += n
	}
	return sum
}

// received checks a receiver's report of PUSH or IPUSH data: never twice
// for one message or packet, and only with every byte it names in place.
func (r *pfRig) received(rx int, c *pfCmd, s *uapi.Status, base uint64) {
	tx := c.node
	pkt := s.Type == uapi.StIPUSHPkt || s.Type == uapi.StPUSH && c.desc.Flags&uapi.FlagPktStatus != 0
	if !pkt {
		c.rxMsgs++
		if c.rxMsgs > 1 {
			r.fatalf("node %d reported message #%d of node %d complete twice: %v", rx+1, c.idx, tx+1, *s)
		}
		if s.Length != c.desc.Length || s.Offset != 0 && s.Flags&uapi.StFlagWrapped == 0 {
			r.fatalf("node %d reported message #%d as %v, want length %d", rx+1, c.idx, *s, c.desc.Length)
		}
		if s.Type == uapi.StPUSH {
			if s.Addr != c.desc.RemoteAddr {
				r.fatalf("node %d reported PUSH #%d at %#x, want %#x", rx+1, c.idx, s.Addr, c.desc.RemoteAddr)
			}
			r.checkData(c, rx, s.Addr, tx, c.desc.LocalAddr, s.Length, "PUSH status")
			return
		}
		if s.Flags&uapi.StFlagInterleaved != 0 {
			return // its extent is not contiguous
		}
		first := s.Length
		if s.Flags&uapi.StFlagWrapped != 0 {
			first = s.Offset
		}
		r.checkData(c, rx, s.Addr, tx, c.desc.LocalAddr, first, "IPUSH status")
		if first < s.Length {
			ringBase := uint64(pfRing + pfRingStep*uint64(s.AMT))
			r.checkData(c, rx, ringBase, tx, c.desc.LocalAddr+uint64(first), s.Length-first, "IPUSH status (wrapped)")
		}
		return
	}
	if c.rxPkts == nil {
		c.rxPkts = map[uint32]uint32{}
	}
	if _, dup := c.rxPkts[s.Offset]; dup {
		r.fatalf("node %d reported packet at offset %d of #%d twice: %v", rx+1, s.Offset, c.idx, *s)
	}
	if uint64(s.Offset)+uint64(s.Length) > uint64(c.desc.Length) || s.Type == uapi.StPUSH && s.Addr != c.desc.RemoteAddr+uint64(s.Offset) {
		r.fatalf("node %d reported packet %v of #%d %+v", rx+1, *s, c.idx, c.desc)
	}
	c.rxPkts[s.Offset] = s.Length
	r.checkData(c, rx, s.Addr, tx, c.desc.LocalAddr+uint64(s.Offset), s.Length, "packet status")
}

// writes is the range of link memory command c may write, on node node
// (IPUSH writes only rings, which nothing else writes).
func (c *pfCmd) writes() (node int, lo, hi uint64) {
	switch c.desc.Opcode {
	case uapi.OpPUSH:
		return 1 - c.node, c.desc.RemoteAddr, c.desc.RemoteAddr + uint64(c.desc.Length)
	case uapi.OpPULL:
		return c.node, c.desc.LocalAddr, c.desc.LocalAddr + uint64(c.desc.Length)
	}
	return 0, 0, 0
}

// excused lists the ranges in [lo, hi) of node n's link memory that a
// command other than x, in flight at some time since x was posted, may
// write: the value of such a byte depends on an order nobody promised.
func (r *pfRig) excused(x *pfCmd, n int, lo, hi uint64) [][2]uint64 {
	var out [][2]uint64
	for _, cs := range r.cmds {
		for _, c := range cs {
			if wn, l, h := c.writes(); c != x && wn == n && l < hi && lo < h && (c.ended < 0 || c.ended >= x.posted) {
				out = append(out, [2]uint64{l, h})
			}
		}
	}
	return out
}

// differs compares n bytes of node dn's link memory at da with what node
// sn holds at sa, the bytes command x moved; it returns the first byte
// that differs and that no command in flight with x may have written, at
// either end (ok: none).
func (r *pfRig) differs(x *pfCmd, dn int, da uint64, sn int, sa uint64, n uint32) (i uint64, ok bool) {
	dst, src := r.dev[dn].lm, r.dev[sn].lm
	end := uint64(n)
	if bytes.Equal(dst[da:da+end], src[sa:sa+end]) {
		return 0, true
	}
	ed, es := r.excused(x, dn, da, da+end), r.excused(x, sn, sa, sa+end)
	in := func(rs [][2]uint64, a uint64) bool {
		for _, r := range rs {
			if r[0] <= a && a < r[1] {
				return true
			}
		}
		return false
	}
	for i := range end {
		if dst[da+i] != src[sa+i] && !in(ed, da+i) && !in(es, sa+i) {
			return i, false
		}
	}
	return 0, true
}

// checkData compares n bytes of node dn's link memory at da with what
// node sn holds at sa, the bytes command c moved, byte by byte: a byte
// another command in flight meanwhile may write, at either end, is
// excused. Off once a forged frame went in (a forged ACK completes what
// never arrived).
func (r *pfRig) checkData(c *pfCmd, dn int, da uint64, sn int, sa uint64, n uint32, what string) {
	if r.forged {
		return
	}
	dst, src := r.dev[dn].lm, r.dev[sn].lm
	if da+uint64(n) > uint64(len(dst)) || sa+uint64(n) > uint64(len(src)) {
		r.fatalf("%s for node %d #%d names [%#x, +%d) beyond link memory", what, c.node+1, c.idx, da, n)
	}
	if i, ok := r.differs(c, dn, da, sn, sa, n); !ok {
		r.fatalf("%s for node %d #%d (%s %+v): byte %d at node %d %#x is %#x, node %d %#x holds %#x",
			what, c.node+1, c.idx, c.desc.Opcode, c.desc, i, dn+1, da+i, dst[da+i], sn+1, sa+i, src[sa+i])
	}
}

// track notes, after a pass of node n, which of its commands left flight
// (an unsignalled command says so only by its job leaving its queue).
func (r *pfRig) track(n int) {
	d := r.dev[n]
	inQ := map[uint64]bool{}
	for _, p := range d.peerList {
		for _, j := range p.q {
			inQ[j.idx] = true
		}
	}
	for _, c := range r.cmds[n][:min(uint64(len(r.cmds[n])), d.cmdHead)] {
		switch {
		case inQ[c.idx]:
			c.inQ = true
		case c.ended < 0:
			c.ended = r.clock
		}
	}
}

// invariants checks node n's internal accounting, which must hold after
// every pass whatever arrived: in-flight counts, the per-peer books the
// engine trusts to skip idle peers, and the transport's records.
func (r *pfRig) invariants(n int) {
	d := r.dev[n]
	inflight, sending, timers, resends, acks, holding, owed, resp := 0, 0, 0, 0, 0, 0, 0, 0
	for _, p := range d.peerList {
		inflight += len(p.q)
		if p.pkz < 0 || p.pkz > len(p.q) {
			r.fatalf("node %d peer %d: %d of %d queued commands packetized", n+1, p.node, p.pkz, len(p.q))
		}
		if p.pkz < len(p.q) {
			sending++
		}
		for i, j := range p.q {
			if j.finished || j.peer != p {
				r.fatalf("node %d peer %d: queued command %d finished %v", n+1, p.node, j.idx, j.finished)
			}
			if (i < p.pkz) != j.sentAll {
				r.fatalf("node %d peer %d: command %d at %d sentAll %v, %d packetized", n+1, p.node, j.idx, i, j.sentAll, p.pkz)
			}
		}
		for id, j := range p.pulls {
			if j.msgID != id || j.finished {
				r.fatalf("node %d peer %d: PULL %d (message %d) listed as message %d, finished %v", n+1, p.node, j.idx, j.msgID, id, j.finished)
			}
		}
		if len(p.sent) != p.tx.Unacked() {
			r.fatalf("node %d peer %d: %d packet records for %d unacknowledged packets", n+1, p.node, len(p.sent), p.tx.Unacked())
		}
		if p.tx.Armed() {
			timers++
		}
		if p.pullDeadline != 0 {
			timers++
		}
		if p.tx.Resending() {
			resends++
		}
		if p.rx.Pending() {
			acks++
		}
		if p.held != nil {
			holding++
		}
		owed += len(p.owedCtl)
		resp += len(p.resp)
	}
	switch {
	case d.inflight < 0 || d.inflight != inflight:
		r.fatalf("node %d: inflight %d, %d commands queued", n+1, d.inflight, inflight)
	case d.sending != sending:
		r.fatalf("node %d: sending %d, %d peers with commands to packetize", n+1, d.sending, sending)
	case d.book.Timers != timers || d.book.Resends != resends || d.book.AcksOwed != acks:
		r.fatalf("node %d: book %+v, counted timers %d resends %d acks owed %d", n+1, d.book, timers, resends, acks)
	case d.holding != holding || d.owed != owed || d.respJobs != resp:
		r.fatalf("node %d: holding %d/%d, owed %d/%d, responses %d/%d", n+1, d.holding, holding, d.owed, owed, d.respJobs, resp)
	case d.statTail-d.r.Load64(uapi.RegStatqHead) > d.g.StatqEntries:
		r.fatalf("node %d: status tail %d overran the driver's head %d", n+1, d.statTail, d.r.Load64(uapi.RegStatqHead))
	}
	for k := range 2 {
		e := d.g.AMTOff + uint64(k)*uapi.AMTSize
		head, tail, size := d.r.Load64At(e+uapi.AMTHead), d.r.Load64At(e+uapi.AMTTail), d.r.Load64At(e+uapi.AMTCfg)&0xffffffff
		if tail-head > size {
			r.fatalf("node %d ring %d: tail %d overran the head %d (%d bytes)", n+1, k, tail, head, size)
		}
	}
	c := func(k uapi.Counter) uint64 { return d.r.Counter(k) }
	switch {
	case c(uapi.CtrRetransmits) < c(uapi.CtrRetxGap)+c(uapi.CtrRetxTimeout):
		r.fatalf("node %d: RETRANSMITS %d < RETX_GAP %d + RETX_TIMEOUT %d", n+1, c(uapi.CtrRetransmits), c(uapi.CtrRetxGap), c(uapi.CtrRetxTimeout))
	case c(uapi.CtrTxPkts) != r.dataTx[n] || c(uapi.CtrRetransmits) != r.resent[n]:
		r.fatalf("node %d: TX_PKTS %d RETRANSMITS %d, but %d data frames left, %d of them again", n+1, c(uapi.CtrTxPkts), c(uapi.CtrRetransmits), r.dataTx[n], r.resent[n])
	case c(uapi.CtrAcksTx) != r.acks[n] || c(uapi.CtrSeqNACKsTx) != r.gapNAK[n]:
		r.fatalf("node %d: ACKS_TX %d SEQ_NACKS_TX %d, but %d ACKs and %d SEQ_ERR NACKs left", n+1, c(uapi.CtrAcksTx), c(uapi.CtrSeqNACKsTx), r.acks[n], r.gapNAK[n])
	case c(uapi.CtrStatusWritten) != d.statTail:
		r.fatalf("node %d: STATUS_WRITTEN %d, status tail %d", n+1, c(uapi.CtrStatusWritten), d.statTail)
	}
}

// step runs one pass of node n, which takes a microsecond of the rig's
// virtual time, then checks.
func (r *pfRig) step(n int) bool {
	now := r.now
	busy := stepHeld(r.dev[n], &now)
	r.now += 1e3
	r.scan(n)
	r.track(n)
	r.invariants(n)
	return busy
}

// consume is node n's driver taking every status seen, freeing the ring
// space the IPUSH statuses among them name and answering paging requests.
func (r *pfRig) consume(n int) {
	d := r.dev[n]
	d.r.Store64(uapi.RegStatqHead, r.seen[n])
	for len(r.pages[n]) > 0 && r.post(n, uapi.Desc{Opcode: uapi.OpPAGEDONE, Flags: uapi.FlagSignal, DstNode: r.pages[n][0]}) {
		r.pages[n] = r.pages[n][1:]
	}
	for k := range 2 {
		e := d.g.AMTOff + uint64(k)*uapi.AMTSize
		if r.ring[n][k] > d.r.Load64At(e+uapi.AMTHead) {
			d.r.Store64At(e+uapi.AMTHead, r.ring[n][k])
		}
	}
}

// fault does one thing to the frames on wire[dir] (from node dir), as a
// lossy, duplicating, reordering, corrupting link would.
func (r *pfRig) fault(dir int, kind, arg byte) {
	q := &r.wire[dir]
	switch kind % 7 {
	case 0, 1: // lose the next frame
		if len(*q) > 0 {
			r.tracef("link %d->: drop", dir+1)
			*q = (*q)[1:]
		}
	case 2: // duplicate it
		if len(*q) > 0 {
			r.tracef("link %d->: duplicate", dir+1)
			*q = append([][]byte{(*q)[0]}, *q...)
		}
	case 3: // swap it with a later one
		if len(*q) > 1 {
			i := 1 + int(arg)%(len(*q)-1)
			r.tracef("link %d->: swap 0 and %d", dir+1, i)
			(*q)[0], (*q)[i] = (*q)[i], (*q)[0]
		}
	case 4: // hold it back, to arrive later
		if len(*q) > 0 {
			r.tracef("link %d->: delay", dir+1)
			r.limbo[dir] = append(r.limbo[dir], (*q)[0])
			*q = (*q)[1:]
		}
	case 5: // let a held-back frame arrive
		if l := r.limbo[dir]; len(l) > 0 {
			i := int(arg) % len(l)
			r.tracef("link %d->: release delayed frame %d of %d", dir+1, i, len(l))
			*q = append(*q, l[i])
			r.limbo[dir] = append(l[:i:i], l[i+1:]...)
		}
	case 6: // corrupt a bit (the CRC must catch it)
		r.corrupt(dir, arg, 1<<(arg%8))
	}
}

// corrupt flips the bits mask (0: one) of a byte of the next frame on
// wire[dir]: an error burst the CRC must catch.
func (r *pfRig) corrupt(dir int, at, mask byte) {
	q := &r.wire[dir]
	if len(*q) == 0 {
		return
	}
	f := bytes.Clone((*q)[0])
	i := int(at) * 7 % len(f)
	f[i] ^= max(mask, 1)
	r.tracef("link %d->: flip bits %#x of byte %d", dir+1, max(mask, 1), i)
	(*q)[0] = f
}

// replay puts a frame node dir sent a while ago on the wire again: a
// duplicate that took the long way round.
func (r *pfRig) replay(dir int, arg byte) {
	if h := r.hist[dir]; len(h) > 0 {
		i := int(arg) % len(h)
		r.tracef("link %d->: replay the frame sent %d before the last", dir+1, i)
		r.wire[dir] = append(r.wire[dir], h[len(h)-1-i])
	}
}

// forge injects a control frame on wire[dir], as if node dir sent it,
// with numbers near what the receiving node has outstanding.
func (r *pfRig) forge(dir int, kind, a, b byte) {
	from, to := uint16(dir+1), uint16(2-dir)
	p := r.dev[1-dir].peerOf(from)
	acked, next := p.tx.Acked(), p.tx.Next()
	v := acked + uint32(a%8) - 1
	if a&0x80 != 0 {
		v = next + uint32(a>>4&3)
	}
	// Of the receiver's current session, or (kind bit 6) of the one before.
	h := wire.Header{Version: wire.Version1, SrcNode: from, DstNode: to, Flags: wire.FlagCRC, Type: wire.TypeNack, Tag: p.tx.Epoch()}
	if kind&0x40 != 0 {
		h.Tag--
	}
	switch kind % 6 {
	case 0:
		h.Type, h.Flags, h.Ack = wire.TypeAck, h.Flags|wire.FlagAckValid, v
	case 1:
		h.Code, h.Seq, h.Addr = wire.NackSeqErr, v, uint64(v+uint32(b%8))
		if b&8 != 0 {
			h.Flags |= wire.FlagSack
			h.Imm = uint64(b>>4) * 0x1111
		}
	case 2:
		h.Code, h.Seq = wire.NackRetry, v
	case 3:
		h.Code, h.Seq, h.Flags = wire.NackRetry, v, h.Flags|wire.FlagHold
	case 4:
		h.Code, h.Seq = 1+uint16(b%13), v
	case 5:
		h.Type, h.Flags, h.Ack = wire.TypeAck, h.Flags|wire.FlagAckValid|wire.FlagHold, v
	}
	if kind&0x80 != 0 && h.Type == wire.TypeNack {
		h.Flags |= wire.FlagAckValid
		h.Ack = acked + uint32(b>>5)
	}
	r.forged = true
	f := wire.AppendFrame(nil, wire.NodeMAC(to), wire.NodeMAC(from), &h, nil)
	r.tracef("link %d->: forged %s seq %d ack %d code %#x tag %#x flags %v", dir+1, h.Type, h.Seq, h.Ack, h.Code, h.Tag, h.Flags)
	r.wire[dir] = append([][]byte{f}, r.wire[dir]...)
}

// advance moves the timers' clock on.
func (r *pfRig) advance(ns int64) {
	r.tracef("time +%dus", ns/1000)
	r.now += ns
}

// run plays a script: two config bytes, then operations.
func (r *pfRig) run(script []byte) {
	i := 0
	next := func() byte {
		if i < len(script) {
			i++
			return script[i-1]
		}
		return 0
	}
	for ops := 0; i < len(script) && ops < pfMaxOps; ops++ {
		r.clock++
		b := next()
		n := int(b >> 4 & 1)
		switch b & 15 {
		case 0, 1:
			r.postScript(n, next(), next(), next())
		case 2, 3, 4, 15:
			for range 1 + b>>5 {
				r.tracef("step node %d", n+1)
				r.step(n)
			}
		case 5:
			r.tracef("step both")
			r.step(0)
			r.step(1)
		case 6:
			r.fault(n, next(), next())
		case 7:
			r.forge(n, next(), next(), next())
		case 8:
			r.advance([8]int64{50e3, 100e3, 200e3, 1e6, 5e6, 20e6, 100e6, 1e9}[b>>5])
		case 9:
			r.tracef("node %d driver consumes", n+1)
			r.consume(n)
		case 10:
			r.replay(n, next())
		case 11:
			k := 1 + int(next()%32)
			r.tracef("step both x%d", k)
			for range k {
				r.step(0)
				r.step(1)
			}
		case 12: // the driver switches what a full IPUSH ring does
			m := 1 - r.dev[n].r.Load64(uapi.RegRingFullMode)
			r.tracef("node %d ring-full mode %d", n+1, m)
			r.dev[n].r.Store64(uapi.RegRingFullMode, m)
		case 13: // an LMMC paging request: the other node holds our data until its driver says PAGE_DONE
			r.post(n, uapi.Desc{Opcode: uapi.OpPAGE, Flags: uapi.FlagSignal, DstNode: uint16(2 - n), RemoteAddr: uint64(next() % 16)})
		case 14:
			r.corrupt(n, next(), next())
		}
	}
}

// idle reports whether both nodes and the link are at rest: every command
// taken and completed, nothing owed, timed or on the wire.
func (r *pfRig) idle() bool {
	for n, d := range r.dev {
		if d.cmdHead != uint64(len(r.cmds[n])) || d.inflight != 0 || d.fence != nil || len(d.compQ) != 0 ||
			d.book.Timers != 0 || d.book.Resends != 0 || d.book.AcksOwed != 0 || d.book.Soonest() != 0 || d.owed != 0 || d.holding != 0 || d.respJobs != 0 || len(r.wire[n]) != 0 ||
			r.seen[n] != d.statTail {
			return false
		}
	}
	return true
}

// quiesce lets the pair settle with a faultless link and a driver that
// consumes every status: both engines step, the clock moves on a little
// each round and jumps to the next deadline when nothing else moves.
func (r *pfRig) quiesce() {
	r.clock++
	r.tracef("quiesce")
	r.limbo = [2][][]byte{}
	still := 0 // rounds in a row in which nothing moved and no timer runs
	for round := 0; round < pfRounds && still < 4; round++ {
		r.consume(0)
		r.consume(1)
		busy := r.step(0)
		busy = r.step(1) || busy
		if r.idle() {
			return
		}
		r.now += 20e3
		still++
		if busy || len(r.wire[0]) != 0 || len(r.wire[1]) != 0 {
			still = 0
			continue
		}
		at := int64(0)
		for _, d := range r.dev {
			if t := d.nextDeadline(); t != 0 && (at == 0 || t < at) {
				at = t
			}
		}
		if at != 0 {
			still = 0
			r.now = max(r.now, at)
		}
	}
	// Every command completes exactly once, forged frames or not: a
	// pair that finds no rest has a command waiting for ever.
	r.fatalf("no rest: %s", r.state())
}

// state describes both nodes for a failure message.
func (r *pfRig) state() string {
	var b strings.Builder
	for n, d := range r.dev {
		fmt.Fprintf(&b, "\nnode %d: taken %d/%d inflight %d fence %v compQ %d book %+v owed %d holding %d resp %d wire %d statuses %d/%d",
			n+1, d.cmdHead, len(r.cmds[n]), d.inflight, d.fence != nil, len(d.compQ), d.book, d.owed, d.holding, d.respJobs,
			len(r.wire[n]), r.seen[n], d.statTail)
		for _, p := range d.peerList {
			fmt.Fprintf(&b, "\n  peer %d: q %d pkz %d unacked %d acked %d next %d armed %v resending %v expect %d held %v",
				p.node, len(p.q), p.pkz, p.tx.Unacked(), p.tx.Acked(), p.tx.Next(), p.tx.Armed(), p.tx.Resending(), p.rx.Expect(), p.held != nil)
		}
	}
	return b.String()
}

// final checks what holds once the pair is at rest: every command that
// owes a status has exactly one, FENCEs in order, data that completed is
// still in place unless something later wrote over it, and nothing was
// written outside the window, the rings and the PULL destinations.
func (r *pfRig) final() {
	for n := range 2 {
		for _, c := range r.cmds[n] {
			if c.stats == 0 && (c.needsStatus() || c.refused != 0 && !r.forged || !c.inQ && c.desc.Opcode != uapi.OpNOP && c.desc.Opcode != uapi.OpFENCE) {
				r.fatalf("node %d command %d (%s %+v) never completed", n+1, c.idx, c.desc.Opcode, c.desc)
			}
			if c.desc.Opcode == uapi.OpFENCE && c.stats > 0 && c.err == uapi.EOK { // not a refused one
				for _, e := range r.cmds[n][:c.idx] {
					if e.stats > 0 && e.statAt > c.statAt {
						r.fatalf("node %d FENCE #%d completed before command %d", n+1, c.idx, e.idx)
					}
				}
			}
		}
		r.untouched(n)
	}
	if r.forged {
		return
	}
	for _, cs := range r.cmds {
		for _, c := range cs {
			ok := c.ended >= 0 && c.err == uapi.EOK && c.inQ
			switch {
			case !ok:
			case c.desc.Opcode == uapi.OpPUSH:
				r.settled(c, 1-c.node, c.desc.RemoteAddr, c.node, c.desc.LocalAddr)
			case c.desc.Opcode == uapi.OpPULL:
				r.settled(c, c.node, c.desc.LocalAddr, 1-c.node, c.desc.RemoteAddr)
			}
		}
	}
}

// settled checks that a command's data is still where it completed,
// except bytes a command posted after it, or in flight with it, may have
// written: nothing placed it again, or placed an older one over it.
func (r *pfRig) settled(x *pfCmd, dn int, da uint64, sn int, sa uint64) {
	if i, ok := r.differs(x, dn, da, sn, sa, x.desc.Length); !ok {
		dst, src := r.dev[dn].lm, r.dev[sn].lm
		r.fatalf("at rest: node %d #%d (%s %+v) byte %d at node %d %#x is %#x, node %d %#x holds %#x",
			x.node+1, x.idx, x.desc.Opcode, x.desc, i, dn+1, da+i, dst[da+i], sn+1, sa+i, src[sa+i])
	}
}

// untouched checks that node n's link memory changed only where a remote
// node may write: the window, the rings, and its own PULLs' destinations.
func (r *pfRig) untouched(n int) {
	d := r.dev[n]
	may := make([]bool, pfInit)
	mark := func(lo, hi uint64) {
		for a := lo; a < hi && a < pfInit; a++ {
			may[a] = true
		}
	}
	base, size := d.r.Load64(uapi.RegWinBase), d.r.Load64(uapi.RegWinSize)
	mark(base, base+size)
	mark(pfRing, pfRing+pfRingSize)
	mark(pfRing+pfRingStep, pfRing+pfRingStep+pfRingSize)
	for _, c := range r.cmds[n] {
		if c.desc.Opcode == uapi.OpPULL {
			mark(c.desc.LocalAddr, c.desc.LocalAddr+uint64(c.desc.Length))
		}
	}
	for a := range pfInit {
		if !may[a] && d.lm[a] != pfPattern(n, a) {
			r.fatalf("node %d link memory %#x changed (%#x, was %#x): outside the window, rings and PULL destinations", n+1, a, d.lm[a], pfPattern(n, a))
		}
	}
	var zero [4096]byte
	for a := pfInit; a < len(d.lm); a += len(zero) {
		if e := min(a+len(zero), len(d.lm)); !bytes.Equal(d.lm[a:e], zero[:e-a]) {
			r.fatalf("node %d link memory changed in [%#x, %#x), beyond anything a command names", n+1, a, e)
		}
	}
}

// pairScript plays a script on a fresh pair, lets it settle, and checks;
// it returns the pair for more checks (nil: no script).
func pairScript(t testing.TB, script []byte) *pfRig {
	if len(script) < 2 {
		return nil
	}
	r := newPfRig(t, pfDecodeConfig(script[0], script[1]))
	r.run(script[2:])
	r.quiesce()
	r.final()
	if r.trace != nil {
		t.Logf("trace:\n%s", r.trace)
	}
	return r
}

// FuzzPairSequence drives a pair of devices with a script of commands,
// engine passes, time and link faults (loss, duplication, reordering,
// corruption, late replays, forged control frames), checking the
// transport's invariants after every step and once the pair is at rest.
// Without -fuzz it replays the seeds and testdata; a crasher's script is
// deterministic (virtual clock), and DIMMNET_PFTRACE=1 logs what it did:
//
//	go test -run '^$' -fuzz=FuzzPairSequence -fuzztime=10m ./vdev/
//	DIMMNET_PFTRACE=1 go test -run FuzzPairSequence/<name> ./vdev/
func FuzzPairSequence(f *testing.F) {
	for _, s := range pfSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) { pairScript(t, script) })
}

// pfScript builds seed scripts readably. Operation bytes: kind in the low
// nibble, node (or link direction) in bit 4, a count in bits 5-7.
type pfScript []byte

func pfBegin(c0, c1 byte) pfScript { return pfScript{c0, c1} }

// cmd posts opcode index op (pfOps) with flag bits hi (0x30: unsignalled,
// 0x40: per-packet status, 0x80: an odd flag), length index ln
// (pfLengths) and address slots local and remote.
func (s pfScript) cmd(n int, op, hi, ln, local, remote byte) pfScript {
	return append(s, byte(n<<4), op|hi, ln, local|remote<<3)
}

func (s pfScript) push(n int, ln, local, remote byte) pfScript {
	return s.cmd(n, 0, 0, ln, local, remote)
}
func (s pfScript) ipush(n int, ln, local byte) pfScript { return s.cmd(n, 5, 0, ln, local, 0) }
func (s pfScript) pull(n int, ln, local, remote byte) pfScript {
	return s.cmd(n, 8, 0, ln, local, remote)
}

// pushOutside posts a PUSH to the other node's PULL area: outside its
// window, refused there.
func (s pfScript) pushOutside(n int, ln byte) pfScript { return append(s, byte(n<<4), 0, ln, 0xc1) }

func (s pfScript) fence(n int) pfScript            { return s.cmd(n, 11, 0, 0, 0, 0) }
func (s pfScript) page(n int, frame byte) pfScript { return append(s, 13|byte(n<<4), frame) }

// step steps node n k times.
func (s pfScript) step(n int, k byte) pfScript {
	for ; k > 8; k -= 8 {
		s = append(s, 2|byte(n<<4)|7<<5)
	}
	return append(s, 2|byte(n<<4)|(k-1)<<5)
}

// both steps both nodes k (at most 32) times.
func (s pfScript) both(k byte) pfScript { return append(s, 11, k-1) }

func (s pfScript) fault(dir int, kind, arg byte) pfScript {
	return append(s, 6|byte(dir<<4), kind, arg)
}
func (s pfScript) corrupt(dir int, at, mask byte) pfScript {
	return append(s, 14|byte(dir<<4), at, mask)
}
func (s pfScript) forge(dir int, kind, a, b byte) pfScript {
	return append(s, 7|byte(dir<<4), kind, a, b)
}
func (s pfScript) replay(dir int, arg byte) pfScript { return append(s, 10|byte(dir<<4), arg) }
func (s pfScript) advance(i byte) pfScript           { return append(s, 8|i<<5) }
func (s pfScript) consume(n int) pfScript            { return append(s, 9|byte(n<<4)) }
func (s pfScript) ringMode(n int) pfScript           { return append(s, 12|byte(n<<4)) }

// Fault kinds for pfScript.fault.
const (
	pfDrop    = 0
	pfDup     = 2
	pfSwap    = 3
	pfDelay   = 4
	pfRelease = 5
	pfCorrupt = 6
)

// pfSeeds are the seed scripts: each a scenario the transport must get
// right, and a start for the fuzzer.
func pfSeeds() [][]byte {
	// window 8, 3 timeouts, hold mode, 256 in flight; 64 statuses, 128-byte
	// packets, 64 frames per direction, 16 KiB window
	const c0, c1 = 0x46, 0x26
	return [][]byte{
		// every command kind, no faults
		pfBegin(c0, c1).push(0, 6, 0, 0).ipush(0, 4, 1).pull(0, 6, 0, 2).fence(0).
			push(1, 8, 2, 4).cmd(1, 12, 0, 0, 0, 0).cmd(1, 13, 0, 0, 0, 0).both(20),
		// loss both ways, repaired by gap NACKs and timeouts
		pfBegin(c0, c1).push(0, 9, 0, 0).step(0, 1).fault(0, pfDrop, 0).fault(0, pfDrop, 0).step(1, 1).
			fault(1, pfDrop, 0).step(0, 2).advance(3).step(0, 6).both(30),
		// duplication, reordering and a delayed frame
		pfBegin(c0, c1).push(0, 8, 1, 1).pull(1, 7, 0, 3).step(0, 1).fault(0, pfDup, 0).fault(0, pfSwap, 3).
			fault(0, pfDelay, 0).step(1, 2).fault(0, pfRelease, 0).step(1, 1).both(30),
		// corruption caught by the CRC
		pfBegin(c0, c1).push(0, 6, 0, 0).step(0, 1).fault(0, pfCorrupt, 77).step(1, 1).advance(4).both(30),
		// a silent peer: commands fail UNREACHABLE, a FENCE behind them
		// completes after them, and the peer comes back
		pfBegin(0x44, c1).push(0, 9, 0, 0).fence(0).push(0, 0, 1, 1).step(0, 2).advance(4).step(0, 6).
			advance(5).step(0, 6).advance(6).step(0, 6).advance(7).step(0, 6).push(0, 3, 2, 2).both(30),
		// a small status ring and a small IPUSH ring in hold mode, then NACK mode
		pfBegin(0x46, 0x24).ipush(0, 6, 0).ipush(0, 6, 1).ipush(0, 6, 2).cmd(0, 5, 0x40, 8, 3, 0).both(10).
			consume(1).both(10),
		pfBegin(0x56, 0x24).ipush(0, 6, 0).ipush(0, 6, 1).ipush(0, 6, 2).both(10).consume(1).advance(5).both(10),
		// forged ACKs and NACKs
		pfBegin(c0, c1).push(0, 9, 0, 0).step(0, 1).forge(1, 0, 3, 0).forge(1, 1, 1, 0x18).step(0, 1).
			forge(1, 3, 0, 0).forge(1, 4, 1, 5).step(0, 1).both(20),
		// a late replay of an old frame
		pfBegin(c0, c1).push(0, 4, 0, 0).both(5).replay(0, 0).push(0, 4, 1, 0).both(5),
		// a paging request holds the data behind it until PAGE_DONE
		pfBegin(c0, c1).page(0, 3).push(0, 6, 0, 0).both(6).consume(1).both(10),
		// a per-message IPUSH that cannot be kept whole wraps, and says where
		pfBegin(0x46, 0xe6).ipush(0, 14, 0).ipush(0, 12, 1).both(4).consume(1).ipush(0, 6, 2).both(6),
		// a burst of bit errors in a frame's flags
		pfBegin(c0, c1).push(0, 0, 0, 0).step(0, 1).corrupt(0, 76, 0x14).both(10),
		// the driver switches a full ring from hold to NACK and back
		pfBegin(0x46, 0x24).ipush(0, 6, 0).ipush(0, 6, 1).ipush(0, 6, 2).both(5).ringMode(1).both(5).
			consume(1).ringMode(1).both(5).consume(1).both(5),
		// a late ACK of a session that ended reaches the next session
		pfLateAckScript(),
	}
}

// pfLateAckScript holds back node 2's ACK of node 1's first PUSH, makes
// node 1 give up the session (its resends' ACKs are lost), starts a new
// session whose first frame is lost, and lets the held ACK arrive: its
// Ack 1 is of the old session, and must not complete the new PUSH.
func pfLateAckScript() pfScript {
	s := pfBegin(0x41, 0x26)                     // window 4, UNREACHABLE after 2 timeouts
	s = s.push(0, 0, 0, 0).step(0, 1).step(1, 1) // placed and acknowledged
	s = s.fault(1, pfDelay, 0)                   // the ACK is held back
	for _, adv := range []byte{4, 5, 6, 7} {     // the resends' ACKs are lost: UNREACHABLE
		s = s.advance(adv).step(0, 6).step(1, 1).fault(1, pfDrop, 0)
	}
	s = s.push(0, 0, 1, 1).step(0, 1).fault(0, pfDrop, 0) // a new session; its first frame is lost
	return s.fault(1, pfRelease, 0).step(0, 1).both(4)    // the old ACK arrives
}

// A late frame of a session the sender gave up is dropped: the receiver
// neither returns to that session nor places its packets again (it did,
// and reported the PUSH complete twice).
func TestPairLateFrameOfEndedSession(t *testing.T) {
	s := pfBegin(0x41, 0x26)                                // window 4, UNREACHABLE after 2 timeouts
	s = s.push(0, 0, 0, 0).step(0, 1).step(1, 1)            // placed and reported
	s = s.fault(1, pfDrop, 0).advance(4).step(0, 6)         // its ACK lost: resent
	s = s.step(1, 1).fault(1, pfDrop, 0)                    // a duplicate, its ACK lost again
	s = s.advance(5).step(0, 6).advance(6).step(0, 12)      // UNREACHABLE: the session ends
	s = s.push(0, 0, 1, 1).step(0, 1).step(1, 2).step(0, 1) // the next PUSH, in a new session
	s = s.replay(0, 2).step(1, 2).both(4)                   // the first frame again, late
	r := pairScript(t, s)
	// A tail-loss probe node 1 sent before its timeout is one more
	// duplicate at node 2.
	probes := r.dev[0].r.Counter(uapi.CtrTLPs)
	if n := r.dev[1].r.Counter(uapi.CtrDuplicates); n != 2+probes {
		t.Fatalf("node 2 counted %d duplicates, want %d (the resend, %d tail-loss probes, and the late frame dropped)", n, 2+probes, probes)
	}
}

// A refusal the link had no room for waits among the control frames
// owed, and no frame that leaves before it may acknowledge the refused
// packet: node 2's PULL response (served before owed frames are
// flushed) and its Hold NACK (owed first) did, and node 1's PUSH outside
// the window completed DONE though nothing was placed.
func TestPairRefusalOwedBehindFullLink(t *testing.T) {
	s := pfBegin(0x46, 0x02)                                       // window 8; 64-byte packets, 3 frames a way
	s = s.page(0, 0).pull(0, 0, 0, 6).pushOutside(0, 0).step(0, 1) // node 1: a paging request, then data it holds
	s = s.push(1, 4, 0, 0).step(1, 1)                              // node 2 fills the link to node 1
	s = s.consume(1).step(1, 2)                                    // PAGE_DONE: the held PULL is served, link full
	s = s.step(0, 1).advance(3).step(0, 6)                         // node 1 resends the refused PUSH
	s = s.step(1, 1).step(0, 1).both(10)                           // refused behind the owed Hold NACK
	r := pairScript(t, s)
	if c := r.cmds[0][2]; c.err != uapi.ERemoteAddr || c.stats != 1 {
		t.Fatalf("the PUSH outside the window ended %v after %d statuses, want REMOTE_ADDR", c.err, c.stats)
	}
}

// A bit error that clears a frame's CRC flag leaves nothing to check it
// by: on a medium that needs checksums such a frame is dropped as a CRC
// failure and comes again, instead of being taken as it arrived (without
// First: discarded yet acknowledged, the PUSH DONE with nothing placed;
// without Last: refused, the PUSH failed for a link error).
func TestPairCorruptedCRCFlag(t *testing.T) {
	// byte 76*7 % 86 = 16 of the 8-byte PUSH's 86-byte frame: its flags' low byte
	for _, mask := range []byte{0x10, 0x12, 0x14, 0x11, 0x90} {
		r := pairScript(t, pfBegin(0x46, 0x26).push(0, 0, 0, 0).step(0, 1).corrupt(0, 76, mask).both(10))
		if n := r.dev[1].r.Counter(uapi.CtrCRCFail); n != 1 {
			t.Fatalf("flags ^ %#x: node 2 counted %d CRC failures, want 1", mask, n)
		}
		if c := r.cmds[0][0]; c.err != uapi.EOK || c.stats != 1 || c.rxMsgs != 1 {
			t.Fatalf("flags ^ %#x: the PUSH ended with %v after %d statuses, reported %d times", mask, c.err, c.stats, c.rxMsgs)
		}
	}
}

// nextDeadline is the earliest retransmission (or PULL guard) deadline
// of any of d's peers (0: none), so the quiesce phase can jump the clock to it.
func (d *Device) nextDeadline() int64 {
	var at int64
	for _, p := range d.peerList {
		for _, t := range []int64{p.tx.Deadline(), p.pullDeadline} {
			if t != 0 && (at == 0 || t < at) {
				at = t
			}
		}
	}
	return at
}
