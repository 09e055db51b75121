package guest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/qemu/kernel"
	"github.com/dimmnet/dimmnet/qemu/lab"
	"github.com/vishvananda/netlink"
)

// guestFiPingpong runs one side of libfabric's own fi_pingpong, unmodified
// and dynamically linked, over this guest's dimmnet device through the
// project's provider (FI_DIMMNET_LINK=pci): the initiator is the client,
// the responder the server. fi_pingpong swaps its endpoints' addresses
// over a TCP socket of its own before it touches the device, so the guest
// first brings up the lab's virtio-net link for that socket. Its output
// goes to the console line by line behind lab.MarkFi once it exits.
func guestFiPingpong(args map[string]string) error {
	maxSize, _ := strconv.Atoi(args["dimmnet.max"])
	iters, _ := strconv.Atoi(args["dimmnet.iters"])
	if maxSize < 1 || iters < 1 {
		return fmt.Errorf("bad dimmnet.max/iters on the command line: %q %q", args["dimmnet.max"], args["dimmnet.iters"])
	}
	initiator := args["dimmnet.role"] == "initiator"
	me, peer := 0, 1
	if !initiator {
		me, peer = 1, 0
	}
	if err := loadModules(kernel.NetModules); err != nil {
		return fmt.Errorf("fi_pingpong's control link: %w", err)
	}
	if err := controlLink(lab.FiGuestIP(me)); err != nil {
		return fmt.Errorf("fi_pingpong's control link: %w", err)
	}
	bdfs, err := driver.FindPCI()
	if err != nil {
		return err
	}
	how := prepareVFIO(bdfs[0])
	fmt.Printf("%s %s\n", lab.MarkAttach, how)

	a := []string{"-p", "dimmnet", "-e", "rdm", "-S", "all", "-I", strconv.Itoa(iters), "-c"}
	if initiator {
		a = append(a, lab.FiGuestIP(peer))
	}
	env := []string{
		"PATH=/usr/bin:/bin",
		"FI_PROVIDER_PATH=/" + lab.FiProviderDir,
		"FI_DIMMNET_LINK=pci",
		"FI_DIMMNET_MAX_MSG=" + strconv.Itoa(maxSize),
		"FI_DIMMNET_STATS=1",
	}
	fi := "/" + lab.FiPingpongPath
	var out []byte
	deadline := time.Now().Add(5 * time.Minute)
	for {
		cmd := exec.Command(fi, a...)
		cmd.Env = env
		out, err = cmd.CombinedOutput()
		// The server may not listen yet, or its guest not even answer
		// ARP (it boots at its own pace): a connection refused or with no
		// route was never accepted, so try again.
		notYet := bytes.Contains(out, []byte("Connection refused")) || bytes.Contains(out, []byte("No route to host"))
		if err != nil && initiator && notYet && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		break
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fmt.Printf("%s %s\n", lab.MarkFi, sc.Text())
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", filepath.Base(fi), strings.Join(a, " "), err)
	}
	return nil
}

// controlLink brings up the loopback and the guest's one network
// interface (the lab's virtio-net link) with addr/24.
func controlLink(addr string) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	var nic netlink.Link
	for deadline := time.Now().Add(10 * time.Second); nic == nil; {
		links, err := netlink.LinkList()
		if err != nil {
			return fmt.Errorf("list links: %w", err)
		}
		for _, l := range links {
			if l.Attrs().Flags&net.FlagLoopback == 0 && l.Type() == "device" {
				nic = l
				break
			}
		}
		if nic == nil {
			if time.Now().After(deadline) {
				return errors.New("no network interface appeared (is the virtio-net device on QEMU's command line?)")
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	ip, err := netlink.ParseAddr(addr + "/24")
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(nic, ip); err != nil {
		return fmt.Errorf("%s: add %s: %w", nic.Attrs().Name, addr, err)
	}
	if err := netlink.LinkSetUp(nic); err != nil {
		return fmt.Errorf("%s up: %w", nic.Attrs().Name, err)
	}
	fmt.Printf("guest: %s is %s\n", nic.Attrs().Name, addr)
	return nil
}
