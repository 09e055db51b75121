// Package netsetup builds and removes the network plumbing the real links
// run over — named network namespaces, veth pairs, bridges and TAPs — with
// netlink from Go, so tests and `dimmnet pingpong --link` need no `ip`
// commands. Every set-up call is idempotent (calling it again on what it
// already made succeeds), every tear-down call accepts what is already gone,
// and lacking privileges is reported as ErrNotRoot rather than a bare EPERM.
//
// Functions taking a netns.NsHandle act inside that namespace; netns.None()
// means the caller's current one.
package netsetup

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNotRoot means the operation needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN
// for namespaces); callers such as tests skip on it instead of failing.
var ErrNotRoot = errors.New("netsetup: needs root (CAP_NET_ADMIN)")

// nsDir is where named namespaces are bind-mounted, as `ip netns` does.
const nsDir = "/run/netns"

// check refuses early, with a clear error, when not running as root.
func check(op string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("netsetup: %s: %w", op, ErrNotRoot)
	}
	return nil
}

// wrap adds context, and ErrNotRoot to a permission error (root without
// the capability, e.g. in a restricted container).
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("netsetup: %s: %w: %w", op, ErrNotRoot, err)
	}
	return fmt.Errorf("netsetup: %s: %w", op, err)
}

// isNetNS reports whether fd refers to a network namespace (a stale file
// under /run/netns left by a crash is a plain empty file).
func isNetNS(fd int) bool {
	var st unix.Statfs_t
	return unix.Fstatfs(fd, &st) == nil && st.Type == unix.NSFS_MAGIC
}

// NewNamespace returns a handle to the named network namespace, creating it
// (bind-mounted under /run/netns, like `ip netns add`) if needed. The caller
// closes the handle; the namespace lives until DeleteNamespace.
func NewNamespace(name string) (netns.NsHandle, error) {
	op := "namespace " + name
	if err := check(op); err != nil {
		return netns.None(), err
	}
	if name == "" || name != filepath.Base(name) {
		return netns.None(), fmt.Errorf("netsetup: %s: bad namespace name", op)
	}
	if h, err := netns.GetFromName(name); err == nil {
		if isNetNS(int(h)) {
			return h, nil
		}
		h.Close()
		if err := DeleteNamespace(name); err != nil { // stale: remake it
			return netns.None(), err
		}
	}
	type result struct {
		h   netns.NsHandle
		err error
	}
	ch := make(chan result, 1)
	// netns.NewNamed moves the calling thread into the new namespace: do it
	// on a thread of its own, and let that thread die if it cannot go back.
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- result{netns.None(), err}
			return
		}
		defer orig.Close()
		h, err := netns.NewNamed(name)
		if rerr := netns.Set(orig); rerr != nil {
			if err == nil {
				h.Close()
				err = fmt.Errorf("return to original namespace: %w", rerr)
			}
			ch <- result{netns.None(), err} // thread stays locked: it exits with the goroutine
			return
		}
		runtime.UnlockOSThread()
		ch <- result{h, err}
	}()
	r := <-ch
	if r.err != nil {
		return netns.None(), wrap("create "+op, r.err)
	}
	return r.h, nil
}

// DeleteNamespace removes the named namespace (like `ip netns delete`); its
// interfaces go with it once no process or socket holds it. A missing
// namespace is not an error.
func DeleteNamespace(name string) error {
	op := "delete namespace " + name
	if err := check(op); err != nil {
		return err
	}
	if name == "" || name != filepath.Base(name) {
		return fmt.Errorf("netsetup: %s: bad namespace name", op)
	}
	p := filepath.Join(nsDir, name)
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return wrap(op, fmt.Errorf("unmount %s: %w", p, err))
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return wrap(op, err)
	}
	return nil
}

// DeleteOrphans removes the namespaces named prefix+PID whose process is
// gone (a tool that names its namespace after its pid and was killed
// before it could remove it) and returns their names. Namespaces of live
// processes, and names that do not end in a pid, are left alone.
func DeleteOrphans(prefix string) ([]string, error) {
	op := "delete orphaned namespaces " + prefix + "*"
	if err := check(op); err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(nsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(op, err)
	}
	var gone []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(rest)
		if err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			continue // not ours, or its process is alive
		}
		if err := DeleteNamespace(e.Name()); err != nil {
			return gone, err
		}
		gone = append(gone, e.Name())
	}
	return gone, nil
}

