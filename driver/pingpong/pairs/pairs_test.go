package pairs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

// TestRunInProcessVerified runs the in-process pair on the in-memory hub
// with every payload compared: the table names the medium and both sides
// verified messages.
func TestRunInProcessVerified(t *testing.T) {
	var out bytes.Buffer
	err := Run(Options{
		Link: Link{Kind: "mem", Payload: 4096}, Max: 64, Iters: 20,
		Time: time.Second, RawTime: time.Second, Verify: true, VerifySet: true,
		Out: &out, Progress: func(string) {},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"link mem", "64 B", "payloads verified byte for byte"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "verified byte for byte: 0 messages") {
		t.Errorf("nothing verified:\n%s", s)
	}
}

// TestLocalSidesTalk builds the pair Local gives and runs one measurement
// on it: the result counts the round trips asked for.
func TestLocalSidesTalk(t *testing.T) {
	sides, closeFn, err := Local(Link{Kind: "mem", Payload: 4096}, 64, true)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	r, err := pingpong.RunFor(sides[0], sides[1], pingpong.ModePush, pingpong.CondHostCopy, 64, pingpong.Count(2, 10))
	if err != nil {
		t.Fatal(err)
	}
	if sides[0].Verified == 0 || sides[1].Verified == 0 {
		t.Errorf("verified %d and %d messages, want both above 0 (result %+v)", sides[0].Verified, sides[1].Verified, r)
	}
}

// TestRunRefuses names the bad runs: sizes out of range, an unknown
// medium, --verify with --breakdown.
func TestRunRefuses(t *testing.T) {
	base := Options{Link: Link{Kind: "mem", Payload: 4096}, Max: 64, Time: time.Second, RawTime: time.Second, Out: &bytes.Buffer{}, Progress: func(string) {}}
	cases := map[string]func(o *Options){
		"--max must be":                 func(o *Options) { o.Max = 4 },
		"want mem, udp":                 func(o *Options) { o.Kind = "carrier-pigeon" },
		"does not apply to --breakdown": func(o *Options) { o.Breakdown, o.Verify, o.VerifySet = true, true, true },
	}
	for want, edit := range cases {
		o := base
		edit(&o)
		if err := Run(o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}
