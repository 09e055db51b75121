// Package guest is /init in a lab guest (qemu/lab boots the dimmnet
// binary as the initramfs's /init): it mounts what the driver needs, runs
// what the kernel command line asks (one side of the ping-pong, with its
// raw baselines, or a shell) and reports on the console in qemu/lab's
// marks, which the host side reads.
package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/devinfo"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/monotime"
	"github.com/dimmnet/dimmnet/qemu/kernel"
	"github.com/dimmnet/dimmnet/qemu/lab"
	"golang.org/x/sys/unix"
)

// Raw region layout (the lab's ivshmem-plain device both guests map): one
// 64-bit word per cache line pair.
const (
	rawPing  = 0
	rawPong  = 128
	rawReady = 256 // the responder is set up
	// Each side's peer id on the device-less ivshmem server (the raw
	// interrupt baseline), or rawNoIRQ when it cannot take part.
	rawIRQInit = 384
	rawIRQResp = 512
	rawNoIRQ   = ^uint64(0)
)

// Init is /init in a lab guest: mount what the driver needs, run what the
// kernel command line asks (dimmnet.run=pingpong|fipingpong|shell), report on the
// console, power off. It never returns.
func Init() {
	err := guestMain()
	if err != nil {
		fmt.Printf("%s error: %v\n", lab.MarkDone, err)
	} else {
		fmt.Printf("%s ok\n", lab.MarkDone)
	}
	unix.Sync()
	unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF)
	select {}
}

func guestMain() error {
	for _, m := range []struct{ src, dst, fs, config string }{
		{"proc", "/proc", "proc", "CONFIG_PROC_FS"}, {"sysfs", "/sys", "sysfs", "CONFIG_SYSFS"},
		{"devtmpfs", "/dev", "devtmpfs", "CONFIG_DEVTMPFS"}, {"tmpfs", "/tmp", "tmpfs", "CONFIG_TMPFS"},
	} {
		os.MkdirAll(m.dst, 0o755)
		if err := unix.Mount(m.src, m.dst, m.fs, 0, ""); err != nil && !errors.Is(err, unix.EBUSY) {
			return fmt.Errorf("mount %s on %s: %w (the kernel needs %s)", m.fs, m.dst, err, m.config)
		}
	}
	if up, err := os.ReadFile("/proc/uptime"); err == nil {
		fmt.Printf("%s %s\n", lab.MarkBooted, strings.Fields(string(up))[0])
	}
	if _, err := os.Stat(driver.PCISysfs); err != nil {
		return fmt.Errorf("no %s: the kernel needs CONFIG_PCI and CONFIG_SYSFS", driver.PCISysfs)
	}
	args := kernelArgs()
	switch args["dimmnet.run"] {
	case "shell":
		// Bind the device to vfio-pci first, so `dimmnet stat` and any
		// driver started from the shell attach through VFIO.
		if bdfs, err := driver.FindPCI(); err == nil {
			fmt.Printf("%s %s\n", lab.MarkAttach, prepareVFIO(bdfs[0]))
		}
		sh := exec.Command("/bin/sh")
		sh.Stdin, sh.Stdout, sh.Stderr = os.Stdin, os.Stdout, os.Stderr
		sh.Env = append(os.Environ(), "PATH=/bin:/sbin", "PS1=dimmnet-guest# ")
		fmt.Println("dimmnet guest shell: try `dimmnet stat` (the PCI device), `ls /sys/bus/pci/devices`; exit powers off")
		if err := sh.Run(); err != nil {
			return fmt.Errorf("shell: %w (is busybox in the initramfs?)", err)
		}
		return nil
	case "pingpong":
		return guestPingPong(args)
	case "fipingpong":
		return guestFiPingpong(args)
	case "":
		return errors.New("nothing to run: the kernel command line has no dimmnet.run=")
	}
	return fmt.Errorf("unknown dimmnet.run=%q", args["dimmnet.run"])
}

