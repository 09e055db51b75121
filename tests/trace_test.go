package tests

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev/daemon/tracesock"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// pingpongAttach runs a short attached ping-pong between nodes 0 and 1.
func pingpongAttach(t *testing.T, d *daemon, iters string) {
	t.Helper()
	out, err := exec.Command(dimmnet(t), "pingpong", "--attach", d.sock(0)+","+d.sock(1),
		"-q", "--max", "64", "--iters", iters, "--raw-time", "20ms").CombinedOutput()
	if err != nil {
		t.Fatalf("pingpong: %v\n%s\n%s", err, out, d.stderr)
	}
}

// The trace of a ping-pong decodes every command the device took and
// every status it wrote, and carries each frame whole for a capture.
func TestTraceDecodesEveryCommandAndStatus(t *testing.T) {
	d := startDaemon(t, 2)
	drv := attach(t, d.sock(0))
	cmds0, stats0 := drv.Counter(uapi.CtrCmds), drv.Counter(uapi.CtrStatusWritten)
	r, err := tracesock.Dial(tracesock.Path(d.sock(0)), true)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	time.Sleep(200 * time.Millisecond) // past the server's wait for the request line
	pingpongAttach(t, d, "20")
	cmds, stats := drv.Counter(uapi.CtrCmds)-cmds0, drv.Counter(uapi.CtrStatusWritten)-stats0
	recs := map[string]int{}
	parser := wire.NewParser()
	for recs["CMD"] < int(cmds) || recs["STATUS"] < int(stats) {
		rec, err := r.Next()
		if err != nil {
			t.Fatalf("after %v: %v (want %d commands, %d statuses)", recs, err, cmds, stats)
		}
		recs[rec.Kind]++
		if rec.Text == "" {
			t.Fatalf("undecoded record %+v", rec)
		}
		if rec.Kind == "TX" || rec.Kind == "RX" {
			if _, _, err := parser.Parse(rec.Frame); err != nil {
				t.Fatalf("%s frame does not parse: %v (%s)", rec.Kind, err, rec.Text)
			}
		}
	}
	if recs["DROPPED"] != 0 || recs["TX"] == 0 || recs["RX"] == 0 {
		t.Fatalf("records %v", recs)
	}
	t.Logf("records %v for %d commands and %d statuses", recs, cmds, stats)
}

// A trace reader that stops reading never slows the device: the ping-pong
// completes, and the stream says how many events it lost.
func TestTraceSlowReaderDropsNotBlocks(t *testing.T) {
	d := startDaemon(t, 2)
	c, err := net.Dial("unix", tracesock.Path(d.sock(0)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "text\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	pingpongAttach(t, d, "3000") // never read meanwhile
	dec := json.NewDecoder(bufio.NewReader(c))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var rec tracesock.Record
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("no DROPPED record in the stream: %v", err)
		}
		if rec.Kind == "DROPPED" {
			t.Logf("%s", rec.Text)
			return
		}
	}
}
