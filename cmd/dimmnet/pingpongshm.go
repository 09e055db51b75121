package main

import (
	"strconv"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/vdev"
	"github.com/dimmnet/dimmnet/vdev/daemon"
	"github.com/dimmnet/dimmnet/vdev/link"
	"github.com/dimmnet/dimmnet/vdev/link/auth"
	"github.com/dimmnet/dimmnet/vdev/wire"
)

// shmPair runs two processes on the shared-memory link of dir: this one as
// node 1, a child as node 2, each embedding its device; with bind, each
// on a CPU of its own when two fit (procPair.bind).
func shmPair(dir string, payload int, keyFile string, check, bind bool) procPair {
	pp := procPair{bind: bind,
		open:      func() (*driver.Driver, func(), error) { return shmDevice(dir, 1, payload, keyFile, check) },
		responder: []string{"--shm-responder", dir, "--node", "2", "--mtu", strconv.Itoa(payload)}, where: "the shared-memory link",
		path: "process", link: "shm", title: "two processes, each with its device, on the shared-memory link",
	}
	if check {
		pp.responder = append(pp.responder, "--check")
	}
	if keyFile != "" {
		pp.responder = append(pp.responder, "--key", keyFile)
		pp.title += ", every frame authenticated (--key)"
	}
	return pp
}

// shmDevice embeds this process's device as node on dir's shared-memory
// link and opens a driver on it (run to completion: the driver's thread
// runs the device while it waits).
func shmDevice(dir string, node uint16, payload int, keyFile string, check bool) (*driver.Driver, func(), error) {
	key, err := daemon.KeyFor(keyFile)
	if err != nil {
		return nil, nil, err
	}
	if payload == 0 {
		payload = vdev.DefaultHubPayload
	}
	l, err := vdev.NewLocalPorts(vdev.Config{Check: check}, []uint16{node}, func(d *vdev.Device) (link.Port, error) {
		p, err := link.ListenShm(dir, d.Node(), payload+wire.FrameOverhead)
		if err != nil {
			return nil, err
		}
		return auth.Keyed(p, key)
	})
	if err != nil {
		return nil, nil, err
	}
	d, err := driver.Open(driver.InProcessDevice(l.Devices[0]))
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return d, func() { d.Close(); l.Close() }, nil
}

// rawOf is the raw baseline of condition cond in raw (zero if absent):
// the word ping-pong's median RTT/2 and memcpy's MB/s are what the
// shared-memory link is judged by.
func rawOf(raw []pingpong.Result, cond string) pingpong.Result {
	for _, r := range raw {
		if r.Mode == pingpong.ModeRaw && r.Condition == cond {
			return r
		}
	}
	return pingpong.Result{}
}
