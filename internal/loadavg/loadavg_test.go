package loadavg

import (
	"errors"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	s := String()
	if !strings.HasPrefix(s, "load average ") || !strings.Contains(s, " cores") {
		t.Fatalf("%q", s)
	}
	if strings.Contains(s, "unknown") {
		t.Log("no /proc/loadavg here")
	}
}

// A kernel's line gives its three averages; anything else is refused by
// name.
func TestParse(t *testing.T) {
	la, err := Parse("2.31 0.68 0.25 3/456 7890\n")
	if err != nil || la != [3]float64{2.31, 0.68, 0.25} {
		t.Errorf("loadavg %v %v", la, err)
	}
	for _, bad := range []string{"", "1.0 2.0", "a b c"} {
		if _, err := Parse(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("loadavg %q: %v, want ErrFormat", bad, err)
		}
	}
}

// Whatever /proc/loadavg holds, Parse returns three numbers from the
// text or ErrFormat, no panic.
func FuzzParse(f *testing.F) {
	f.Add("0.52 0.58 0.59 1/234 5678\n")
	f.Add(":::\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		la, err := Parse(s)
		if err == nil && len(strings.Fields(s)) < 3 {
			t.Fatalf("%q parsed as %v", s, la)
		}
		if err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("%q: %v, want ErrFormat", s, err)
		}
	})
}
