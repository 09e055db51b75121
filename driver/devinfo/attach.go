package devinfo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/internal/rundir"
)

// ErrNoDevices reports a directory where no daemon serves a device: the
// commands that look at devices say so instead of showing nothing.
var ErrNoDevices = errors.New("no node*.sock: no daemon serves this directory")

// Attached is a device attached to by its name: node<K> for a daemon's
// socket, pci for the device on this guest's PCI bus.
type Attached struct {
	Name   string
	Socket string // the daemon's socket it was reached by ("" on the PCI bus)
	driver.Attachment
}

// Sockets lists the devices' sockets a daemon serves in dir
// (node<K>.sock), in node order (node2 before node10).
func Sockets(dir string) ([]string, error) {
	socks, err := filepath.Glob(filepath.Join(dir, "node*.sock"))
	if err != nil {
		return nil, err
	}
	if len(socks) == 0 {
		return nil, fmt.Errorf("devinfo: %s: %w (is dimmnet serve --dir %s running?)", dir, ErrNoDevices, dir)
	}
	sort.Slice(socks, func(i, j int) bool { return nodeNum(socks[i]) < nodeNum(socks[j]) })
	return socks, nil
}

// nodeNum is K of a socket node<K>.sock (0 if the name has none).
func nodeNum(sock string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(sock), "node"), ".sock"))
	return n
}

// AttachAll attaches to every device a daemon serves in dir, in node
// order (what `dimmnet fs` shows). On an error it closes what it had
// attached.
func AttachAll(dir string) ([]Attached, error) {
	socks, err := Sockets(dir)
	if err != nil {
		return nil, err
	}
	return attachEach(socks, func(s string) (Attached, error) {
		t, err := driver.Dial(s)
		return Attached{Name: strings.TrimSuffix(filepath.Base(s), ".sock"), Socket: s, Attachment: t}, err
	})
}

// attachPCI attaches to every device on this machine's PCI bus, each
// named by its address.
func attachPCI() ([]Attached, error) {
	bdfs, err := driver.FindPCI()
	if err != nil {
		return nil, err
	}
	return attachEach(bdfs, func(b string) (Attached, error) {
		t, err := driver.AttachPCI(b)
		return Attached{Name: b, Attachment: t}, err
	})
}

// attachEach attaches to each of where in turn; on an error it closes
// what it had attached and names the one that failed.
func attachEach(where []string, attach func(string) (Attached, error)) ([]Attached, error) {
	var as []Attached
	for _, w := range where {
		a, err := attach(w)
		if err != nil {
			closeAll(as)
			return nil, fmt.Errorf("devinfo: attach %s: %w", w, err)
		}
		as = append(as, a)
	}
	return as, nil
}

// closeAll closes every attachment of as.
func closeAll(as []Attached) {
	for _, a := range as {
		a.Close()
	}
}

// Attach attaches to the device a command names (`dimmnet stat`): a
// socket (a bare name such as node1.sock is in serve's default
// directory); with no name, node0.sock there if a daemon serves it, else
// the device on this guest's PCI bus.
func Attach(sock string) (Attached, error) {
	if sock == "" {
		if _, err := os.Lstat(filepath.Join(rundir.Default(), "node0.sock")); err == nil {
			sock = "node0.sock"
		}
	}
	if sock == "" {
		t, err := driver.AttachPCI("")
		return Attached{Name: "pci", Attachment: t}, err
	}
	sock, err := rundir.Socket(sock)
	if err != nil {
		return Attached{}, err
	}
	t, err := driver.Dial(sock)
	return Attached{Name: strings.TrimSuffix(filepath.Base(sock), ".sock"), Socket: sock, Attachment: t}, err
}
