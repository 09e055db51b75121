package acpbench

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/internal/subproc"
)

func TestMain(m *testing.M) {
	subproc.Main()
	os.Exit(m.Run())
}

// TestEveryOperationRecorded runs the bench's three rank processes for a
// few operations each: every operation yields a record with a median and
// the table names every target. No time is asserted.
func TestEveryOperationRecorded(t *testing.T) {
	recs, err := Run(Options{Iters: 50, NoPeers: true}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"copy-out-8", "copy-in-8", "third-party-copy-8", "fetch-add-8", "cas-8", "fetch-add-8", "cas-8", "copy-out-1M", "copy-in-1M"}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, r := range recs {
		if r.Operation != want[i] || r.Medium != "shm" || r.US <= 0 || r.Path != "device" && r.Path != "delegated" {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	var b bytes.Buffer
	Print(&b, recs, "shm")
	for _, s := range []string{"third-party copy / two-party copy", "1 MiB copy-in bandwidth", "fetch-add-8 device / delegated"} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, b.String())
		}
	}
}
