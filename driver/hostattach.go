package driver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dimmnet/dimmnet/internal/eventfd"
	"golang.org/x/sys/unix"
)

// ErrRefused reports a server that refused us (a protocol version other than 0).
var ErrRefused = errors.New("driver: ivshmem server refused the connection")

// hostTransport is a host process attached to a device over the ivshmem
// server protocol: the region comes as the shm fd, the doorbell is peer 0's
// eventfd (the device), the interrupt our own vector 0.
type hostTransport struct {
	conn     *net.UnixConn
	id       int64
	mem      []byte
	doorbell int         // peer 0, vector 0
	irq      *eventfd.FD // our vector 0
	gone     atomic.Bool // the server said peer 0 left, or hung up
	mu       sync.Mutex
	extra    []int // fds we were sent and keep only to close
	done     chan struct{}
}

// Dial attaches to the device served on an ivshmem server socket. The rest
// of the driver is unchanged: Open(Dial(path)).
func Dial(path string) (Attachment, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("attach %s: %w", path, err)
	}
	t := &hostTransport{conn: c, doorbell: -1, done: make(chan struct{})}
	if err := t.setup(path); err != nil {
		c.Close()
		t.closeAll()
		return nil, err
	}
	go t.watch()
	return t, nil
}

// recv reads one message: a little-endian int64 and at most one fd.
func recv(c *net.UnixConn) (int64, int, error) {
	var b [8]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.ReadMsgUnix(b[:], oob)
	if err != nil {
		return 0, -1, err
	}
	if n != 8 {
		return 0, -1, fmt.Errorf("short message of %d bytes", n)
	}
	fd := -1
	if oobn > 0 {
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err == nil {
			for _, m := range msgs {
				fds, err := unix.ParseUnixRights(&m)
				if err != nil {
					continue
				}
				for _, f := range fds {
					if fd < 0 {
						fd = f
					} else {
						unix.Close(f) // at most one fd per message
					}
				}
			}
		}
	}
	return int64(binary.LittleEndian.Uint64(b[:])), fd, nil
}

func (t *hostTransport) setup(path string) error {
	t.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer t.conn.SetReadDeadline(time.Time{})
	v, fd, err := recv(t.conn)
	if err != nil {
		return fmt.Errorf("attach %s: read version: %w", path, err)
	}
	if fd >= 0 {
		unix.Close(fd)
	}
	if v != 0 {
		return fmt.Errorf("attach %s: server sent version %d: %w", path, v, ErrRefused)
	}
	if t.id, fd, err = recv(t.conn); err != nil || t.id < 0 {
		return fmt.Errorf("attach %s: read own id %d: %w", path, t.id, err)
	}
	if fd >= 0 {
		unix.Close(fd) // the id message carries no fd
	}
	shmFD := -1
	for shmFD < 0 || t.irq == nil {
		m, fd, err := recv(t.conn)
		if err != nil {
			return fmt.Errorf("attach %s: set-up: %w", path, err)
		}
		switch {
		case m == -1 && fd >= 0 && shmFD < 0:
			shmFD = fd
		case m == 0 && fd >= 0 && t.doorbell < 0:
			t.doorbell = fd // the device's vector 0
		case m == t.id && fd >= 0 && t.irq == nil:
			if t.irq, err = eventfd.FromFD(fd); err != nil {
				return fmt.Errorf("attach %s: %w", path, err)
			}
		case fd >= 0:
			t.extra = append(t.extra, fd) // other peers' or further vectors: not ours to use
		}
	}
	if t.doorbell < 0 {
		unix.Close(shmFD)
		return fmt.Errorf("attach %s: the server offered no device eventfd (peer 0)", path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(shmFD, &st); err != nil {
		unix.Close(shmFD)
		return fmt.Errorf("attach %s: stat shared memory: %w", path, err)
	}
	mem, err := unix.Mmap(shmFD, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(shmFD) // the mapping keeps the memory
	if err != nil {
		return fmt.Errorf("attach %s: mmap %d bytes: %w", path, st.Size, err)
	}
	t.mem = mem
	return nil
}

// watch follows the server after set-up: peers come and go; peer 0
// leaving (or the socket closing) means the device is gone.
func (t *hostTransport) watch() {
	defer close(t.done)
	for {
		m, fd, err := recv(t.conn)
		if err != nil {
			t.gone.Store(true)
			if t.irq != nil {
				eventfd.Signal(t.irq.Int()) // wake a sleeping waiter to notice
			}
			return
		}
		if fd >= 0 {
			unix.Close(fd) // another peer's (or a further) vector: never used here
			continue
		}
		if m == 0 {
			t.gone.Store(true)
			eventfd.Signal(t.irq.Int())
		}
	}
}

func (t *hostTransport) Region() []byte { return t.mem }

func (t *hostTransport) Kick() error {
	if t.gone.Load() {
		return ErrDeviceStopped
	}
	if err := eventfd.Signal(t.doorbell); err != nil {
		return fmt.Errorf("ring doorbell: %w", err)
	}
	return nil
}

func (t *hostTransport) WaitIRQ(timeoutMs int) error {
	if t.gone.Load() {
		return ErrDeviceStopped
	}
	if _, err := t.irq.Wait(time.Duration(timeoutMs) * time.Millisecond); err != nil {
		return err
	}
	if t.gone.Load() {
		return ErrDeviceStopped
	}
	return nil
}

// closeAll releases everything but the connection.
func (t *hostTransport) closeAll() error {
	var errs []error
	if t.mem != nil {
		errs = append(errs, unix.Munmap(t.mem))
		t.mem = nil
	}
	if t.irq != nil {
		errs = append(errs, t.irq.Close())
	}
	if t.doorbell >= 0 {
		unix.Close(t.doorbell)
		t.doorbell = -1
	}
	t.mu.Lock()
	for _, fd := range t.extra {
		unix.Close(fd)
	}
	t.extra = nil
	t.mu.Unlock()
	return errors.Join(errs...)
}

// Close leaves the server (it tells the other peers) and unmaps the region.
func (t *hostTransport) Close() error {
	t.conn.Close()
	<-t.done // the watcher is done with our fds
	return t.closeAll()
}