// handle opens a netlink handle acting in ns.
func handle(op string, ns netns.NsHandle) (*netlink.Handle, error) {
	if err := check(op); err != nil {
		return nil, err
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, wrap(op+": netlink handle", err)
	}
	return h, nil
}

// notFound reports netlink's "no such link".
func notFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// existing returns the link called name if it exists with the wanted
// type, nil if it does not exist, or an error (another kind of link has
// the name).
func existing(h *netlink.Handle, name, typ string) (netlink.Link, error) {
	l, err := h.LinkByName(name)
	if err != nil {
		if notFound(err) {
			return nil, nil
		}
		return nil, err
	}
	if l.Type() != typ {
		return nil, fmt.Errorf("%s exists as a %s, not a %s", name, l.Type(), typ)
	}
	return l, nil
}

// up sets the link's MAC (when mac is not nil and differs) and brings it up.
func up(h *netlink.Handle, l netlink.Link, mac net.HardwareAddr) error {
	if mac != nil && l.Attrs().HardwareAddr.String() != mac.String() {
		if err := h.LinkSetHardwareAddr(l, mac); err != nil {
			return fmt.Errorf("set MAC of %s to %s: %w", l.Attrs().Name, mac, err)
		}
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", l.Attrs().Name, err)
	}
	return nil
}

// VethPair makes the veth pair a <-> b in ns with the given MACs (nil: the
// kernel's random ones) and brings both ends up: the cable an AF_PACKET
// test runs over. If a already exists as a veth whose peer is b, only the
// MACs and link state are ensured.
func VethPair(ns netns.NsHandle, a, b string, macA, macB net.HardwareAddr) error {
	op := "veth " + a + "-" + b
	h, err := handle(op, ns)
	if err != nil {
		return err
	}
	defer h.Close()
	la, err := existing(h, a, "veth")
	if err != nil {
		return wrap(op, err)
	}
	if la == nil {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a, HardwareAddr: macA}, PeerName: b, PeerHardwareAddr: macB}
		if err := h.LinkAdd(v); err != nil {
			return wrap(op+": create", err)
		}
		if la, err = h.LinkByName(a); err != nil {
			return wrap(op, err)
		}
	}
	lb, err := existing(h, b, "veth")
	if err != nil {
		return wrap(op, err)
	}
	if lb == nil || lb.Attrs().Index != la.Attrs().ParentIndex && la.Attrs().ParentIndex != 0 {
		return wrap(op, fmt.Errorf("%s exists but %s is not its peer", a, b))
	}
	for _, e := range []struct {
		l   netlink.Link
		mac net.HardwareAddr
	}{{la, macA}, {lb, macB}} {
		if err := up(h, e.l, e.mac); err != nil {
			return wrap(op, err)
		}
	}
	// The kernel finishes bringing a link up asynchronously (linkwatch) and
	// silently drops frames sent before: return only when both ends run.
	for _, n := range []string{a, b} {
		if err := waitOperUp(h, n, 2*time.Second); err != nil {
			return wrap(op, err)
		}
	}
	return nil
}

// waitOperUp polls until the link's operational state is up.
func waitOperUp(h *netlink.Handle, name string, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		l, err := h.LinkByName(name)
		if err != nil {
			return err
		}
		if l.Attrs().OperState == netlink.OperUp {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s not operational after %v (state %s)", name, d, l.Attrs().OperState)
		}
		time.Sleep(time.Millisecond)
	}
}

// Bridge makes the bridge name in ns and brings it up: the switch TAPs
// for devices on one host are attached to. STP stays off, so ports forward
// as soon as they are up.
func Bridge(ns netns.NsHandle, name string) error {
	op := "bridge " + name
	h, err := handle(op, ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := existing(h, name, "bridge")
	if err != nil {
		return wrap(op, err)
	}
	if l == nil {
		if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
			return wrap(op+": create", err)
		}
		if l, err = h.LinkByName(name); err != nil {
			return wrap(op, err)
		}
	}
	return wrap(op, up(h, l, nil))
}

