package pairs

import (
	"net"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver/perf"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/vdev"
)

// Two hosts, played by loopback: perf HOST's side dials perf serve's
// TCP control port, the two swap node ids and UDP ports, each opens its
// device on UDP, and every pattern runs with every streamed message
// compared; the serving side then waits for the next initiator.
func TestPerfAcrossHosts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		served <- serveOne(c, "udp", "", vdev.DefaultHubPayload, 65536)
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	p, err := PerfDialHost("127.0.0.1", "udp", "", port, vdev.DefaultHubPayload, 65536)
	if err != nil {
		t.Fatal(err)
	}
	o := perf.Options{Patterns: []string{perf.PatternLat, perf.PatternBW, perf.PatternRate}, Ops: []string{pingpong.ModePush, pingpong.ModeIPush},
		Conds: []string{pingpong.CondHostCopy}, Sizes: []int{8, 65536}, Window: 16, Time: 20 * time.Millisecond, Check: true}
	recs, err := perf.Run(p, o, func(string) {})
	if cerr := p.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if len(recs) != 10 {
		t.Fatalf("%d records, want 10 (lat and bw at two sizes, rate, for PUSH and IPUSH)", len(recs))
	}
	for _, r := range recs {
		if r.Medium != "udp (hosts)" || r.Iters < 1 {
			t.Errorf("record %+v", r)
		}
		if r.Pattern != perf.PatternLat && r.Checked < r.Iters {
			t.Errorf("%s %s %d: %d of %d streamed messages compared", r.Pattern, r.Op, r.Size, r.Checked, r.Iters)
		}
	}
}
