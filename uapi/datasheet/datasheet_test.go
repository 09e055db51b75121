package datasheet

import (
	"os"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/uapi"
)

// The checked-in datasheet must be exactly what the ABI generates.
func TestDatasheetUpToDate(t *testing.T) {
	got, err := os.ReadFile("../../docs/datasheet.md")
	if err != nil {
		t.Fatalf("read datasheet: %v", err)
	}
	if string(got) != Render() {
		t.Fatal("docs/datasheet.md disagrees with package uapi: run go generate ./uapi")
	}
}

// Every register, counter and error code appears, and no two registers share an offset.
func TestDatasheetComplete(t *testing.T) {
	s := Render()
	seen := map[uint32]string{}
	for _, r := range uapi.Registers {
		if o, dup := seen[r.Off]; dup {
			t.Errorf("%s and %s share offset %#x", r.Name, o, r.Off)
		}
		seen[r.Off] = r.Name
		if r.Off%8 != 0 || r.Off >= uapi.RegCounters {
			t.Errorf("%s offset %#x misplaced", r.Name, r.Off)
		}
		if !strings.Contains(s, "| "+r.Name+" |") {
			t.Errorf("register %s missing", r.Name)
		}
	}
	if uapi.Counter(uapi.NumCounters-1).Off() >= uapi.RegTrace {
		t.Error("counters overflow into trace stamps")
	}
	for e := uapi.Errno(0); e < uapi.NumErrnos; e++ {
		if !strings.Contains(s, "| "+e.String()+" |") {
			t.Errorf("error %s missing", e)
		}
	}
}
