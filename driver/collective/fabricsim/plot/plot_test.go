package plot

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/driver/collective/fabricsim"
)

func TestDrawTable(t *testing.T) {
	var recs []fabricsim.Record
	for i, o := range collective.Orders {
		recs = append(recs, fabricsim.Record{Table: "3", Order: o, Column: "Up*/Down*", US: 40 + float64(i), PaperUS: 41 + float64(i)})
	}
	var b bytes.Buffer
	if err := Draw(&b, "t.svg", "3", recs); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<svg") || !strings.Contains(b.String(), "SHIO") {
		t.Fatal("no SVG with the orders drawn")
	}
	if err := Draw(&b, "t.pdf", "3", recs); !errors.Is(err, ErrFormat) {
		t.Fatal(err)
	}
	if err := Draw(&b, "t.png", "9", recs); err == nil {
		t.Fatal("drew a table with no records")
	}
}