func kernelArgs() map[string]string {
	b, _ := os.ReadFile("/proc/cmdline")
	m := map[string]string{}
	for _, f := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

// guestPingPong runs one side of the lab's ping-pong: the raw baseline
// through the plain shared region, then the device's plan.
func guestPingPong(args map[string]string) error {
	maxSize, _ := strconv.Atoi(args["dimmnet.max"])
	iters, _ := strconv.Atoi(args["dimmnet.iters"])
	rawIters, _ := strconv.Atoi(args["dimmnet.rawiters"])
	peer, err := strconv.Atoi(args["dimmnet.peer"])
	if err != nil || maxSize < 8 {
		return fmt.Errorf("bad dimmnet.peer/max on the command line: %q %q", args["dimmnet.peer"], args["dimmnet.max"])
	}
	initiator := args["dimmnet.role"] == "initiator"
	if args["dimmnet.spin"] == "1" {
		os.Setenv("DIMMNET_GUEST_SPIN", "1")
	}
	plain, err := driver.FindPlainPCI()
	if err != nil || len(plain) == 0 {
		return fmt.Errorf("no plain ivshmem device for the raw baseline: %v", err)
	}
	raw, err := driver.MapPCIRegion(plain[0])
	if err != nil {
		return err
	}
	// Probe through sysfs before binding: vfio-pci may refuse the
	// resource mappings afterwards, and an open group cannot be probed.
	bdfs, err := driver.FindPCI()
	if err != nil {
		return err
	}
	irqFns, _ := driver.FindDoorbellPCI()
	how := prepareVFIO(bdfs[0])
	fmt.Printf("%s %s\n", lab.MarkAttach, how)
	irqFn, err := openRawIRQ(how, irqFns)
	if err != nil {
		fmt.Printf("guest: no raw interrupt baseline: %v\n", err)
	} else {
		defer irqFn.Close()
	}
	t, err := driver.AttachPCI(bdfs[0]) // through VFIO when bound to vfio-pci
	if err != nil {
		return err
	}
	printDevice(bdfs[0], t)
	d, err := driver.Open(t)
	if err != nil {
		return err
	}
	defer printIRQs(t)
	pos, _ := driver.IVPosition(t)
	fmt.Printf("guest: node %d, ivshmem peer %d, %s, attached through %s\n", d.Node(), pos, args["dimmnet.role"], driver.AttachKind(t))
	side := &pingpong.Side{D: d, Peer: uint16(peer), Verify: true}
	if err := pingpong.SetupSide(side, maxSize); err != nil {
		return err
	}
	word := func(off int) *uint64 { return (*uint64)(unsafe.Pointer(&raw[off])) }
	if !initiator {
		atomic.StoreUint64(word(rawReady), 1)
	} else if err := napFor(word(rawReady), 1, 60*time.Second); err != nil {
		return fmt.Errorf("the responder never got ready: %w", err)
	}
	// The raw floor: a word bounced through memory both guests map. Each
	// round trip is timed (the clock is the vDSO's, tens of ns) so the
	// record's median is a median, not the mean copied.
	start := monotime.Now()
	lat := make([]int64, 0, max(rawIters, 0))
	for i := uint64(1); i <= uint64(rawIters); i++ {
		if initiator {
			t0 := monotime.Now()
			atomic.StoreUint64(word(rawPing), i)
			if err := spinFor(word(rawPong), i, 10*time.Second); err != nil {
				return err
			}
			lat = append(lat, monotime.Now()-t0)
		} else {
			if err := spinFor(word(rawPing), i, 10*time.Second); err != nil {
				return err
			}
			atomic.StoreUint64(word(rawPong), i)
		}
	}
	if initiator && rawIters > 0 {
		half := float64(monotime.Now()-start) / float64(rawIters) / 2 / 1e3
		emit(pingpong.Result{Mode: "raw", Condition: "word", Size: 8, RTTHalfUs: half, RTTHalfP50Us: medianHalfUs(lat), MBps: 8 / half, Iters: rawIters, Path: "vm"})
	}
	if err := rawIRQPingPong(irqFn, word, initiator, rawIters); err != nil {
		return err
	}
	if initiator && args["dimmnet.storm"] == "1" {
		defer doorbellStorm(t)()
	}
	for _, st := range pingpong.NewPlan(maxSize, iters, 0) {
		if initiator {
			r, err := pingpong.Initiate(side, st.Mode, st.Cond, st.Size, st.Budget.Warm, st.Budget.Max)
			if err != nil {
				return err
			}
			r.Path, r.Attach = "vm", driver.AttachKind(t)
			emit(r)
		} else if err := pingpong.Respond(side, st.Mode, st.Cond, st.Size, st.Budget.Warm+st.Budget.Max); err != nil {
			return err
		}
	}
	fmt.Printf("%s %d\n", lab.MarkVerified, side.Verified)
	return nil
}

// doorbellStorm makes this guest misbehave for the lab's bad-input test:
// a goroutine stores to the device's Doorbell register (BAR0, through
// VFIO or sysfs) in a tight loop, each store a write of the daemon's
// doorbell eventfd by QEMU, while the guest's ping-pong goes on. The
// returned function stops it and reports the stores on the console.
func doorbellStorm(t driver.Attachment) func() {
	var stop atomic.Bool
	var rings uint64
	var serr error
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		for !stop.Load() {
			if serr = t.Kick(); serr != nil {
				return
			}
			rings++
		}
	}()
	return func() {
		stop.Store(true)
		<-done
		if serr != nil {
			fmt.Printf("guest: doorbell storm stopped after %d stores: %v\n", rings, serr)
		}
		fmt.Printf("%s %d times in %.1f s\n", lab.MarkStorm, rings, time.Since(start).Seconds())
	}
}