// TAP makes the persistent TAP name in ns (owned by root, IFF_TAP|IFF_NO_PI,
// as link.OpenTAP opens it), attaches it to bridge (unless bridge is "")
// and brings it up. Its carrier comes on only once a program opens it, and
// the kernel may take up to a second after that to let the bridge forward
// to it; frames sent meanwhile are lost (the device retransmits them).
// mac is the interface's own address (nil: the kernel's);
// it must not be the MAC of the device that will use the TAP, or the bridge
// takes frames for that device as its own and never forwards them.
func TAP(ns netns.NsHandle, name, bridge string, mac net.HardwareAddr) error {
	op := "tap " + name
	h, err := handle(op, ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := existing(h, name, "tuntap")
	if err != nil {
		return wrap(op, err)
	}
	if l == nil {
		// netlink makes TAPs with /dev/net/tun ioctls, which act in the
		// calling thread's namespace: switch to ns for it.
		err := Run(ns, func() error {
			return netlink.LinkAdd(&netlink.Tuntap{
				LinkAttrs: netlink.LinkAttrs{Name: name},
				Mode:      netlink.TUNTAP_MODE_TAP,
				Flags:     netlink.TUNTAP_NO_PI,
			})
		})
		if err != nil {
			return wrap(op+": create", err)
		}
		if l, err = h.LinkByName(name); err != nil {
			return wrap(op, err)
		}
	}
	if bridge != "" {
		br, err := existing(h, bridge, "bridge")
		if err != nil {
			return wrap(op, err)
		}
		if br == nil {
			return wrap(op, fmt.Errorf("bridge %s does not exist", bridge))
		}
		if l.Attrs().MasterIndex != br.Attrs().Index {
			if err := h.LinkSetMaster(l, br); err != nil {
				return wrap(op, fmt.Errorf("attach to %s: %w", bridge, err))
			}
		}
	}
	return wrap(op, up(h, l, mac))
}

// Delete removes the interface name from ns (a veth takes its peer with
// it); a missing interface is not an error.
func Delete(ns netns.NsHandle, name string) error {
	op := "delete " + name
	h, err := handle(op, ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		if notFound(err) {
			return nil
		}
		return wrap(op, err)
	}
	if err := h.LinkDel(l); err != nil && !notFound(err) && !errors.Is(err, unix.ENODEV) {
		return wrap(op, err)
	}
	return nil
}

// Run calls f on a locked OS thread switched into ns (netns.None(): the
// current namespace), then switches back; it returns f's error. Sockets,
// TAP descriptors and interfaces that f opens or creates stay in ns after
// Run returns — this is how a port is opened on an interface of a test
// namespace while the rest of the process stays outside. f runs on a
// goroutine of its own (so it must not call t.Fatal); goroutines it starts
// run in the original namespace. If switching back fails, the thread is
// discarded rather than returned to the scheduler.
func Run(ns netns.NsHandle, f func() error) error {
	if !ns.IsOpen() {
		ch := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			ch <- f()
		}()
		return <-ch
	}
	if err := check("run in namespace"); err != nil {
		return err
	}
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			ch <- wrap("run: current namespace", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			runtime.UnlockOSThread()
			ch <- wrap("run: enter namespace", err)
			return
		}
		ferr := f()
		if err := netns.Set(orig); err != nil {
			ch <- errors.Join(ferr, wrap("run: leave namespace", err)) // thread dies with the goroutine
			return
		}
		runtime.UnlockOSThread()
		ch <- ferr
	}()
	return <-ch
}

// SetMTU sets the MTU of interfaces in ns.
func SetMTU(ns netns.NsHandle, mtu int, names ...string) error {
	return Run(ns, func() error {
		for _, n := range names {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return fmt.Errorf("find %s: %w", n, err)
			}
			if err := netlink.LinkSetMTU(l, mtu); err != nil {
				return fmt.Errorf("mtu %d on %s: %w", mtu, n, err)
			}
		}
		return nil
	})
}
