package flakehunt

import (
	"strings"
	"testing"
)

// A real `go test -json` transcript: a subtest failed inside its parent,
// another package failed to build. Each cause is one row with its message.
const transcript = `{"Action":"run","Package":"p/a","Test":"TestX"}
{"Action":"output","Package":"p/a","Test":"TestX","Output":"=== RUN   TestX\n"}
{"Action":"run","Package":"p/a","Test":"TestX/sub"}
{"Action":"output","Package":"p/a","Test":"TestX/sub","Output":"    x_test.go:12: round 0: 2 notifies, want 1\n"}
{"Action":"output","Package":"p/a","Test":"TestX/sub","Output":"--- FAIL: TestX/sub (0.01s)\n"}
{"Action":"fail","Package":"p/a","Test":"TestX/sub"}
{"Action":"fail","Package":"p/a","Test":"TestX"}
{"Action":"pass","Package":"p/a","Test":"TestY"}
{"Action":"fail","Package":"p/a"}
{"Action":"output","Package":"p/b","Output":"panic: test timed out after 10m0s\n"}
{"Action":"fail","Package":"p/b"}
{"Action":"pass","Package":"p/c"}
`

func TestParseReportsEachCauseOnce(t *testing.T) {
	fs, err := Parse(strings.NewReader(transcript), "hog")
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 {
		t.Fatalf("%d failures, want 2 (the subtest and package b): %+v", len(fs), fs)
	}
	if fs[0].Test != "TestX/sub" || fs[0].Run != "hog" || len(fs[0].Message) != 1 ||
		!strings.Contains(fs[0].Message[0], "2 notifies") {
		t.Fatalf("subtest failure %+v", fs[0])
	}
	if fs[1].Package != "p/b" || fs[1].Test != "" || !strings.Contains(strings.Join(fs[1].Message, ""), "timed out") {
		t.Fatalf("package failure %+v", fs[1])
	}
	var b strings.Builder
	Result{Failures: fs, Runs: []RunInfo{{Name: "hog", Failed: 2}}}.Table(&b)
	if !strings.Contains(b.String(), "| p/a | TestX/sub | hog | x_test.go:12: round 0: 2 notifies, want 1 |") {
		t.Fatalf("table:\n%s", b.String())
	}
}

func TestParseCleanRun(t *testing.T) {
	fs, err := Parse(strings.NewReader(`{"Action":"pass","Package":"p/c"}`+"\n"), "1")
	if err != nil || len(fs) != 0 {
		t.Fatalf("%v %v", fs, err)
	}
}
