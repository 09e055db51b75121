package loadavg

import (
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