// prepareVFIO loads the VFIO modules the initramfs carries and binds the
// function at bdf to vfio-pci. It returns "vfio", or "sysfs" and why not,
// naming what is missing: the driver then maps the BARs through sysfs and
// polls.
func prepareVFIO(bdf string) string {
	if err := loadVFIOModules(); err != nil {
		return fmt.Sprintf("sysfs (%v)", err)
	}
	if err := driver.BindVFIO(bdf); err != nil {
		return fmt.Sprintf("sysfs (%v)", err)
	}
	return "vfio"
}

// loadVFIOModules inserts kernel.VFIOModules (a module already loaded or
// built in is fine).
func loadVFIOModules() error {
	err := loadModules(kernel.VFIOModules)
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat("/sys/bus/pci/drivers/vfio-pci"); serr == nil {
			return nil // built in
		}
	}
	return err
}

// loadModules inserts mods from the initramfs's /lib/modules/<release>,
// in order, with finit_module (a module already loaded is fine).
func loadModules(mods []string) error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	dir := filepath.Join("/lib/modules", unix.ByteSliceToString(u.Release[:]))
	for _, m := range mods {
		p := filepath.Join(dir, m)
		f, err := os.Open(p)
		if err != nil {
			return fmt.Errorf("no module %s in the initramfs: %w", p, err)
		}
		err = unix.FinitModule(int(f.Fd()), "", 0)
		f.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("insert %s: %w", p, err)
		}
	}
	return nil
}

// openRawIRQ opens the device-less ivshmem function (the lab's
// --raw-irq server) through VFIO, when the device itself went through VFIO.
func openRawIRQ(how string, fns []string) (*driver.VFIOFunction, error) {
	if how != "vfio" {
		return nil, errors.New("no VFIO")
	}
	if len(fns) == 0 {
		return nil, errors.New("no ivshmem doorbell function besides the device")
	}
	if err := driver.BindVFIO(fns[0]); err != nil {
		return nil, err
	}
	return driver.OpenVFIO(fns[0])
}

