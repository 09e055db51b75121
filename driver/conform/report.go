package conform

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/internal/provenance"
)

// ErrNoSituation names a situation Pick was asked for that does not exist.
var ErrNoSituation = errors.New("conform: no such situation")

// ErrFailed is returned by Report when any situation failed.
var ErrFailed = errors.New("conform: situations failed")

// Pick returns the situations named in names (comma-separated), in that
// order, or every situation when names is empty.
func Pick(names string) ([]Situation, error) {
	sits := Situations()
	if names == "" {
		return sits, nil
	}
	var pick []Situation
	for _, n := range strings.Split(names, ",") {
		found := false
		for _, s := range sits {
			if s.Name == n {
				pick, found = append(pick, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: %q", ErrNoSituation, n)
		}
	}
	return pick, nil
}

// Report writes the verdicts to w, as JSON records or as a table followed
// by what each failed situation logged and the program's last lines, and
// returns ErrFailed (with the count) unless every situation passed.
func Report(w io.Writer, res []Result, asJSON bool) error {
	passed := 0
	for _, r := range res {
		if r.Pass {
			passed++
		}
	}
	if asJSON {
		e := provenance.NewEncoder(w)
		e.SetIndent("", "  ")
		if err := e.Encode(res); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "situation\tresult\tviolations\ttime")
		for _, r := range res {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f s\n", r.Situation, r.Verdict, r.Violations, r.Seconds)
		}
		tw.Flush()
		for _, r := range res {
			if r.Pass {
				continue
			}
			fmt.Fprintf(w, "\n%s: %s\n", r.Situation, r.Verdict)
			for _, l := range r.Logged {
				fmt.Fprintln(w, "  "+l)
			}
			if r.Output != "" {
				fmt.Fprintln(w, "  the program's last lines:\n    "+strings.ReplaceAll(r.Output, "\n", "\n    "))
			}
		}
		fmt.Fprintf(w, "\n%d of %d situations passed\n", passed, len(res))
	}
	if passed != len(res) {
		return fmt.Errorf("%w: %d of %d", ErrFailed, len(res)-passed, len(res))
	}
	return nil
}
