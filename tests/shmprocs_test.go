package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/uapi"
	"github.com/dimmnet/dimmnet/vdev"
)

// Processes on the shared-memory link: each test process and its children
// embed a device each, on link.ListenShm in one rendezvous directory.

const (
	shmRecvArea = 0       // where messages land in a node's link memory
	shmSendArea = 8 << 20 // where a node builds what it sends
	shmEnd      = ^uint64(0)
)

func init() {
	subproc.Register("shm-node", shmNodeMain)
}

func TestMain(m *testing.M) {
	subproc.Main()
	os.Exit(m.Run())
}

// shmDevice is a device on the shared-memory medium with its engine and a
// driver on it (run to completion), as one process of a job has.
type shmDevice struct {
	local *vdev.Local // nil when drv is attached to a daemon's device
	drv   *driver.Driver
	mail  []shmMail // messages that arrived while we waited for a completion
	// waitNs bounds one wait for a status (0: the package's waitNs). A
	// soak bounds its whole run instead, so one wait may take as long.
	waitNs int64
}

// wait waits for the next status within the device's bound.
func (s *shmDevice) wait() (uapi.Status, error) {
	ns := s.waitNs
	if ns == 0 {
		ns = waitNs
	}
	return s.drv.Wait(ns)
}

// shmMail is a message received and copied out of link memory.
type shmMail struct {
	msg  []byte
	from uint16
}

func openShmDevice(dir string, node uint16) (*shmDevice, error) {
	l, err := vdev.NewLocalShm(vdev.Config{}, dir, 0, node)
	if err != nil {
		return nil, err
	}
	drv, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
	if err != nil {
		l.Close()
		return nil, err
	}
	return &shmDevice{local: l, drv: drv}, nil
}

func (s *shmDevice) Close() {
	s.drv.Close()
	s.local.Close()
}

// shmMessage fills buf with message number no: its number, then bytes
// that depend on it and on their position, so a receiver can check every
// byte without being told what to expect.
func shmMessage(buf []byte, no uint64) {
	binary.LittleEndian.PutUint64(buf, no)
	for i := 8; i < len(buf); i++ {
		buf[i] = byte(uint64(i)*131 + no*7)
	}
}

// shmCheck verifies a message filled by shmMessage and returns its number.
func shmCheck(buf []byte) (uint64, error) {
	if len(buf) < 8 {
		return 0, fmt.Errorf("message of %d bytes", len(buf))
	}
	no := binary.LittleEndian.Uint64(buf)
	for i := 8; i < len(buf); i++ {
		if want := byte(uint64(i)*131 + no*7); buf[i] != want {
			return no, fmt.Errorf("message %d of %d bytes: byte %d is %#x, want %#x", no, len(buf), i, buf[i], want)
		}
	}
	return no, nil
}

// recvMessage returns the next message (copied out of link memory) and its
// sender: one that arrived earlier, or the next PUSH. Completions of our
// own PUSHes are skipped.
func (s *shmDevice) recvMessage() ([]byte, uint16, error) {
	if len(s.mail) > 0 {
		m := s.mail[0]
		s.mail = s.mail[1:]
		return m.msg, m.from, nil
	}
	for {
		st, err := s.wait()
		if err != nil {
			return nil, 0, err
		}
		switch st.Type {
		case uapi.StPUSH:
			return s.copyOut(st), st.SrcNode, nil
		case uapi.StDone:
		default:
			return nil, 0, fmt.Errorf("node %d: unexpected status %v", s.drv.Node(), st)
		}
	}
}

func (s *shmDevice) copyOut(st uapi.Status) []byte {
	buf := make([]byte, st.Length)
	s.drv.CopyOut(buf, st.Addr)
	return buf
}

// sendMessage PUSHes msg to node dst's receive area and waits for its
// DONE, keeping what arrives meanwhile (another peer's message may well
// come first: there is no order between peers). The senders in these
// tests wait for a message to come back before sending the next, so the
// receive area is never overwritten before it is copied out.
func (s *shmDevice) sendMessage(dst uint16, msg []byte) error {
	d := s.drv
	d.CopyIn(shmSendArea, msg)
	idx, err := d.Push(dst, shmSendArea, shmRecvArea, uint32(len(msg)), uapi.FlagSignal, 0)
	if err != nil {
		return err
	}
	for {
		st, err := s.wait()
		if err != nil {
			return err
		}
		switch {
		case st.Type == uapi.StDone && st.End == idx:
			return nil
		case st.Type == uapi.StError && st.End == idx:
			return fmt.Errorf("PUSH %d bytes to node %d: %w", len(msg), dst, st.Err)
		case st.Type == uapi.StPUSH:
			s.mail = append(s.mail, shmMail{s.copyOut(st), st.SrcNode})
		}
	}
}

// shmNodeMain is a child process: node args[1] in directory args[0]. It
// says "ready", then checks every message it receives and sends it on, to
// args[2] ("back": to its sender), until the end message, which it passes
// on too.
func shmNodeMain(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("want DIR NODE NEXT, got %q", args)
	}
	node, _ := strconv.Atoi(args[1])
	s, err := openShmDevice(args[0], uint16(node))
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Println("ready")
	for {
		msg, from, err := s.recvMessage()
		if err != nil {
			return err
		}
		no, err := shmCheck(msg)
		if err != nil {
			return fmt.Errorf("node %d from %d: %w", node, from, err)
		}
		next := from
		if args[2] != "back" {
			n, _ := strconv.Atoi(args[2])
			next = uint16(n)
		}
		if err := s.sendMessage(next, msg); err != nil {
			return err
		}
		if no == shmEnd {
			return nil
		}
	}
}

