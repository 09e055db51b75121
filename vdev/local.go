package vdev

import (
	"errors"
	"fmt"
	"time"

	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// DefaultHubPayload is the packet payload of the embedded in-memory link:
// 64 KiB, so a 1 MiB transfer is 16 packets.
const DefaultHubPayload = 64 << 10

// Local is the embedded default: devices in this process joined by an
// in-memory link and served by one Engine.
type Local struct {
	Devices []*Device
	Hub     *link.Hub
	Engine  *Engine
}

// NewLocal builds and starts one device per node on an in-memory hub whose
// packets carry up to payload bytes (0: DefaultHubPayload).
func NewLocal(cfg Config, payload int, nodes ...uint16) (*Local, error) {
	if payload == 0 {
		payload = DefaultHubPayload
	}
	hub := link.NewHub(payload+wire.FrameOverhead, 256)
	l, err := NewLocalPorts(cfg, nodes, func(d *Device) (link.Port, error) { return hub.Attach(d.MAC()) })
	if l != nil {
		l.Hub = hub
	}
	return l, err
}

// NewLocalPorts builds and starts one device per node, each on the port
// port returns for it (any medium, wrapped in fault injection or capture
// as the caller likes), served by one Engine.
func NewLocalPorts(cfg Config, nodes []uint16, port func(d *Device) (link.Port, error)) (*Local, error) {
	l := &Local{}
	for _, n := range nodes {
		c := cfg
		c.Node = n
		d, err := New(c)
		if err != nil {
			l.Close()
			return nil, err
		}
		p, err := port(d)
		if err != nil {
			d.Close()
			l.Close()
			return nil, fmt.Errorf("attach node %d: %w", n, err)
		}
		d.AttachPort(p)
		l.Devices = append(l.Devices, d)
	}
	e, err := NewEngine(l.Devices...)
	if err != nil {
		l.Close()
		return nil, err
	}
	l.Engine = e
	e.Start()
	return l, nil
}

// drainNs bounds how long Close waits for posted commands to complete.
const drainNs = 2_000_000_000

// Close lets the commands already posted complete (for up to 2 s: a
// process that embeds its device and exits right after posting its last
// message must not take that message down with it), then stops the
// engine and releases every device.
func (l *Local) Close() error {
	if l.Engine != nil {
		for _, d := range l.Devices {
			d.drain(drainNs)
		}
		l.Engine.Stop()
	}
	var errs []error
	for _, d := range l.Devices {
		errs = append(errs, d.Close())
	}
	return errors.Join(errs...)
}

// NewLocalShm builds and starts this process's devices (one per node) on
// the shared-memory medium of rendezvous directory dir, where devices of
// other processes of this host join them (link.ListenShm); packets carry
// up to payload bytes (0: DefaultHubPayload). Every process of a job must
// use the same payload.
func NewLocalShm(cfg Config, dir string, payload int, nodes ...uint16) (*Local, error) {
	if payload == 0 {
		payload = DefaultHubPayload
	}
	return NewLocalPorts(cfg, nodes, func(d *Device) (link.Port, error) {
		return link.ListenShm(dir, d.Node(), payload+wire.FrameOverhead)
	})
}

// drain waits up to timeoutNs until every command posted to d has
// completed, while the engine runs it.
func (d *Device) drain(timeoutNs int64) {
	end := time.Now().Add(time.Duration(timeoutNs))
	for time.Now().Before(end) && d.Failed() == nil {
		if d.running.acquire() {
			busy := true
			d.guard(func() { busy = d.inflight > 0 || d.pending() || d.fence != nil || d.sending > 0 || len(d.compQ) > 0 })
			d.running.release()
			if !busy {
				return
			}
		}
		d.wakeEngine()
		time.Sleep(100 * time.Microsecond)
	}
}
