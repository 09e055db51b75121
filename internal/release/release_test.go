package release

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// Store leaves the value at the address, whatever was there.
func TestStoreStores(t *testing.T) {
	var w uint64 = 7
	for _, v := range []uint64{0, 1, 1 << 63, ^uint64(0)} {
		Store(&w, v)
		if got := atomic.LoadUint64(&w); got != v {
			t.Fatalf("Store(%#x): loaded %#x", v, got)
		}
	}
}

// waitFor spins until *p is v, yielding now and then (two cores, shared).
func waitFor(p *uint64, v uint64) {
	for n := 1; atomic.LoadUint64(p) != v; n++ {
		if n%256 == 0 {
			runtime.Gosched()
		}
	}
}

// A word published with Store hands the data written before it to a
// reader that loads the word atomically: every payload read after the
// word is the one written before it. Under -race this is also the check
// that the race build's Store is one the detector sees (a plain store
// there would be reported as a race on payload).
func TestStorePublishesWhatCameBefore(t *testing.T) {
	const rounds = 5000
	var payload [4]uint64 // plain memory, written only before the word
	var word, ack uint64
	done := make(chan error, 1)
	go func() {
		for i := uint64(1); i <= rounds; i++ {
			waitFor(&word, i)
			for j, p := range payload {
				if p != i*uint64(j+1) {
					done <- fmt.Errorf("round %d: payload[%d] = %d, want %d", i, j, p, i*uint64(j+1))
					Store(&ack, i) // let the writer go on to see the error
					return
				}
			}
			Store(&ack, i)
		}
		done <- nil
	}()
	for i := uint64(1); i <= rounds; i++ {
		for j := range payload {
			payload[j] = i * uint64(j+1)
		}
		Store(&word, i)
		waitFor(&ack, i)
		if i == rounds {
			break // the reader's nil is waited for below
		}
		select {
		case err := <-done:
			t.Fatal(err) // the reader only stops early on a mismatch
		default:
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
