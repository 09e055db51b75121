package driver_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// PostMore holds its commands until a Post or Ring sends them: nothing
// leaves while they are held, then all of them do, in fewer frames than
// commands (one pass finds them together), and each completes with its
// own status in posting order, its bytes intact at the receiver. Both
// with run to completion (the poster's pass sends them) and with a
// sleeping engine (the doorbell does).
func TestPostMoreSendsWithTheNextCall(t *testing.T) {
	for _, c := range []struct {
		name string
		rtc  bool
		ring bool // Ring after the burst (else its last command is a Post)
	}{{"run-to-completion/Ring", true, true}, {"run-to-completion/Post", true, false}, {"doorbell/Ring", false, true}, {"doorbell/Post", false, false}} {
		t.Run(c.name, func(t *testing.T) {
			if !c.rtc {
				t.Setenv("DIMMNET_RUN_TO_COMPLETION", "0")
			}
			postMore(t, c.ring)
		})
	}
}

// localPair opens drivers on nodes 1 and 2 of an in-process pair made
// with cfg, closed when the test ends.
func localPair(t *testing.T, cfg vdev.Config) (a, b *driver.Driver) {
	t.Helper()
	l, err := vdev.NewLocal(cfg, 0, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var ds [2]*driver.Driver
	for i := range ds {
		if ds[i], err = driver.Open(driver.InProcessDevice(l.Devices[i])); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ds[i].Close() })
	}
	return ds[0], ds[1]
}

// asleep waits until d's idle engine sleeps (a doorbell is then owed).
func asleep(t *testing.T, d *driver.Driver) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); d.Region().Load64(uapi.RegDevSleep) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the idle engine never slept")
		}
	}
}

func postMore(t *testing.T, ring bool) {
	const n = 32
	a, b := localPair(t, vdev.Config{})
	asleep(t, a)
	src := make([]byte, 8*n)
	for i := range src {
		src[i] = byte(3*i + 1)
	}
	a.CopyIn(0, src)
	cmds, pkts := a.Counter(uapi.CtrCmds), a.Counter(uapi.CtrTxPkts)
	desc := func(i int) *uapi.Desc {
		return &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: a.GPID(), Length: 8,
			LocalAddr: uint64(8 * i), RemoteAddr: uint64(4096 + 8*i), Cookie: uint64(i)}
	}
	for i := range n - 1 {
		if _, err := a.PostMore(desc(i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Millisecond)
	if got := a.Counter(uapi.CtrCmds); got != cmds {
		t.Fatalf("the device took %d held commands before anything sent them", got-cmds)
	}
	if ring {
		if _, err := a.PostMore(desc(n - 1)); err != nil {
			t.Fatal(err)
		}
		if err := a.Ring(); err != nil {
			t.Fatal(err)
		}
	} else if _, err := a.Post(desc(n - 1)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		st, err := a.Wait(5e9)
		if err != nil || st.Type != uapi.StDone || st.Cookie != uint64(i) {
			t.Fatalf("status %d: %v, %v; want DONE of cookie %d", i, st, err, i)
		}
	}
	for i := range n {
		st, err := b.Wait(5e9)
		if err != nil || st.Type != uapi.StPUSH || st.Addr != uint64(4096+8*i) || st.Length != 8 {
			t.Fatalf("receive status %d: %v, %v", i, st, err)
		}
	}
	if got := b.LinkMem()[4096 : 4096+8*n]; !bytes.Equal(got, src) {
		t.Fatalf("received %x, sent %x", got, src)
	}
	if got := a.Counter(uapi.CtrTxPkts) - pkts; got >= n {
		t.Fatalf("%d frames for %d commands posted together", got, n)
	}
}

// TestPostMoreNotStranded: commands PostMore held leave when the caller
// waits instead of posting again, or posts into the queue they filled:
// with a sleeping engine each rings the doorbell (counted), rather than
// leaving them to the engine's idle timer.
func TestPostMoreNotStranded(t *testing.T) {
	t.Setenv("DIMMNET_RUN_TO_COMPLETION", "0")
	a, _ := localPair(t, vdev.Config{CmdEntries: 16})
	desc := func(i int) *uapi.Desc {
		return &uapi.Desc{Opcode: uapi.OpPUSH, Flags: uapi.FlagSignal, DstNode: 2, SrcProc: a.GPID(), Length: 8,
			RemoteAddr: uint64(4096 + 8*i), Cookie: uint64(i)}
	}
	// A wait after the burst.
	asleep(t, a)
	bells := a.Counter(uapi.CtrDoorbells)
	for i := range 4 {
		if _, err := a.PostMore(desc(i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		if st, err := a.Wait(5e9); err != nil || st.Type != uapi.StDone || st.Cookie != uint64(i) {
			t.Fatalf("status %d: %v, %v; want DONE of cookie %d", i, st, err, i)
		}
	}
	if a.Counter(uapi.CtrDoorbells) == bells {
		t.Fatal("the wait did not ring for the held commands")
	}
	// A Post into a queue PostMore filled.
	asleep(t, a)
	bells = a.Counter(uapi.CtrDoorbells)
	for i := range 16 {
		if _, err := a.PostMore(desc(i)); err != nil {
			t.Fatal(err)
		}
	}
	var posted bool
	for end := time.Now().Add(5 * time.Second); !posted && time.Now().Before(end); {
		_, err := a.Post(desc(16))
		posted = err == nil
	}
	if !posted || a.Counter(uapi.CtrDoorbells) == bells {
		t.Fatalf("a Post into a full queue of held commands: posted %v, doorbells %d -> %d", posted, bells, a.Counter(uapi.CtrDoorbells))
	}
	for i := range 17 {
		if st, err := a.Wait(5e9); err != nil || st.Type != uapi.StDone {
			t.Fatalf("status %d: %v, %v; want a DONE", i, st, err)
		}
	}
}