// rawIRQPingPong is the raw interrupt baseline: the guests ring each
// other's MSI-X vector through a device-less ivshmem server and block on
// their own, through VFIO, with no device model or daemon on the path.
// Each side posts its peer id in the plain region (or rawNoIRQ); both run
// only if both can. The initiator times every round trip.
func rawIRQPingPong(f *driver.VFIOFunction, word func(int) *uint64, initiator bool, iters int) error {
	mine, theirs := rawIRQInit, rawIRQResp
	if !initiator {
		mine, theirs = theirs, mine
	}
	id := rawNoIRQ
	if f != nil {
		id = uint64(f.IVPosition())
	}
	atomic.StoreUint64(word(mine), id)
	deadline := time.Now().Add(60 * time.Second)
	for atomic.LoadUint64(word(theirs)) == 0 {
		if time.Now().After(deadline) {
			return errors.New("the peer never said whether it takes part in the raw interrupt baseline")
		}
		time.Sleep(time.Millisecond)
	}
	peer := atomic.LoadUint64(word(theirs))
	if f == nil || peer == rawNoIRQ || iters <= 0 {
		return nil
	}
	const limit = 10 * time.Second
	lat := make([]int64, 0, iters)
	for i := 0; i < iters; i++ {
		var start int64
		if initiator {
			start = monotime.Now()
			if err := f.Ring(uint16(peer)); err != nil {
				return err
			}
		}
		if ok, err := f.WaitInterrupt(limit); err != nil || !ok {
			return fmt.Errorf("raw interrupt baseline, round %d: no interrupt from peer %d within %v (%v)", i, peer, limit, err)
		}
		if initiator {
			lat = append(lat, monotime.Now()-start)
		} else if err := f.Ring(uint16(peer)); err != nil {
			return err
		}
	}
	if initiator {
		var sum int64
		for _, l := range lat {
			sum += l
		}
		mean := float64(sum) / float64(len(lat)) / 2 / 1e3
		emit(pingpong.Result{Mode: "raw", Condition: "irq", Size: 0, RTTHalfUs: mean, RTTHalfP50Us: medianHalfUs(lat), Iters: iters, Path: "vm", Attach: "vfio"})
	}
	return nil
}

// medianHalfUs is the median of round-trip times in ns, halved, in µs.
func medianHalfUs(rtts []int64) float64 {
	if len(rtts) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(rtts))
	return float64(s[len(s)/2]) / 2 / 1e3
}

func emit(r pingpong.Result) {
	b, _ := json.Marshal(r)
	fmt.Printf("%s %s\n", lab.MarkResult, b)
}

// napFor waits until *p == v, sleeping a millisecond between looks: the
// peer may still be booting, and a spinning vCPU would hold the host core
// the peer's vCPU needs (two guests and the daemon share two cores here).
func napFor(p *uint64, v uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for atomic.LoadUint64(p) != v {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for word %d (is %d)", v, atomic.LoadUint64(p))
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// spinFor waits until *p == v, yielding now and then.
func spinFor(p *uint64, v uint64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for i := 0; atomic.LoadUint64(p) != v; i++ {
		if i%1024 == 1023 {
			runtime.Gosched()
			if time.Now().After(deadline) {
				return fmt.Errorf("timed out waiting for word %d (is %d)", v, atomic.LoadUint64(p))
			}
		}
	}
	return nil
}

// printDevice prints the guest's device as `dimmnet devices` lists it, for
// the lab to check.
func printDevice(bdf string, t driver.Attachment) {
	if dev, err := devinfo.Read(bdf, t.Region()); err == nil {
		b, _ := json.Marshal(dev)
		fmt.Printf("%s %s\n", lab.MarkDevice, b)
	}
}

// printIRQs prints how many times the device's MSI-X interrupt woke the
// guest, where the attachment counts them.
func printIRQs(t driver.Attachment) {
	if n, ok := driver.Interrupts(t); ok {
		fmt.Printf("%s %d\n", lab.MarkIRQs, n)
	}
}
