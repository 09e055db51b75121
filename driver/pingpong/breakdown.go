package pingpong

import (
	"fmt"
	"io"
)

// BreakdownResult is filled by Breakdown.
type BreakdownResult struct{}

// Breakdown is not written yet.
func Breakdown(a, b *Side, iters int, progress func(string)) (*BreakdownResult, error) {
	return nil, fmt.Errorf("not yet")
}

// PrintBreakdown prints it.
func PrintBreakdown(w io.Writer, b *BreakdownResult) {}
