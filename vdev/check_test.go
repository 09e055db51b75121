package vdev

import (
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
)

// checkedPair is two checked devices on a hub, stepped by hand on a
// virtual clock: a test plays the driver by storing into the region.
type checkedPair struct {
	a, b *Device
	now  int64
}

func newCheckedPair(t *testing.T) *checkedPair {
	t.Helper()
	return newCheckedPairCmdq(t, 0)
}

// newCheckedPairCmdq is newCheckedPair with cmdq command slots (0: the
// default).
func newCheckedPairCmdq(t *testing.T, cmdq int) *checkedPair {
	t.Helper()
	cp := &checkedPair{now: 1 << 40}
	hub := link.NewHub(4096, 64)
	for i, n := range []uint16{1, 2} {
		d, err := New(Config{Node: n, RegionSize: 1 << 20, Check: true, CmdEntries: cmdq})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		d.clock = func() int64 { return cp.now }
		p, err := hub.Attach(d.MAC())
		if err != nil {
			t.Fatal(err)
		}
		d.AttachPort(p)
		if i == 0 {
			cp.a = d
		} else {
			cp.b = d
		}
	}
	return cp
}

// run steps both devices a few passes.
func (cp *checkedPair) run() {
	for range 4 {
		for _, d := range []*Device{cp.a, cp.b} {
			var t int64
			stepHeld(d, &t)
		}
	}
}

// post publishes desc at the device's next command index, as a driver
// does (body, then SEQ).
func post(d *Device, idx uint64, desc uapi.Desc) {
	d.r.WriteDesc(d.cmdSlot(idx), &desc, idx)
}

// only checks that the device logged exactly one violation since skip,
// of kind k, and returns it.
func only(t *testing.T, d *Device, skip uint64, k uapi.ViolationKind) uapi.Violation {
	t.Helper()
	if n := d.r.Load64(uapi.CtrViolations.Off()) - skip; n != 1 {
		t.Fatalf("VIOLATIONS moved by %d, want 1 (%v): %v", n, k, d.r.ReadViolations())
	}
	vs := d.r.ReadViolations()
	v := vs[len(vs)-1]
	if v.Kind != k {
		t.Fatalf("logged %v, want %v", v, k)
	}
	return v
}

func violations(d *Device) uint64 { return d.r.Load64(uapi.CtrViolations.Off()) }

