//go:build dimmnet_ofi

package main

/*
#include "prov.h"
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
	"unsafe"
)

// Flags and errors of libfabric the Go side uses, as Go constants.
const (
	fMsg        = uint64(C.FI_MSG)
	fTagged     = uint64(C.FI_TAGGED)
	fSend       = uint64(C.FI_SEND)
	fRecv       = uint64(C.FI_RECV)
	fRead       = uint64(C.FI_READ)
	fWrite      = uint64(C.FI_WRITE)
	fRemRead    = uint64(C.FI_REMOTE_READ)
	fRemWrite   = uint64(C.FI_REMOTE_WRITE)
	fRMA        = uint64(C.FI_RMA)
	fAtomic     = uint64(C.FI_ATOMIC)
	fCQData     = uint64(C.FI_REMOTE_CQ_DATA)
	fInject     = uint64(C.FI_INJECT)
	fPeek       = uint64(C.FI_PEEK)
	fClaim      = uint64(C.FI_CLAIM)
	fDiscard    = uint64(C.FI_DISCARD)
	fCompletion = uint64(C.FI_COMPLETION)
	fSelective  = uint64(C.FI_SELECTIVE_COMPLETION)
	fDirected   = uint64(C.FI_DIRECTED_RECV)
	fTransmit   = uint64(C.FI_TRANSMIT)
	fMultiRecv  = uint64(C.FI_MULTI_RECV)

	dnDefault    = uint64(C.DN_DEFAULT)
	dnInjectCall = uint64(C.DN_INJECT_CALL)
	injectCall   = fInject | dnInjectCall // the flags an inject call passes

	addrUnspec = ^uint64(0) // FI_ADDR_UNSPEC
	notAvail   = ^uint64(0) // FI_ADDR_NOTAVAIL
	addrLen    = C.DN_ADDRLEN
	injectMax  = C.DN_INJECT
	maxMsg     = C.DN_MAX_MSG

	eAgain     = -C.FI_EAGAIN
	eAvail     = -C.FI_EAVAIL
	eInval     = -C.FI_EINVAL
	eNoSys     = -C.FI_ENOSYS
	eMsgSize   = -C.FI_EMSGSIZE
	eNoEnt     = -C.FI_ENOENT
	eOpNotSup  = -C.FI_EOPNOTSUPP
	errTrunc   = C.FI_ETRUNC
	errCancel  = C.FI_ECANCELED
	errNoMsg   = C.FI_ENOMSG
	errUnreach = C.FI_EHOSTUNREACH
	errIO      = C.FI_EIO
	errAddr    = C.FI_EADDRNOTAVAIL
	errRemote  = C.FI_EREMOTEIO
)

// debug logs the provider's decisions to stderr: FI_DIMMNET_DEBUG=1 (an
// outside library prints nothing into its host program's output unasked).
var debug = os.Getenv("FI_DIMMNET_DEBUG") >= "1"

// trace also logs every operation: FI_DIMMNET_DEBUG=2.
var trace = os.Getenv("FI_DIMMNET_DEBUG") == "2"

func logf(format string, args ...any) {
	if debug {
		fmt.Fprintf(os.Stderr, "dimmnet-fi (pid %d): %s\n", os.Getpid(), fmt.Sprintf(format, args...))
	}
}

// Address: the fixed 16 bytes fi_getname gives and fi_av_insert takes.
//
//	0..1  "DN"
//	2     version (addrVersion)
//	3     medium: 1 shm, 2 udp, 3 pci
//	4..5  node id (little endian)
//	6..7  udp port (big endian)
//	8..11 udp IPv4 address
//	12..15 shm: the network namespace's inode (low 32 bits)
const (
	// addrVersion moves with the protocol between endpoints (ep.go's
	// headers): a peer of another version is refused by fi_av_insert, as
	// it would misread our messages. 2: the short eager header.
	addrVersion = 2

	mediumShm = 1
	mediumUDP = 2
	mediumPCI = 3
)

// Errors an address is refused with, logged with FI_DIMMNET_DEBUG=1 and
// reported as FI_ADDR_NOTAVAIL in fi_av_insert's output.
var (
	errBadAddr     = errors.New("not a dimmnet address")
	errOtherVer    = errors.New("peer speaks another version of the provider's protocol (another build)")
	errOtherMedium = errors.New("peer is on another medium (FI_DIMMNET_LINK must match)")
	errOtherNetns  = errors.New("shm peer is in another network namespace: use FI_DIMMNET_LINK=udp")
	errCollision   = errors.New("node id collision: two addresses claim one node id")
	errNoNode      = errors.New("no free node id")
)

type address struct {
	raw    [addrLen]byte
	medium byte
	node   uint16
	port   uint16
	ip     [4]byte
	netns  uint32
}

func parseAddr(b []byte) (address, error) {
	var a address
	if len(b) != addrLen || b[0] != 'D' || b[1] != 'N' || b[3] < mediumShm || b[3] > mediumPCI {
		return a, errBadAddr
	}
	if b[2] != addrVersion {
		return a, fmt.Errorf("address version %d, ours %d: %w", b[2], addrVersion, errOtherVer)
	}
	copy(a.raw[:], b)
	a.medium = b[3]
	a.node = binary.LittleEndian.Uint16(b[4:])
	a.port = binary.BigEndian.Uint16(b[6:])
	copy(a.ip[:], b[8:12])
	a.netns = binary.LittleEndian.Uint32(b[12:])
	if a.node == 0 && a.medium != mediumPCI { // a daemon's devices start at node 0
		return a, errBadAddr
	}
	return a, nil
}

func makeAddr(medium byte, node uint16, udp *net.UDPAddr, netns uint32) [addrLen]byte {
	var b [addrLen]byte
	b[0], b[1], b[2], b[3] = 'D', 'N', addrVersion, medium
	binary.LittleEndian.PutUint16(b[4:], node)
	if udp != nil {
		binary.BigEndian.PutUint16(b[6:], uint16(udp.Port))
		copy(b[8:12], udp.IP.To4())
	}
	binary.LittleEndian.PutUint32(b[12:], netns)
	return b
}

func (a address) udpAddr() string {
	return fmt.Sprintf("%d.%d.%d.%d:%d", a.ip[0], a.ip[1], a.ip[2], a.ip[3], a.port)
}

// av is an address vector: FI_AV_MAP and FI_AV_TABLE alike hand out the
// index of the entry as the fi_addr_t.
type av struct {
	typ     int
	entries []avEntry
	byNode  map[uint16]uint64
	eps     []*endpoint // bound: told of inserts (udp admits the peer)
	users   int

	// the last node source found, and its fi_addr_t: every receive
	// completion asks, and a map lookup hashing the node was 0.03 µs of
	// an 8-byte message (BenchmarkInjectPingPong's profile); insert and
	// remove forget it
	lastNode uint16
	lastSrc  uint64
	lastOK   bool
}

type avEntry struct {
	address
	valid bool
}

func (a *av) insert(b []byte) (uint64, error) {
	ad, err := parseAddr(b)
	if err != nil {
		return notAvail, err
	}
	if fa, ok := a.byNode[ad.node]; ok {
		if a.entries[fa].raw != ad.raw {
			return notAvail, fmt.Errorf("node %d: %x and %x: %w", ad.node, a.entries[fa].raw, ad.raw, errCollision)
		}
	}
	for _, e := range a.eps {
		if err := e.admit(ad); err != nil {
			return notAvail, err
		}
	}
	fa := uint64(len(a.entries))
	if trace {
		logf("av insert node %d medium %d at %s as %d (%d endpoints bound)", ad.node, ad.medium, ad.udpAddr(), fa, len(a.eps))
	}
	a.entries = append(a.entries, avEntry{address: ad, valid: true})
	a.lastOK = false
	if _, ok := a.byNode[ad.node]; !ok {
		a.byNode[ad.node] = fa
	}
	return fa, nil
}

func (a *av) remove(fa uint64) error {
	if fa >= uint64(len(a.entries)) || !a.entries[fa].valid {
		return errBadAddr
	}
	a.entries[fa].valid = false
	a.lastOK = false
	if a.byNode[a.entries[fa].node] == fa {
		delete(a.byNode, a.entries[fa].node)
	}
	return nil
}

func (a *av) get(fa uint64) (avEntry, bool) {
	if a == nil || fa >= uint64(len(a.entries)) || !a.entries[fa].valid {
		return avEntry{}, false
	}
	return a.entries[fa], true
}

// source is the fi_addr_t of the peer on node, FI_ADDR_NOTAVAIL if it was
// never inserted.
func (a *av) source(node uint16) uint64 {
	if a == nil {
		return notAvail
	}
	if a.lastOK && a.lastNode == node {
		return a.lastSrc
	}
	if fa, ok := a.byNode[node]; ok {
		a.lastNode, a.lastSrc, a.lastOK = node, fa, true
		return fa
	}
	return notAvail
}

// cqEntry is one completion (or, with err set, one error entry).
type cqEntry struct {
	ctx     unsafe.Pointer
	flags   uint64
	len     int
	buf     unsafe.Pointer
	data    uint64
	tag     uint64
	src     uint64
	olen    int
	err     int
	provErr int
}

// cq is a completion queue: entries in completion order, errors apart
// (fi_cq_read answers -FI_EAVAIL while one waits).
type cq struct {
	entries []cqEntry // entries[head:] wait; the array is reused once all are read
	head    int
	errs    []cqEntry
	eps     []*endpoint // bound: reading progresses them
	w       waitObj     // FI_WAIT_FD (wait.go)
	// signalled: fi_cq_signal was called; a blocking read returns
	// -FI_EAGAIN (wait.go)
	signalled bool
}

func (q *cq) push(e cqEntry) {
	if trace {
		logf("completion ctx %p flags %#x len %d tag %#x err %d", e.ctx, e.flags, e.len, e.tag, e.err)
	}
	if q.w.armed {
		q.w.signal() // an entry no status brought (another thread's call)
	}
	if e.err != 0 {
		q.errs = append(q.errs, e)
		return
	}
	q.entries = append(q.entries, e)
}

func (q *cq) progress() bool {
	worked := false
	for _, e := range q.eps {
		worked = e.progress() || worked
	}
	return worked
}

// read takes up to n entries, progressing the bound endpoints first; with
// a timeout (ms, >= 0) it waits for one, sleeping on the device between
// looks.
func (q *cq) read(n int, timeoutMs int64, put func(int, *cqEntry)) (int, int) {
	q.progress()
	if timeoutMs >= 0 && len(q.entries) == 0 && len(q.errs) == 0 {
		deadline := deadlineAfter(timeoutMs)
		for len(q.entries) == 0 && len(q.errs) == 0 && !q.signalled && time.Now().Before(deadline) {
			mu.Unlock()
			if len(q.eps) > 0 {
				q.eps[0].sleep(time.Until(deadline))
			} else {
				time.Sleep(time.Millisecond)
			}
			mu.Lock()
			q.progress()
		}
	}
	if len(q.errs) > 0 {
		return 0, eAvail
	}
	if q.head == len(q.entries) {
		if timeoutMs >= 0 {
			q.signalled = false // the blocking read it woke
		}
		return 0, eAgain
	}
	k := min(n, len(q.entries)-q.head)
	for i := 0; i < k; i++ {
		put(i, &q.entries[q.head+i])
	}
	q.head += k
	if q.head == len(q.entries) {
		q.entries, q.head = q.entries[:0], 0
	}
	return k, 0
}

// foreverMs bounds a wait's timeout: fi_cq_sread's -1 (block) arrives as
// 1<<62 ms, which as a time.Duration overflowed into the past, so a
// blocking read returned -FI_EAGAIN at once (fabtests' cq_data and
// rdm_tagged_peek failed on it). About 34 years is forever enough.
const foreverMs = 1 << 40

// deadlineAfter is now plus ms milliseconds, at most foreverMs.
func deadlineAfter(ms int64) time.Time {
	return time.Now().Add(time.Duration(min(ms, foreverMs)) * time.Millisecond)
}

// cntr is a counter of completions and of errors.
type cntr struct {
	val, errs         uint64
	eps               []*endpoint
	w                 waitObj // FI_WAIT_FD (wait.go)
	seenVal, seenErrs uint64  // at the last fi_cntr_read: fi_trywait waits for a change
}

func (c *cntr) progress() {
	for _, e := range c.eps {
		e.progress()
	}
}

func (c *cntr) wait(threshold uint64, timeoutMs int64) int {
	deadline := deadlineAfter(timeoutMs)
	for {
		c.progress()
		if c.val >= threshold {
			return 0
		}
		if c.errs > 0 {
			return eAvail
		}
		if timeoutMs >= 0 && !time.Now().Before(deadline) {
			return -C.FI_ETIMEDOUT
		}
		mu.Unlock()
		if len(c.eps) > 0 {
			c.eps[0].sleep(time.Millisecond)
		}
		mu.Lock()
	}
}

func provErrString(e int) string {
	return fmt.Sprintf("dimmnet device error %d", e)
}
