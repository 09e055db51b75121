package acp_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/dimmnet/dimmnet/driver/acp"
)

// conformance is the paper's section 7 program: it uses every function
// and checks every result, the same way in-process and between processes.
// Three ranks or more: rank 0 starts third-party operations between 1 and 2.
func conformance(c *acp.ACP) error {
	me, n := c.Rank(), c.Procs()
	if n < 3 {
		return fmt.Errorf("want 3 ranks, have %d", n)
	}
	if c.Colors() != 1 || c.QueryRank(acp.GANull) != -1 || c.QueryColor(acp.GANull) != -1 {
		return fmt.Errorf("colors %d, null rank %d", c.Colors(), c.QueryRank(acp.GANull))
	}
	// The starter memory of every rank: rank r's holds a pattern.
	st := c.StarterGA(me)
	if c.QueryRank(st) != me || c.StarterGA(n) != acp.GANull {
		return fmt.Errorf("starter GA %#x rank %d", uint64(st), c.QueryRank(st))
	}
	sm, err := c.QueryAddress(st)
	if err != nil {
		return err
	}
	for i := range 4096 {
		sm[i] = byte(me*37 + i)
	}
	// Registered memory: two adjacent buffers merge.
	buf, err := c.Malloc(8192)
	if err != nil {
		return err
	}
	k1, err := c.RegisterMemory(buf[:4096], 0)
	if err != nil {
		return err
	}
	k2, err := c.RegisterMemory(buf[4096:], 0)
	if err != nil {
		return err
	}
	if k1 != k2 || c.Merges() != 1 {
		return fmt.Errorf("adjacent registrations: keys %#x %#x, merges %d", k1, k2, c.Merges())
	}
	ga, err := c.QueryGA(k1, buf[100:])
	if err != nil {
		return err
	}
	if b, err := c.QueryAddress(ga); err != nil || &b[0] != &buf[100] {
		return fmt.Errorf("query address of %#x: %v", uint64(ga), err)
	}
	if err := c.Sync(); err != nil {
		return err
	}

	next := (me + 1) % n
	// Copy in from the next rank's starter memory into ours (PULL), and
	// out to the next rank's starter memory at 8192 (PUSH).
	h1, err := c.Copy(ga, c.StarterGA(next), 4096, acp.HandleNull)
	if err != nil {
		return err
	}
	h2, err := c.Copy(c.StarterGA(next)+8192, st, 4096, acp.HandleNull)
	if err != nil {
		return err
	}
	if err := c.Complete(h2); err != nil {
		return err
	}
	if done, err := c.Inquire(h1); !done || err != nil {
		return fmt.Errorf("inquire %d after completing %d: %v %v", h1, h2, done, err)
	}
	if err := checkPattern(buf[100:100+4096], next); err != nil {
		return fmt.Errorf("copy in: %w", err)
	}
	if err := c.Sync(); err != nil {
		return err
	}
	prev := (me + n - 1) % n
	if err := checkPattern(sm[8192:8192+4096], prev); err != nil {
		return fmt.Errorf("copy out by rank %d: %w", prev, err)
	}
	// Misaligned: 13 bytes from the next rank's starter memory at 3 into
	// ours at 16385 (the bounce path), and back out to it at 20001.
	h, err := c.Copy(st+16385, c.StarterGA(next)+3, 13, acp.HandleNull)
	if err != nil {
		return err
	}
	if _, err = c.Copy(c.StarterGA(next)+20001, st+16385, 13, h); err != nil {
		return err
	}
	if err := c.Complete(acp.HandleAll); err != nil {
		return err
	}
	if !bytes.Equal(sm[16385:16385+13], patternOf(next)[3:16]) {
		return fmt.Errorf("misaligned copy in: %x", sm[16385:16385+13])
	}
	if err := c.Sync(); err != nil {
		return err
	}
	if !bytes.Equal(sm[20001:20001+13], patternOf(me)[3:16]) {
		return fmt.Errorf("misaligned copy out by rank %d: %x", prev, sm[20001:20001+13])
	}
	if err := c.Sync(); err != nil {
		return err
	}

	// Third party: rank 0 copies rank 1's starter memory into rank 2's at 32768.
	if me == 0 {
		h, err := c.Copy(c.StarterGA(2)+32768, c.StarterGA(1), 1024, acp.HandleNull)
		if err != nil {
			return err
		}
		if err := c.Complete(h); err != nil {
			return err
		}
	}
	if err := c.Sync(); err != nil {
		return err
	}
	if me == 2 {
		if err := checkPattern(sm[32768:32768+1024], 1); err != nil {
			return fmt.Errorf("third-party copy: %w", err)
		}
	}

	// Atomics on rank 0's counter at starter offset 40960: every rank adds
	// its rank+1 with Add8 (old value to its own memory), then ranks do
	// one CAS8 each from the total.
	counter := c.StarterGA(0) + 40960
	res := st + 49152
	if _, err := c.Add8(res, counter, uint64(me+1), acp.HandleNull); err != nil {
		return err
	}
	if err := c.Complete(acp.HandleAll); err != nil {
		return err
	}
	if err := c.Sync(); err != nil {
		return err
	}
	total := uint64(n * (n + 1) / 2)
	if me == 0 {
		if v, _ := word(c, counter); v != total {
			return fmt.Errorf("counter after Add8s: %d, want %d", v, total)
		}
	}
	if err := c.Sync(); err != nil { // rank 0 has read it before anyone's CAS
		return err
	}
	h, err = c.CAS8(res, counter, total, total+100, acp.HandleNull)
	if err != nil {
		return err
	}
	if err := c.Complete(h); err != nil {
		return err
	}
	old, _ := word(c, res)
	if old != total && old != total+100 {
		return fmt.Errorf("CAS8 old %d", old)
	}
	if err := c.Sync(); err != nil {
		return err
	}
	// The paper's Fig. 2 and every 4-byte operation:
	// rank 0 runs Swap4 on rank 2's word, the old value going to rank 1.
	w4 := c.StarterGA(2) + 45056
	if me == 2 {
		binary.LittleEndian.PutUint32(sm[45056:], 0xf0f0)
	}
	if err := c.Sync(); err != nil {
		return err
	}
	if me == 0 {
		if h, err = c.Swap4(c.StarterGA(1)+45060, w4, 0x1234, acp.HandleNull); err != nil {
			return err
		}
		if _, err = c.Or4(st+45064, w4, 0x10000, h); err != nil {
			return err
		}
		if _, err = c.And4(st+45068, w4, 0x1ffff, acp.HandleCont); err != nil {
			return err
		}
		if _, err = c.Xor4(st+45072, w4, 0xff, acp.HandleCont); err != nil {
			return err
		}
		if _, err = c.Add4(st+45076, w4, 1, acp.HandleCont); err != nil {
			return err
		}
		if _, err = c.CAS4(st+45080, w4, 0x112cc, 7, acp.HandleCont); err != nil {
			return err
		}
		if err := c.Complete(acp.HandleAll); err != nil {
			return err
		}
		// 0xf0f0 -swap-> 0x1234 -or-> 0x11234 -and-> 0x11234 -xor-> 0x112cb -add-> 0x112cc -cas-> 7
		for i, want := range []uint32{0x1234, 0x11234, 0x11234, 0x112cb, 0x112cc} {
			if v, _ := word4(c, st+45064+acp.GA(4*i)); v != want {
				return fmt.Errorf("4-byte op %d returned %#x, want %#x", i, v, want)
			}
		}
	}
	if err := c.Sync(); err != nil {
		return err
	}
	if me == 1 {
		if v, _ := word4(c, st+45060); v != 0xf0f0 {
			return fmt.Errorf("Fig. 2's third-rank result %#x", v)
		}
	}
	if me == 2 {
		if v, _ := word4(c, w4); v != 7 {
			return fmt.Errorf("4-byte word after the chain: %#x", v)
		}
	}
	// Swap8, And8, Or8, Xor8 on the next rank's word.
	w8 := c.StarterGA(next) + 53248
	for i, f := range []func() (acp.Handle, error){
		func() (acp.Handle, error) { return c.Swap8(st+57344, w8, 0xff00ff00ff00, acp.HandleNull) },
		func() (acp.Handle, error) { return c.And8(st+57352, w8, 0xffff0000ffff, acp.HandleCont) },
		func() (acp.Handle, error) { return c.Or8(st+57360, w8, 1, acp.HandleCont) },
		func() (acp.Handle, error) { return c.Xor8(st+57368, w8, 3, acp.HandleCont) },
	} {
		if _, err := f(); err != nil {
			return fmt.Errorf("8-byte op %d: %w", i, err)
		}
	}
	if err := c.Complete(acp.HandleAll); err != nil {
		return err
	}
	for i, want := range []uint64{0, 0xff00ff00ff00, 0xff000000ff00, 0xff000000ff01} {
		if v, _ := word(c, st+57344+acp.GA(8*i)); v != want {
			return fmt.Errorf("8-byte op %d returned %#x, want %#x", i, v, want)
		}
	}
	if err := c.Sync(); err != nil {
		return err
	}
	if v, _ := word(c, st+53248); v != 0xff000000ff02 {
		return fmt.Errorf("8-byte word after the chain: %#x", v)
	}
	if err := c.UnregisterMemory(k1); err != nil {
		return err
	}
	if _, err := c.QueryGA(k1, buf); err != nil {
		return fmt.Errorf("a merged registration went after one of its two unregistrations: %w", err)
	}
	if err := c.UnregisterMemory(k2); err != nil {
		return err
	}
	if err := c.UnregisterMemory(k1); !errors.Is(err, acp.ErrKey) {
		return fmt.Errorf("a third unregistration of two registrations: %v", err)
	}
	if _, err := c.QueryGA(k1, buf); !errors.Is(err, acp.ErrKey) {
		return fmt.Errorf("query ga after the last unregistration: %v", err)
	}
	if err := c.Sync(); err != nil {
		return err
	}
	// Every write to this rank's starter memory is done: its digest is
	// the program's result, compared across transports. Only the CAS8
	// race's old value depends on which rank won; it is left out.
	mem := slices.Clone(sm)
	clear(mem[res-st : res-st+8])
	results.Store(me, sha256.Sum256(mem))
	return nil
}

// results holds each rank's conformance digest of this process (a rank
// process has one; in-process runs have every rank's).
var results sync.Map // rank -> [32]byte

func patternOf(seed int) []byte {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(seed*37 + i)
	}
	return b
}

func checkPattern(b []byte, seed int) error {
	want := patternOf(seed)[:len(b)]
	if !bytes.Equal(b, want) {
		i := 0
		for i < len(b) && b[i] == want[i] {
			i++
		}
		return fmt.Errorf("byte %d of %d differs (seed %d)", i, len(b), seed)
	}
	return nil
}