func TestCheckedDeviceNamesEachViolationOnce(t *testing.T) {
	t.Run("read-only register", func(t *testing.T) {
		cp := newCheckedPair(t)
		cp.run()
		cp.a.r.Store64(uapi.RegNodeID, 99)
		cp.run()
		cp.run()
		v := only(t, cp.a, 0, uapi.VioReadOnly)
		if v.Where != uapi.RegNodeID || v.Expected != 1 || v.Got != 99 {
			t.Fatalf("%v: want NODE_ID 1 -> 99", v)
		}
	})
	t.Run("status head past the tail, then backwards", func(t *testing.T) {
		cp := newCheckedPair(t)
		cp.a.r.Store64(uapi.RegStatqHead, 5)
		cp.run()
		if v := only(t, cp.a, 0, uapi.VioStatusHead); v.Got != 5 || v.Expected != 0 {
			t.Fatalf("%v", v)
		}
		cp.a.r.Store64(uapi.RegStatqHead, 3)
		cp.run()
		if v := only(t, cp.a, 1, uapi.VioStatusHead); v.Got != 3 || v.Expected != 5 {
			t.Fatalf("%v", v)
		}
	})
	t.Run("AMT head past the tail; entry rewritten while holding data", func(t *testing.T) {
		cp := newCheckedPair(t)
		d := cp.a
		e := d.g.AMTOff
		d.r.Store64At(e+uapi.AMTBase, 1<<16)
		d.r.Store64At(e+uapi.AMTCfg, 4096|uint64(uapi.AMTFlagValid)<<32)
		cp.run()
		d.r.Store64At(e+uapi.AMTHead, 64)
		cp.run()
		if v := only(t, d, 0, uapi.VioAMTHead); v.Index != 0 || v.Got != 64 || v.Expected != 0 {
			t.Fatalf("%v", v)
		}
		d.r.Store64At(e+uapi.AMTTail, 128) // as if the device had written 128 bytes
		cp.run()
		d.r.Store64At(e+uapi.AMTBase, 2<<16)
		cp.run()
		if v := only(t, d, 1, uapi.VioAMTChanged); v.Where != e+uapi.AMTBase || v.Got != 2<<16 {
			t.Fatalf("%v", v)
		}
	})
	t.Run("slot overrun", func(t *testing.T) {
		cp := newCheckedPair(t)
		d := cp.a
		n := d.g.CmdqEntries
		post(d, n, uapi.Desc{Opcode: uapi.OpNOP}) // index n lands in slot 0 before command 0 was taken
		cp.run()
		cp.run()
		if v := only(t, d, 0, uapi.VioSlotOverrun); v.Index != 0 || v.Got != n+1 {
			t.Fatalf("%v", v)
		}
	})
	t.Run("descriptor rewritten while in flight", func(t *testing.T) {
		cp := newCheckedPair(t)
		d := cp.a
		post(d, 0, uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, Length: 64, Cookie: 7})
		var t0 int64
		stepHeld(d, &t0)                       // taken and sent, not acknowledged
		d.r.Store64At(d.cmdSlot(0)+8*3, 0xbad) // a body word changes; SEQ stays
		cp.run()                               // acknowledged: it completes
		if d.statTail == 0 {
			t.Fatal("the PUSH did not complete")
		}
		if v := only(t, d, 0, uapi.VioDescChanged); v.Index != 0 || v.Got != 0xbad || v.Where != d.cmdSlot(0)+24 {
			t.Fatalf("%v", v)
		}
	})
	t.Run("no doorbell for every command, the engine asleep between them", func(t *testing.T) {
		// A starved engine falls asleep again before the grace of the
		// first suspicion has passed; the driver's next command (its
		// moving on) is then found by the next timer wake-up, which must
		// report the first before it suspects the second.
		cp := newCheckedPair(t)
		d := cp.a
		d.checkSleep(false)
		post(d, 0, uapi.Desc{Opcode: uapi.OpNOP})
		d.checkSleep(true)
		cp.run() // command 0 done within the grace
		d.checkSleep(false)
		cp.now += doorbellGrace + 1
		post(d, 1, uapi.Desc{Opcode: uapi.OpNOP})
		d.checkSleep(true)
		cp.run()
		if v := only(t, d, 0, uapi.VioNoDoorbell); v.Index != 0 {
			t.Fatalf("%v", v)
		}
	})
	t.Run("no doorbell, the next command found within the grace", func(t *testing.T) {
		// The engine sleeps briefly while frames await their ACKs, and a
		// quick driver's next command is found by such a wake-up before
		// the first suspicion's grace has passed: the first must still be
		// reported, not replaced by the second.
		cp := newCheckedPair(t)
		d := cp.a
		d.checkSleep(false)
		post(d, 0, uapi.Desc{Opcode: uapi.OpNOP})
		d.checkSleep(true)
		cp.run()
		d.checkSleep(false)
		cp.now += doorbellGrace / 4
		post(d, 1, uapi.Desc{Opcode: uapi.OpNOP})
		d.checkSleep(true)
		cp.run()
		cp.now += doorbellGrace
		cp.run()
		if v := only(t, d, 0, uapi.VioNoDoorbell); v.Index != 0 {
			t.Fatalf("%v", v)
		}
	})
	t.Run("a late doorbell counted before the engine slept again", func(t *testing.T) {
		// The ring for command 0 is counted after the timer found it;
		// the engine's next sleep takes a fresh count, which must not
		// hide that ring from the suspicion.
		cp := newCheckedPair(t)
		d := cp.a
		d.checkSleep(false)
		post(d, 0, uapi.Desc{Opcode: uapi.OpNOP})
		d.checkSleep(true)
		d.countShared(uapi.CtrDoorbells, 1)
		d.checkSleep(false)
		cp.now += doorbellGrace + 1
		post(d, 1, uapi.Desc{Opcode: uapi.OpNOP})
		cp.run()
		if n := violations(d); n != 0 {
			t.Fatalf("a late doorbell was reported: %v", d.r.ReadViolations())
		}
	})
	t.Run("no doorbell while the device slept", func(t *testing.T) {
		cp := newCheckedPair(t)
		d := cp.a
		d.checkSleep(false)
		post(d, 0, uapi.Desc{Opcode: uapi.OpNOP})
		d.checkSleep(true) // the timer, not a doorbell, woke it
		cp.run()
		if n := violations(d); n != 0 {
			t.Fatalf("reported within the grace: %v", d.r.ReadViolations())
		}
		cp.now += doorbellGrace + 1
		cp.run()
		if n := violations(d); n != 0 {
			// a driver descheduled since its publish rings when it runs
			t.Fatalf("reported before the driver ran on: %v", d.r.ReadViolations())
		}
		post(d, 1, uapi.Desc{Opcode: uapi.OpNOP}) // it ran on without ringing
		cp.run()
		if v := only(t, d, 0, uapi.VioNoDoorbell); v.Index != 0 {
			t.Fatalf("%v", v)
		}
		// A doorbell rung within the grace (the driver saw DEV_SLEEP = 1
		// an instant before the timer fired) is no violation, even when the
		// driver posts its next command before it.
		d.checkSleep(false)
		post(d, 2, uapi.Desc{Opcode: uapi.OpNOP})
		d.checkSleep(true)
		cp.run()
		post(d, 3, uapi.Desc{Opcode: uapi.OpNOP})
		d.countShared(uapi.CtrDoorbells, 1)
		cp.now += doorbellGrace + 1
		cp.run()
		if n := violations(d); n != 1 {
			t.Fatalf("a doorbell within the grace was reported: %v", d.r.ReadViolations())
		}
	})
}

