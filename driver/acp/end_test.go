package acp

import "testing"

// An END for a handle already completed is counted as a protocol error
// and changes nothing: the first END decided, so a second one (a LANDED
// whose PUSH failed after all, a retry) cannot turn a success into an
// error, nor the other way round.
func TestSecondEndChangesNothing(t *testing.T) {
	c := &ACP{errs: map[Handle]error{}}
	st := &station{c: c, head: 3} // handles 1-3 issued
	st.onEnd(2, nil, 0)           // 2 done, 1 not yet: doneUpTo stays 0
	st.onEnd(2, ErrUnregistered, 0)
	if err := c.errs[2]; err != nil {
		t.Fatalf("a second END for handle 2 recorded %v over its success", err)
	}
	if st.stats.Protocol != 1 {
		t.Fatalf("protocol errors %d, want 1 for the second END", st.stats.Protocol)
	}
	st.onEnd(1, nil, 0)
	if st.doneUpTo != 2 || c.done.Load() != 2 {
		t.Fatalf("done up to %d (published %d), want 2", st.doneUpTo, c.done.Load())
	}
	st.onEnd(1, nil, 0) // below doneUpTo now
	if st.stats.Protocol != 2 {
		t.Fatalf("protocol errors %d, want 2", st.stats.Protocol)
	}
}
