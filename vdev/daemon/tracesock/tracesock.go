// Package tracesock serves a daemon's live device trace on a Unix socket
// beside the device's ivshmem socket (DIR/node<K>.trace), and reads it.
// The ivshmem protocol is one-way (the server only sends set-up messages
// and fds), so a trace needs a socket of its own.
//
// The stream is one JSON record per line. A client may first send one
// line, "frames", to also get each frame's bytes (for a capture); the
// server waits briefly for it. A client that reads too slowly never slows
// the device: the device drops its events and counts them, and the server
// says so in the stream (kind "DROPPED") once the client catches up.
package tracesock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dimmnet/dimmnet/internal/provenance"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/link/capture"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// Record is one line of the stream.
type Record struct {
	Time  int64  `json:"t"` // CLOCK_MONOTONIC ns on the daemon's host
	Node  uint16 `json:"node"`
	Kind  string `json:"kind"` // CMD, STATUS, DOORBELL, IRQ, TX, RX, VIOLATION, DROPPED
	Text  string `json:"text"` // the decoded line, as `dimmnet trace` prints it
	Frame []byte `json:"frame,omitempty"`
}

// watchBuf is how many events a client may fall behind before the device
// drops its events.
const watchBuf = 8192

// Server is one device's trace socket.
type Server struct {
	ln   *net.UnixListener
	dev  *vdev.Device
	log  *slog.Logger
	wg   sync.WaitGroup
	mu   sync.Mutex
	conn map[net.Conn]bool
}

// Listen serves dev's trace at path with mode (and group gid, when > 0),
// as the daemon's ivshmem sockets: the trace shows every command and frame
// of the device. A stale socket of ours is replaced; anything else at the
// path is left alone and refused.
func Listen(path string, mode os.FileMode, gid int, dev *vdev.Device, log *slog.Logger) (*Server, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("trace socket %s: %w (mode %o, uid %d)", path, ErrNotOurs, st.Mode, st.Uid)
		}
		if err := os.Remove(path); err != nil { // the daemon's directory lock is held: nobody serves it
			return nil, fmt.Errorf("trace socket %s: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("trace socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(true)
	if gid > 0 {
		if err := os.Lchown(path, -1, gid); err != nil {
			ln.Close()
			return nil, fmt.Errorf("trace socket %s: %w", path, err)
		}
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, fmt.Errorf("trace socket %s: %w", path, err)
	}
	s := &Server{ln: ln, dev: dev, log: log, conn: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// ErrNotOurs means something other than our own socket is at the path.
var ErrNotOurs = errors.New("tracesock: not our socket")

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conn[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c)
			s.mu.Lock()
			delete(s.conn, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// serve streams the trace to one client until it goes away.
func (s *Server) serve(c net.Conn) {
	frames := false
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && strings.TrimSpace(line) == "frames" {
		frames = true
	}
	c.SetReadDeadline(time.Time{})
	w := s.dev.Watch(watchBuf, frames)
	defer w.Stop()
	go func() { // the client closing its end ends the stream
		io.Copy(io.Discard, c)
		w.Stop()
	}()
	bw := bufio.NewWriter(c)
	enc := json.NewEncoder(bw)
	var told uint64
	tick := time.NewTicker(50 * time.Millisecond) // flushes a quiet stream's last lines
	defer tick.Stop()
	for {
		var e vdev.Event
		var ok bool
		select {
		case e, ok = <-w.C:
		case <-tick.C:
			if bw.Flush() != nil {
				return
			}
			continue
		}
		if !ok {
			return
		}
		if d := w.Dropped(); d != told {
			if enc.Encode(Record{Time: e.Time, Node: e.Node, Kind: "DROPPED",
				Text: fmt.Sprintf("%d events dropped: the reader was slower than the device", d-told)}) != nil {
				return
			}
			told = d
		}
		if enc.Encode(Record{Time: e.Time, Node: e.Node, Kind: e.Kind.String(), Text: e.String(), Frame: e.Frame}) != nil {
			return
		}
		if len(w.C) == 0 && bw.Flush() != nil {
			return
		}
	}
}

// Close stops serving and ends every client's stream.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conn {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

// ErrNoTrace means the path names no trace socket.
var ErrNoTrace = errors.New("tracesock: no trace socket there")

// Path is the trace socket beside an ivshmem socket DIR/node<K>.sock, or
// the path itself when it already names one.
func Path(sock string) string {
	if base, ok := strings.CutSuffix(sock, ".sock"); ok {
		return base + ".trace"
	}
	return sock
}

// Dial connects to a trace socket; frames asks for each frame's bytes.
// Records are read with Next until the daemon goes away.
func Dial(path string, frames bool) (*Reader, error) {
	c, err := net.Dial("unix", path)
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w (%w)", path, err, ErrNoTrace)
	}
	req := "text\n"
	if frames {
		req = "frames\n"
	}
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return &Reader{c: c, dec: json.NewDecoder(bufio.NewReader(c))}, nil
}

// Reader reads a trace stream.
type Reader struct {
	c   net.Conn
	dec *json.Decoder
}

// Next returns the next record; io.EOF when the daemon closed the stream.
func (r *Reader) Next() (Record, error) {
	var rec Record
	err := r.dec.Decode(&rec)
	return rec, err
}

// Close ends the stream.
func (r *Reader) Close() error { return r.c.Close() }

// FollowOptions is what dimmnet trace asks of Follow.
type FollowOptions struct {
	JSON     bool   // JSON lines instead of decoded text
	PcapFile string // also write every frame to this pcap file
	Count    int    // stop after this many records (0: until SIGINT, SIGTERM or the daemon stops)
}

// Follow streams the live trace of the device whose ivshmem socket is sock
// to w, one decoded line (or JSON record) each, until o.Count records,
// SIGINT or SIGTERM, or the daemon's end.
func Follow(sock string, o FollowOptions, w io.Writer) error {
	r, err := Dial(Path(sock), o.PcapFile != "")
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); r.Close() }()
	var cw *capture.Writer
	if o.PcapFile != "" {
		f, err := os.Create(o.PcapFile)
		if err != nil {
			return err
		}
		if cw, err = capture.NewWriter(f, 65536+wire.FrameOverhead); err != nil {
			f.Close()
			return err
		}
		defer func() {
			cw.Close()
			fmt.Fprintf(os.Stderr, "trace: %d frames captured to %s\n", cw.Frames(), o.PcapFile)
		}()
	}
	out := provenance.NewEncoder(w)
	for n := 0; o.Count == 0 || n < o.Count; n++ {
		rec, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("trace: %w", err)
		}
		if cw != nil && rec.Frame != nil {
			cw.Record(rec.Frame)
		}
		rec.Frame = nil
		if o.JSON {
			if err := out.Encode(rec); err != nil {
				return err
			}
		} else {
			fmt.Fprintln(w, rec.Text)
		}
	}
	return nil
}
