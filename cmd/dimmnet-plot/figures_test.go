package main

import (
	"os"
	"testing"
)

// mpbench --figures records are told from mpbench's others and drawn one
// file per figure.
func TestFigureRecordsToPlots(t *testing.T) {
	in := `{"figure":"8","lib":"fmpl","where":"processes","ranks":2,"size":0,"us":5,"cores":2}
{"figure":"8","lib":"fmpl","where":"processes","ranks":4,"size":0,"us":9,"cores":2}
{"figure":"10","lib":"fmpl","where":"inprocess","ranks":4,"size":8,"us":2,"mbps":4,"cores":2}
`
	if _, ok := figureRecords([]byte(`{"lib":"fmpl","medium":"shm","test":"barrier","size":0,"p":4,"oneway_us":9}`)); ok {
		t.Fatal("an mpbench record taken for a figure")
	}
	recs, ok := figureRecords([]byte(in))
	if !ok || len(recs) != 3 {
		t.Fatalf("figure records: %v %+v", ok, recs)
	}
	dir := t.TempDir()
	if err := writeFigures(dir+"/f.svg", recs); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"f-fig8.svg", "f-fig10.svg"} {
		if fi, err := os.Stat(dir + "/" + f); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
}
