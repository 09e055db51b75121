package mpbench

import (
	"fmt"
	"io"
	"os"

	"github.com/dimmnet/dimmnet/internal/provenance"
)

// Output says where a run's records go: JSON lines to a file (the tables
// still print), JSON lines on stdout instead of the tables, or the tables.
type Output struct {
	JSONOut string // --json-out
	AsJSON  bool   // --json
}

// Emit writes recs as o asks; table prints them as tables when o.AsJSON
// is off.
func Emit[T any](o Output, recs []T, table func(w io.Writer)) error {
	if o.JSONOut != "" {
		f, err := os.Create(o.JSONOut)
		if err != nil {
			return fmt.Errorf("--json-out: %w", err)
		}
		if err := writeLines(f, recs); err != nil {
			f.Close()
			return fmt.Errorf("--json-out %s: %w", o.JSONOut, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("--json-out %s: %w", o.JSONOut, err)
		}
	}
	if o.AsJSON {
		return writeLines(os.Stdout, recs)
	}
	table(os.Stdout)
	return nil
}

func writeLines[T any](w io.Writer, recs []T) error {
	enc := provenance.NewEncoder(w) // every record says what made it, and under what load
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}