// A correct exchange (PUSH, IPUSH into a ring the driver drains, NOPs,
// FENCEs) on checked devices raises no violation.
func TestCheckedDeviceQuietForACorrectDriver(t *testing.T) {
	cp := newCheckedPair(t)
	a, b := cp.a, cp.b
	e := b.g.AMTOff
	b.r.Store64At(e+uapi.AMTBase, 1<<16)
	b.r.Store64At(e+uapi.AMTCfg, 8192|uint64(uapi.AMTFlagValid)<<32)
	var head uint64
	for i := range uint64(200) {
		switch i % 4 {
		case 0:
			post(a, i, uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, Length: 256, RemoteAddr: 4096})
		case 1:
			post(a, i, uapi.Desc{Opcode: uapi.OpIPUSH, Flags: uapi.FlagSignal | uapi.FlagDirectAMT, DstNode: 2, Length: 128})
		case 2:
			post(a, i, uapi.Desc{Opcode: uapi.OpNOP, Flags: uapi.FlagSignal})
		default:
			post(a, i, uapi.Desc{Opcode: uapi.OpFENCE, Flags: uapi.FlagSignal})
		}
		cp.run()
		// Both drivers consume their statuses; b frees its ring.
		for _, d := range []*Device{a, b} {
			d.r.Store64(uapi.RegStatqHead, d.statTail)
		}
		if t := b.r.Load64At(e + uapi.AMTTail); t != head {
			head = t
			b.r.Store64At(e+uapi.AMTHead, head)
		}
	}
	cp.run()
	if a.r.Load64(uapi.CtrCmds.Off()) != 200 || b.r.Load64(uapi.CtrRxIPush.Off()) != 50 {
		t.Fatalf("the exchange did not run: CMDS %d, RX_IPUSH %d", a.r.Load64(uapi.CtrCmds.Off()), b.r.Load64(uapi.CtrRxIPush.Off()))
	}
	for _, d := range []*Device{a, b} {
		if n := violations(d); n != 0 {
			t.Fatalf("node %d: %d violations for a correct driver: %v", d.node, n, d.r.ReadViolations())
		}
	}
}

// A driver that floods violations has every one counted and at most
// ViolLogPerSecond a second logged.
func TestCheckedDeviceRateLimitsTheLog(t *testing.T) {
	cp := newCheckedPair(t)
	d := cp.a
	const n = 3 * uapi.ViolLogPerSecond / 2
	for i := range n {
		d.r.Store64(uapi.RegMTU, uint64(1000+i)) // a read-only register, again and again
		cp.run()
	}
	if got := violations(d); got != n {
		t.Fatalf("VIOLATIONS %d, want %d: every one counted", got, n)
	}
	vs := d.r.ReadViolations()
	if last := vs[len(vs)-1].Seq; last != uapi.ViolLogPerSecond {
		t.Fatalf("%d logged within the second, want %d", last, uapi.ViolLogPerSecond)
	}
	cp.now += 1_000_000_000 // a second later the log takes more
	d.r.Store64(uapi.RegMTU, 1)
	cp.run()
	if vs := d.r.ReadViolations(); vs[len(vs)-1].Seq != uapi.ViolLogPerSecond+1 {
		t.Fatalf("nothing logged the next second: %v", vs[len(vs)-1])
	}
}

