package lab

import (
	"errors"
	"strings"
	"testing"
)

const fiTable = `bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
0       10      =10      0           0.14s      0.00    6978.85       0.00
8       1k      =1k      15k         0.03s      0.48      16.61       0.06
1.5k    10      =10      30k         0.12s      0.25    6027.30       0.00
32k     10      =10      640k        0.21s      3.12   10500.00       0.00
dimmnet-fi stats: node 1 {Sends:251 Rendezvous:0 Recvs:251 RMAWrites:0 RMAReads:0 Atomics:0}`

// fi_pingpong's rows parse with fabtests' suffixes: sizes in powers of
// 1024, counts in powers of 1000; other lines are skipped.
func TestParseFiPingpong(t *testing.T) {
	rs, err := ParseFiPingpong(strings.Split(fiTable, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []FiResult{
		{Bytes: "0", Size: 0, Iters: 10, MBps: 0, UsecPerXfer: 6978.85},
		{Bytes: "8", Size: 8, Iters: 1000, MBps: 0.48, UsecPerXfer: 16.61},
		{Bytes: "1.5k", Size: 1536, Iters: 10, MBps: 0.25, UsecPerXfer: 6027.30},
		{Bytes: "32k", Size: 32768, Iters: 10, MBps: 3.12, UsecPerXfer: 10500},
	}
	if len(rs) != len(want) {
		t.Fatalf("%+v", rs)
	}
	for i := range want {
		if rs[i] != want[i] {
			t.Fatalf("row %d: %+v, want %+v", i, rs[i], want[i])
		}
	}
	if _, err := ParseFiPingpong([]string{"[error] util/pingpong.c:408 : failed to connect"}); !errors.Is(err, ErrNoFiRows) {
		t.Fatalf("no table: %v", err)
	}
	if _, err := ParseFiPingpong([]string{"8 10 =10 15k 0.03s x 16.61 0.06"}); err == nil || !strings.Contains(err.Error(), "fi_pingpong row") {
		t.Fatalf("a bad number: %v", err)
	}
}

func FuzzParseFiPingpong(f *testing.F) {
	f.Add(fiTable)
	f.Add("1.5q 10 =10 1 1 1 1 1")
	f.Fuzz(func(t *testing.T, s string) {
		rs, err := ParseFiPingpong(strings.Split(s, "\n"))
		if err == nil && len(rs) == 0 {
			t.Fatal("no rows and no error")
		}
	})
}
