package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"image/png"
	"io"
	"strings"
	"testing"

	"github.com/dimmnet/dimmnet/driver/pingpong"
)

func plotResults() []pingpong.Result {
	var res []pingpong.Result
	for _, link := range []string{"mem", "udp"} {
		for i, size := range []int{8, 64, 4096, 1 << 20} {
			res = append(res,
				pingpong.Result{Mode: pingpong.ModePush, Condition: pingpong.CondLinkMem, Size: size, Link: link, RTTHalfUs: float64(1 + i), MBps: float64(10 * (i + 1))},
				pingpong.Result{Mode: pingpong.ModeIPush, Condition: pingpong.CondHostCopy, Size: size, Link: link, RTTHalfUs: float64(2 + i), MBps: float64(5 * (i + 1))})
		}
	}
	return res
}

// One series per (link, mode, condition), each with its results.
func TestSeriesOf(t *testing.T) {
	ss := SeriesOf("", plotResults())
	var labels []string
	for _, s := range ss {
		labels = append(labels, s.Label)
		if len(s.Results) != 4 {
			t.Errorf("%s: %d results, want 4", s.Label, len(s.Results))
		}
	}
	want := "mem push linkmem,mem ipush hostcopy,udp push linkmem,udp ipush hostcopy"
	if got := strings.Join(labels, ","); got != want {
		t.Fatalf("labels %s, want %s", got, want)
	}
	if got := SeriesOf("run1", plotResults()[:1])[0].Label; got != "run1 mem push linkmem" {
		t.Fatalf("prefixed label %q", got)
	}
}

// The SVG is well-formed XML naming every series; the PNG decodes; other
// formats and empty input are refused by name.
func TestDraw(t *testing.T) {
	ss := SeriesOf("", plotResults())
	var svg bytes.Buffer
	if err := Draw(&svg, "out.svg", ss); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(svg.Bytes()))
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		if c, ok := tok.(xml.CharData); ok {
			text.Write(c)
		}
	}
	for _, s := range ss {
		if !strings.Contains(text.String(), s.Label) {
			t.Errorf("SVG has no legend entry %q", s.Label)
		}
	}
	var pngBuf bytes.Buffer
	if err := Draw(&pngBuf, "out.PNG", ss); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&pngBuf)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 200 {
		t.Fatalf("PNG of %v", b)
	}
	if err := Draw(io.Discard, "out.pdf", ss); !errors.Is(err, ErrFormat) {
		t.Fatalf("pdf: %v, want ErrFormat", err)
	}
	if err := Draw(io.Discard, "out.svg", nil); err == nil {
		t.Fatal("plotting nothing succeeded")
	}
}

// An attached run's raw baselines (one 8-byte point each) draw no curves.
func TestSeriesOfLeavesRawOut(t *testing.T) {
	res := []pingpong.Result{
		{Mode: pingpong.ModePush, Condition: pingpong.CondLinkMem, Size: 8, RTTHalfUs: 10, MBps: 0.8},
		{Mode: pingpong.ModeRaw, Condition: pingpong.CondUDP, Size: 8, RTTHalfUs: 2, MBps: 4},
	}
	s := SeriesOf("", res)
	if len(s) != 1 || s[0].Label != "push linkmem" {
		t.Fatalf("series %+v, want push linkmem only", s)
	}
}

// The paper's Fig. 8 values are marked beside the curves of the modes and
// conditions a run has, and only those: a push/linkmem and ipush/hostcopy
// run gets their two marks, not the other two.
func TestDrawMarksPaper(t *testing.T) {
	var svg bytes.Buffer
	if err := Draw(&svg, "x.svg", SeriesOf("", plotResults())); err != nil {
		t.Fatal(err)
	}
	s := svg.String()
	for _, want := range []string{"paper push linkmem (min 1.74 µs)", "paper push linkmem (max 644 MB/s)", "paper ipush hostcopy (min 3.89 µs)", "paper ipush hostcopy (max 241 MB/s)"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in the plot", want)
		}
	}
	for _, absent := range []string{"paper ipush linkmem", "paper push hostcopy"} {
		if strings.Contains(s, absent) {
			t.Errorf("%q marked though the run has no such curve", absent)
		}
	}
}
