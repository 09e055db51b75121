package subproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// WaitAll waits for every started command and returns each one's error,
// in order: a job of rank processes ends when its last rank does. After
// limit (0: no limit) it calls onHang once, which should make the ranks
// end (signal, kill), and waits on.
func WaitAll(cmds []*exec.Cmd, limit time.Duration, onHang func()) []error {
	errs := make([]error, len(cmds))
	var wg sync.WaitGroup
	for r, c := range cmds {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = c.Wait() }()
	}
	if limit <= 0 {
		wg.Wait()
		return errs
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		onHang()
		<-done
	}
	return errs
}

// Records reads the JSON records a child printed as lines of their own
// among its other output (lines starting with "{").
func Records[T any](out []byte) ([]T, error) {
	var recs []T
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var r T
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return recs, fmt.Errorf("record %q: %w", l, err)
		}
		recs = append(recs, r)
	}
	return recs, sc.Err()
}
