package tests

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// procRSS is a process's resident memory, from /proc.
func procRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// pushFrame is a well-formed, checksummed 8-byte PUSH into node dst's link
// memory at 0, in node src's name.
func pushFrame(src, dst uint16, seq uint32) []byte {
	h := wire.Header{Version: wire.Version1, Type: wire.TypePush, Flags: wire.FlagSeq | wire.FlagFirst | wire.FlagLast | wire.FlagCRC,
		SrcNode: src, DstNode: dst, Seq: seq, MsgLen: 8, Code: 1}
	return wire.AppendFrame(nil, wire.NodeMAC(dst), wire.NodeMAC(src), &h, []byte("intruder"))
}

// A daemon on UDP takes frames only from the addresses its peers file
// gives: a flood from elsewhere, in a configured node's name and in
// 100,000 made-up nodes' names, places nothing, keeps nothing (resident
// memory stays put) and leaves the daemon idle as soon as it ends.
func TestUDPStrangersAreDroppedWithNoState(t *testing.T) {
	if testing.Short() {
		t.Skip("floods a daemon with 100,000 datagrams")
	}
	peers := udpPeersFile(t)
	d := startDaemon(t, 1, "--link", "udp", "--peers", peers, "--node-base", "0")
	drv := attach(t, d.sock(0))
	f, err := os.Open(peers)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := link.ParsePeers(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	target, err := net.ResolveUDPAddr("udp", pm[wire.NodeMAC(0).String()])
	if err != nil {
		t.Fatal(err)
	}
	x, err := net.DialUDP("udp", nil, target) // a stranger's socket: not node 1's address
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	pid := d.cmd.Process.Pid
	rss0 := procRSS(t, pid)

	const spoofed, strangers = 1000, 100_000
	for i := range spoofed { // node 1 is in the peers file, but not at this address
		if _, err := x.Write(pushFrame(1, 0, uint32(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range strangers { // nodes no peers file names
		if _, err := x.Write(pushFrame(uint16(2+i%60000), 0, uint32(i/60000+1))); err != nil {
			t.Fatal(err)
		}
		if i%2000 == 0 {
			time.Sleep(time.Millisecond) // let the socket drain: a drop by the kernel would count nothing
		}
	}
	flooded := time.Now()
	got := func() (uint64, uint64) { return drv.Counter(uapi.CtrRxSpoofed), drv.Counter(uapi.CtrRxUnknownPeer) }
	// The kernel may drop datagrams of a flood when the socket is full;
	// what arrives is counted, and none of it is placed.
	deadline := time.Now().Add(10 * time.Second)
	for s, u := got(); s+u+drv.Counter(uapi.CtrLinkRxDropped) < spoofed+strangers/2 && time.Now().Before(deadline); s, u = got() {
		time.Sleep(10 * time.Millisecond)
	}
	s, u := got()
	t.Logf("RX_SPOOFED %d of %d, RX_UNKNOWN_PEER %d of %d (the rest dropped by the kernel)", s, spoofed, u, strangers)
	if s == 0 || u < strangers/2 {
		t.Fatalf("refusals not counted: RX_SPOOFED %d, RX_UNKNOWN_PEER %d", s, u)
	}
	if n := drv.Counter(uapi.CtrRxPush); n != 0 || !allBytes(drv.LinkMem()[:8], 0) {
		t.Fatalf("a stranger's PUSH was placed: RX_PUSH %d, link memory %q", n, drv.LinkMem()[:8])
	}
	for _, c := range []uapi.Counter{uapi.CtrAcksTx, uapi.CtrSeqNACKsTx, uapi.CtrOwedDropped} {
		if n := drv.Counter(c); n != 0 {
			t.Fatalf("%v = %d: the device answered a stranger", c, n)
		}
	}
	if grown := procRSS(t, pid) - rss0; grown > 16<<20 {
		t.Fatalf("resident memory grew by %d MiB during the flood: state kept for strangers", grown>>20)
	}

	// Idle again within a second: nothing is owed, nothing retried.
	time.Sleep(time.Until(flooded.Add(time.Second)))
	c0, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	w0 := time.Now()
	time.Sleep(2 * time.Second)
	c1, err := procCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	pct := 100 * float64(c1-c0) / float64(time.Since(w0))
	t.Logf("after the flood: %.2f%% of one core", pct)
	if pct >= 5 {
		t.Fatalf("the daemon still uses %.1f%% of one core after the flood ended", pct)
	}
}
