package main

import "testing"

// mpbench's records become curves: ping-pong records only, raw PUSH as a
// curve of its own.
func TestMPBenchRecordsToCurves(t *testing.T) {
	in := `{"lib":"raw","medium":"shm","test":"pingpong","buffer":"link","size":8,"p":2,"oneway_us":1,"mbps":8}
{"lib":"fmpl","medium":"shm","test":"pingpong","buffer":"host","size":8,"p":2,"oneway_us":2,"mbps":4}
{"lib":"fmpl","medium":"shm","test":"barrier","size":0,"p":4,"oneway_us":9}
`
	res, err := mpbenchRecords([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Mode != "raw PUSH" || res[1].Mode != "fmpl" || res[1].Condition != "host" || res[1].RTTHalfUs != 2 {
		t.Fatalf("got %+v", res)
	}
}
