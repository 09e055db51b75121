package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver/devinfo"
	"github.com/dimmnet/dimmnet/driver/regfs"
	"github.com/dimmnet/dimmnet/uapi"
)

// dimmnet devices lists every device of a daemon with its limits, link and
// peers, as records with provenance and as ibv_devinfo-like text.
func TestDevicesListsDaemon(t *testing.T) {
	d := startDaemon(t, 3, "--check")
	out, err := exec.Command(dimmnet(t), "devices", "--dir", d.dir, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var devs []devinfo.Device
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var dv devinfo.Device
		if err := json.Unmarshal(sc.Bytes(), &dv); err != nil {
			t.Fatal(err)
		}
		checkProvenance(t, "devices", sc.Bytes())
		devs = append(devs, dv)
	}
	if len(devs) != 3 {
		t.Fatalf("%d devices listed, want 3:\n%s", len(devs), out)
	}
	for i, dv := range devs {
		r := observe(t, d.sock(i))
		if dv.Node != uint64(i) || dv.MTU != r.Load64(uapi.RegMTU) || dv.MaxInflight != r.Load64(uapi.RegMaxInflight) ||
			dv.StatqEntries != r.Load64(uapi.RegStatqEntries) || dv.Link != "mem" || len(dv.Peers) != 2 || dv.State != "RUNNING" {
			t.Errorf("device %d: %+v", i, dv)
		}
	}
	txt, err := exec.Command(dimmnet(t), "devices", "--dir", d.dir).Output()
	if err != nil || strings.Count(string(txt), "device:\tnode") != 3 || !strings.Contains(string(txt), "features:\tIPUSH") {
		t.Fatalf("text listing: %v\n%s", err, txt)
	}
}

// stat --json -w prints records whose rates are each counter's difference
// over the records' own time difference, while a driver posts commands.
func TestStatJSONRates(t *testing.T) {
	d := startDaemon(t, 2)
	drv := attach(t, d.sock(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { // NOPs until the watch has two records
		defer close(done)
		for ctx.Err() == nil {
			if _, err := drv.Post(&uapi.Desc{Opcode: uapi.OpNOP}); err != nil {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	cmd := exec.CommandContext(ctx, dimmnet(t), "stat", "--json", "-w", d.sock(0))
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(pipe)
	var recs []regfs.Stat
	for len(recs) < 2 {
		var s regfs.Stat
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, s)
	}
	cancel()
	cmd.Wait()
	<-done
	a, b := recs[0], recs[1]
	if a.Rates != nil {
		t.Errorf("the first record has rates: %v", a.Rates)
	}
	moved := b.Counters["CMDS"] - a.Counters["CMDS"]
	// the records' times are wall-clock (ns); the rates came from the
	// monotonic clock, which may differ from it by a few ns
	want := float64(moved) / b.Time.Sub(a.Time).Seconds()
	if moved == 0 || math.Abs(b.Rates["CMDS"]-want) > want*1e-6 || len(b.Rates) != int(uapi.NumCounters) {
		t.Fatalf("CMDS moved %d: rate %v, want %v (%d rates)", moved, b.Rates["CMDS"], want, len(b.Rates))
	}
	if b.Registers["NODE_ID"] != 0 || b.Registers["MAGIC"] != uapi.Magic {
		t.Errorf("registers: %v", b.Registers)
	}
}