// startShmNode starts a child process as node on dir that sends what it
// receives to next ("back" for its sender) and waits until it is ready.
func startShmNode(t *testing.T, dir string, node int, next string) *exec.Cmd {
	t.Helper()
	c, err := subproc.Command("shm-node", dir, strconv.Itoa(node), next)
	if err != nil {
		t.Fatal(err)
	}
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("node %d did not get ready: %q %v", node, line, err)
	}
	go io.Copy(io.Discard, out)
	return c
}

var shmSizes = []int{8, 100, 4096, 65536 + 3, 1 << 20}

// roundTrips sends n messages of every size from s into the ring that
// starts at first and checks each one as it comes back.
func roundTrips(t *testing.T, s *shmDevice, first uint16, n int, no *uint64) {
	t.Helper()
	for i := 0; i < n; i++ {
		for _, size := range shmSizes {
			*no++
			msg := make([]byte, size)
			shmMessage(msg, *no)
			if err := s.sendMessage(first, msg); err != nil {
				t.Fatal(err)
			}
			got, _, err := s.recvMessage()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, msg) {
				gno, cerr := shmCheck(got)
				t.Fatalf("message %d (%d bytes) came back as %d bytes, number %d: %v", *no, size, len(got), gno, cerr)
			}
		}
	}
}

func endRing(t *testing.T, s *shmDevice, first uint16, children ...*exec.Cmd) {
	t.Helper()
	end := make([]byte, 8)
	shmMessage(end, shmEnd)
	if err := s.sendMessage(first, end); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.recvMessage(); err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		if err := c.Wait(); err != nil {
			t.Fatalf("child %v: %v", c.Args, err)
		}
	}
}

// Two processes exchange verified bytes of every size, 8 B to 1 MiB.
func TestShmTwoProcesses(t *testing.T) {
	dir := t.TempDir()
	s, err := openShmDevice(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	child := startShmNode(t, dir, 2, "back")
	var no uint64
	roundTrips(t, s, 2, 20, &no)
	endRing(t, s, 2, child)
	if r := s.drv.Counter(uapi.CtrRetransmits); r != 0 {
		t.Logf("retransmits on a lossless link: %d (a stalled peer process)", r)
	}
}

// Four processes pass each message around a ring (1 -> 2 -> 3 -> 4 -> 1),
// every hop checking every byte.
func TestShmFourProcesses(t *testing.T) {
	dir := t.TempDir()
	s, err := openShmDevice(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c2 := startShmNode(t, dir, 2, "3")
	c3 := startShmNode(t, dir, 3, "4")
	c4 := startShmNode(t, dir, 4, "1")
	var no uint64
	roundTrips(t, s, 2, 5, &no)
	endRing(t, s, 2, c2, c3, c4)
}

// A process killed in the middle of a transfer: the commands for it fail
// with UNREACHABLE at once (its connection ends, not 30 timeouts later),
// and the other peers go on as before.
func TestShmPeerKilled(t *testing.T) {
	dir := t.TempDir()
	s, err := openShmDevice(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c2 := startShmNode(t, dir, 2, "back")
	c3 := startShmNode(t, dir, 3, "back")
	var no uint64
	roundTrips(t, s, 2, 1, &no)
	roundTrips(t, s, 3, 1, &no)

	// Stream to node 3 and kill it while the stream is in flight.
	d := s.drv
	timeouts := d.Counter(uapi.CtrTimeouts)
	const n = 64
	var idx []uint64
	for i := 0; i < n; i++ {
		x, err := d.Push(3, shmSendArea, shmRecvArea+uint64(i%4)<<20, 1<<20, uapi.FlagSignal, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		idx = append(idx, x)
		if i == 8 {
			c3.Process.Kill()
		}
	}
	unreachable := 0
	for range idx {
		st, err := d.Wait(waitNs)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case st.Type == uapi.StError && errors.Is(st.Err, uapi.EUnreachable):
			unreachable++
		case st.Type == uapi.StDone:
		case st.Type == uapi.StPUSH: // node 3's echo of an earlier message cannot be: it was consumed
			t.Fatalf("unexpected message %v", st)
		default:
			t.Fatalf("PUSH to a killed peer: %v", st)
		}
	}
	if unreachable == 0 {
		t.Fatal("no PUSH to the killed process failed UNREACHABLE")
	}
	if got := d.Counter(uapi.CtrTimeouts) - timeouts; got >= 30 {
		t.Fatalf("the kill was found by %d timeouts, not by the link", got)
	}
	t.Logf("%d of %d PUSHes failed UNREACHABLE after the kill; %d timeouts", unreachable, n, d.Counter(uapi.CtrTimeouts)-timeouts)
	// The other peer is untouched.
	roundTrips(t, s, 2, 2, &no)
	endRing(t, s, 2, c2)
}