// A slot CMDQ_HEAD has passed may be rewritten for its next lap while its
// command is still in flight: the device keeps its own copy, and a
// checked device does not call it DESC_CHANGED once the driver has
// published the index before the slot's next one.
func TestCheckedDeviceAllowsNextLapRewrite(t *testing.T) {
	cp := newCheckedPairCmdq(t, 4)
	d := cp.a
	post(d, 0, uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, Length: 64, Cookie: 7})
	var t0 int64
	stepHeld(d, &t0) // taken and sent, not acknowledged
	for i := uint64(1); i < 4; i++ {
		post(d, i, uapi.Desc{Opcode: uapi.OpNOP, Flags: uapi.FlagSignal})
	}
	stepHeld(d, &t0)
	if d.cmdHead != 4 {
		t.Fatalf("head %d, want 4", d.cmdHead)
	}
	// Index 4's body goes into slot 0, SEQ not stored yet, while command 0
	// is in flight; then command 0 completes.
	next := uapi.Desc{Opcode: uapi.OpNOP, Flags: uapi.FlagSignal, Cookie: 0x4444}
	w := next.Words()
	for i := range uapi.DescSeqOff / 8 {
		d.r.Store64At(d.cmdSlot(4)+uint64(8*i), w[i])
	}
	cp.run()
	if d.statTail < 4 {
		t.Fatalf("command 0 did not complete: %d statuses", d.statTail)
	}
	d.r.Store64At(d.cmdSlot(4)+uapi.DescSeqOff, 5)
	cp.run()
	if d.cmdHead != 5 || d.statTail != 5 {
		t.Fatalf("command 4 did not run: head %d, %d statuses", d.cmdHead, d.statTail)
	}
	if n := violations(d); n != 0 {
		t.Fatalf("%d violations for a next-lap rewrite: %v", n, d.r.ReadViolations())
	}
}

// A command published ahead of the next index, which never is, stalls
// the queue: a checked device names it SKIPPED_INDEX after a second,
// and a moment's out-of-order publishing is not reported.
func TestCheckedDeviceNamesSkippedIndex(t *testing.T) {
	cp := newCheckedPair(t)
	d := cp.a
	// out of order for a moment: 1 before 0
	post(d, 1, uapi.Desc{Opcode: uapi.OpNOP})
	d.checkSleep(false)
	cp.now += skipGrace / 2
	post(d, 0, uapi.Desc{Opcode: uapi.OpNOP})
	d.countShared(uapi.CtrDoorbells, 1) // it rings, as it must for a sleeping device
	d.checkSleep(true)
	cp.run()
	if d.cmdHead != 2 || violations(d) != 0 {
		t.Fatalf("head %d, violations %v", d.cmdHead, d.r.ReadViolations())
	}
	// index 2 skipped: 3 published
	post(d, 3, uapi.Desc{Opcode: uapi.OpNOP})
	cp.run()
	d.checkSleep(false)
	cp.now += skipGrace / 2
	d.checkSleep(true)
	if n := violations(d); n != 0 {
		t.Fatalf("reported within the grace: %v", d.r.ReadViolations())
	}
	cp.now += skipGrace / 2
	d.checkSleep(true)
	v := only(t, d, 0, uapi.VioSkippedIndex)
	if v.Index != 2 || v.Expected != 3 || v.Got != 4 || v.Where != d.cmdSlot(2)+uapi.DescSeqOff {
		t.Fatalf("%v", v)
	}
	cp.now += 2 * skipGrace
	d.checkSleep(true)
	d.checkSleep(false)
	if n := violations(d); n != 1 {
		t.Fatalf("the same stall reported %d times", n)
	}
	// the driver mends it: the queue runs on
	post(d, 2, uapi.Desc{Opcode: uapi.OpNOP})
	cp.run()
	if d.cmdHead != 4 {
		t.Fatalf("head %d after the gap was filled", d.cmdHead)
	}
}
