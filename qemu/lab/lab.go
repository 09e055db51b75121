// Package lab is the guest lab dimmnet lab runs: it fetches a kernel,
// builds an initramfs with the dimmnet binary as /init, starts the daemons
// and two QEMU guests on them, and runs the ping-pong, libfabric's own
// fi_pingpong over the project's provider, or a shell between the guests.
// The CLI only parses flags into Options.
package lab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/internal/netsetup"
	"github.com/dimmnet/dimmnet/qemu/initramfs"
	"github.com/dimmnet/dimmnet/qemu/kernel"
	vmqemu "github.com/hugelgupf/vmtest/qemu"
)

// Options is what the command line asks of Run.
type Options struct {
	What     string        // pingpong, fi_pingpong or shell
	Dir      string        // --dir
	Kpath    string        // --kernel
	MaxSize  int           // --max
	Iters    int           // --iters
	RawIters int           // --rawiters
	AsJSON   bool          // --json
	Timeout  time.Duration // --timeout
	Mem      int           // --mem
	Spin     bool          // --spin
	LinkKind string        // --link
	PcapFile string        // --pcap
	Check    bool          // --check
	KeyFile  string        // --key
	Storm    bool          // --doorbell-storm
	Attach   string        // --attach
	Provider string        // --provider: a built libdimmnet-fi.so ("" builds one)
}

// Run is the host side of the guest lab: a daemon with two linked
// devices, two TCG guests each with one of them (ivshmem-doorbell) and one
// plain shared region for the raw baseline, the ping-pong between them
// (o.What "pingpong") or a shell in the guests (o.What "shell").
func Run(o Options) error {
	if o.Attach != "vfio" && o.Attach != "sysfs" {
		return fmt.Errorf("--attach %q: want vfio or sysfs", o.Attach)
	}
	switch o.LinkKind {
	case "mem", "udp":
	case "tap", "afpacket":
		if os.Geteuid() != 0 {
			return fmt.Errorf("--link %s needs root: it makes a network namespace, a bridge or veth pair, and TAPs (use --link udp without root)", o.LinkKind)
		}
	default:
		return fmt.Errorf("--link %q: want mem, udp, tap or afpacket", o.LinkKind)
	}
	qemuBin, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return errors.New("qemu-system-x86_64 not found: install Debian's qemu-system-x86")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	progress := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "lab: "+format+"\n", a...) }

	workDir := o.Dir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "dimmnet-lab"); err != nil {
			return err
		}
		defer os.RemoveAll(workDir)
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	workDir, _ = filepath.Abs(workDir)

	k, err := labKernel(o.Kpath, progress)
	if err != nil {
		return err
	}
	initrd := filepath.Join(workDir, "initramfs.cpio.gz")
	// The VFIO modules go in whatever --attach says, so a guest without an
	// IOMMU exercises the fallback it would take on a kernel without one.
	modules, err := labModules(k)
	if err != nil {
		progress("guests will attach through sysfs: %v", err)
	}
	fi := o.What == "fi_pingpong"
	if fi {
		// fi_pingpong, the provider it loads, their libraries and the
		// network modules of the control link fi_pingpong's socket needs.
		files, err := labFiFiles(k, workDir, o.Provider, progress)
		if err != nil {
			return err
		}
		if modules == nil {
			modules = map[string]string{}
		}
		maps.Copy(modules, files)
	}
	if err := labInitramfs(initrd, workDir, modules, progress); err != nil {
		return err
	}
	if fi {
		if st, err := os.Stat(initrd); err == nil {
			progress("initramfs with fi_pingpong and its closure: %.1f MiB", float64(st.Size())/(1<<20))
		}
		// The kernel holds the compressed archive and its unpacked
		// files (about 43 MiB with the closure) at once: in 128 MiB the
		// unpacking fails with a write error and /usr/bin/fi_pingpong's
		// loader is missing.
		if o.Mem < fiMinMem {
			progress("guest memory %d MiB -> %d MiB: the initramfs with fi_pingpong's closure does not unpack in less", o.Mem, fiMinMem)
			o.Mem = fiMinMem
		}
	}

	// The daemons: this program, as children that die with us. One with
	// both devices on its in-memory hub, or (--link udp) one per guest, the
	// two devices linked over loopback UDP.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sockDir := filepath.Join(workDir, "sock")
	nodeSock := func(i int) string { return filepath.Join(sockDir, fmt.Sprintf("node%d.sock", i)) }
	rawSock := filepath.Join(sockDir, "raw.sock")
	var daemonArgs [][]string
	switch o.LinkKind {
	case "mem":
		daemonArgs = [][]string{{"--dir", sockDir, "--nodes", "2"}}
	case "udp":
		peers, err := labUDPPeers(workDir)
		if err != nil {
			return err
		}
		for i := range 2 {
			dir := filepath.Join(sockDir, fmt.Sprintf("d%d", i))
			daemonArgs = append(daemonArgs, []string{"--dir", dir, "--nodes", "1", "--node-base", strconv.Itoa(i), "--link", "udp", "--peers", peers})
		}
		nodeSock = func(i int) string {
			return filepath.Join(sockDir, fmt.Sprintf("d%d", i), fmt.Sprintf("node%d.sock", i))
		}
		rawSock = filepath.Join(sockDir, "d0", "raw.sock")
	case "tap", "afpacket":
		// Registered before the daemons start, so it runs after they
		// are stopped: the namespace goes with nothing holding it.
		nsName, devArgs, removeNS, err := labNetns(o.LinkKind, progress)
		if err != nil {
			return err
		}
		defer func() {
			if err := removeNS(); err != nil {
				progress("%v", err)
			}
		}()
		for i := range 2 {
			dir := filepath.Join(sockDir, fmt.Sprintf("d%d", i))
			daemonArgs = append(daemonArgs, append([]string{"--dir", dir, "--nodes", "1", "--node-base", strconv.Itoa(i), "--link", o.LinkKind, "--netns", nsName}, devArgs(i)...))
		}
		nodeSock = func(i int) string {
			return filepath.Join(sockDir, fmt.Sprintf("d%d", i), fmt.Sprintf("node%d.sock", i))
		}
		rawSock = filepath.Join(sockDir, "d0", "raw.sock")
	}
	if o.PcapFile != "" {
		// Daemon 0 sees every frame of the pair: on the in-memory hub it
		// has both devices, on a real medium it sends and receives them.
		p, err := filepath.Abs(o.PcapFile)
		if err != nil {
			return err
		}
		daemonArgs[0] = append(daemonArgs[0], "--pcap", p)
		progress("capturing the frames between the devices to %s (daemon 0 records them)", o.PcapFile)
	}
	if o.Check {
		for i := range daemonArgs {
			daemonArgs[i] = append(daemonArgs[i], "--check")
		}
	}
	if o.KeyFile != "" {
		p, err := filepath.Abs(o.KeyFile)
		if err != nil {
			return err
		}
		for i := range daemonArgs {
			daemonArgs[i] = append(daemonArgs[i], "--key", p)
		}
	}
	if o.Attach == "vfio" {
		// A device-less ivshmem server too: the guests' raw interrupt
		// baseline, ringing each other with no device model between.
		daemonArgs[0] = append(daemonArgs[0], "--raw-irq")
	}
	for i, a := range daemonArgs {
		stopDaemon, err := labDaemon(self, a, filepath.Join(workDir, fmt.Sprintf("daemon%d.log", i)), progress)
		if err != nil {
			return err
		}
		defer stopDaemon()
	}

	var hostRaw []pingpong.Result
	if o.LinkKind == "udp" {
		r, err := labUDPLoopback(o.RawIters)
		if err != nil {
			return err
		}
		progress("host UDP loopback 8 B: RTT/2 median %.2f µs", r.RTTHalfP50Us)
		hostRaw = append(hostRaw, r)
	}

	// The raw baseline's region: one file both guests map as ivshmem-plain.
	rawPath := fmt.Sprintf("/dev/shm/dimmnet-lab-%d-raw", os.Getpid())
	if err := os.WriteFile(rawPath, make([]byte, 1<<20), 0o600); err != nil {
		return fmt.Errorf("create raw region: %w", err)
	}
	defer os.Remove(rawPath)

	common := fmt.Sprintf("console=ttyS0 quiet panic=-1 dimmnet.max=%d dimmnet.iters=%d dimmnet.rawiters=%d", o.MaxSize, o.Iters, o.RawIters)
	if o.Spin {
		common += " dimmnet.spin=1"
	}
	if o.Storm {
		common += " dimmnet.storm=1"
	}
	machine := "q35,accel=tcg"
	if o.Attach == "vfio" {
		// An emulated IOMMU with interrupt remapping, which
		// vfio_iommu_type1 wants before it hands out MSI-X; it must
		// precede the devices it translates for.
		machine += " -device intel-iommu,intremap=on"
		// no_timer_check: with interrupt remapping the kernel panics
		// ("timer doesn't work through Interrupt-remapped IO-APIC") when
		// its boot-time timer test misses ticks, as a TCG vCPU
		// descheduled on a loaded host does; the test proves nothing
		// about QEMU's timer, and cloud images skip it too.
		common += " intel_iommu=on no_timer_check"
	}
	var ctlPorts [2]int
	if fi {
		if ctlPorts, err = labFreeUDPPorts(); err != nil {
			return err
		}
	}
	guestArgs := func(i int) []string {
		a := []string{
			"-chardev", fmt.Sprintf("socket,path=%s,id=dn", nodeSock(i)),
			"-device", "ivshmem-doorbell,chardev=dn,vectors=1",
			"-object", "memory-backend-file,id=raw,share=on,mem-path=" + rawPath + ",size=1M",
			"-device", "ivshmem-plain,memdev=raw",
		}
		if o.Attach == "vfio" {
			a = append(a, "-chardev", "socket,path="+rawSock+",id=rawirq",
				"-device", "ivshmem-doorbell,chardev=rawirq,vectors=1")
		}
		if fi {
			// fi_pingpong's control socket: a virtio-net link between the
			// two guests, its frames carried in UDP datagrams on loopback.
			a = append(a, "-netdev", fmt.Sprintf("socket,id=ctl,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d", ctlPorts[1-i], ctlPorts[i]),
				"-device", fmt.Sprintf("virtio-net-pci,netdev=ctl,mac=52:54:00:77:00:%02x", i+1))
		}
		return a
	}
	qcmd := fmt.Sprintf("%s -machine %s -cpu max -m %d -no-reboot -nodefaults -display none -serial stdio", qemuBin, machine, o.Mem)
	if o.What == "shell" {
		return labShell(ctx, qcmd, k.Path, initrd, common, guestArgs, workDir, progress)
	}

	type guest struct {
		vm      *vmqemu.VM
		log     *os.File
		mu      sync.Mutex
		results []pingpong.Result
		done    string
		booted  string
		ver     int
		attach  string
		irqs    int
		rings   string // Doorbell stores of a storming guest, and for how long
		panic   string // the kernel's panic line, if it panicked
		fi      []string
	}
	guests := make([]*guest, 2)
	start := time.Now()
	for i := range guests {
		g := &guest{}
		guests[i] = g
		if g.log, err = os.Create(filepath.Join(workDir, fmt.Sprintf("guest%d.log", i))); err != nil {
			return err
		}
		role := map[int]string{0: "initiator", 1: "responder"}[i]
		i := i
		line := func(l string) {
			l = strings.TrimRight(l, "\r\n")
			if i := strings.Index(l, "DIMMNET-"); i > 0 {
				l = l[i:] // after the console's escape sequences
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			switch {
			case strings.Contains(l, "Kernel panic"):
				g.panic = strings.TrimSpace(l)
			case strings.HasPrefix(l, MarkBooted+" "):
				g.booted = strings.TrimPrefix(l, MarkBooted+" ")
				progress("guest %d booted to /init in %s s of guest time (%.1f s wall)", i, g.booted, time.Since(start).Seconds())
			case strings.HasPrefix(l, MarkResult+" "):
				var r pingpong.Result
				if json.Unmarshal([]byte(strings.TrimPrefix(l, MarkResult+" ")), &r) == nil {
					g.results = append(g.results, r)
					progress("guest %d: %s %s %s: RTT/2 %.2f µs (median %.2f)", i, r.Mode, r.Condition, pingpong.SizeName(r.Size), r.RTTHalfUs, r.RTTHalfP50Us)
				}
			case strings.HasPrefix(l, MarkAttach+" "):
				g.attach = strings.TrimPrefix(l, MarkAttach+" ")
				progress("guest %d attached through %s", i, g.attach)
			case strings.HasPrefix(l, MarkIRQs+" "):
				g.irqs, _ = strconv.Atoi(strings.TrimPrefix(l, MarkIRQs+" "))
			case strings.HasPrefix(l, MarkStorm+" "):
				g.rings = strings.TrimPrefix(l, MarkStorm+" ")
			case strings.HasPrefix(l, MarkVerified+" "):
				g.ver, _ = strconv.Atoi(strings.TrimPrefix(l, MarkVerified+" "))
			case strings.HasPrefix(l, MarkDone+" "):
				g.done = strings.TrimPrefix(l, MarkDone+" ")
			case strings.HasPrefix(l, MarkFi+" "):
				g.fi = append(g.fi, strings.TrimPrefix(l, MarkFi+" "))
			}
		}
		g.vm, err = vmqemu.StartContext(ctx, vmqemu.ArchAMD64,
			vmqemu.WithQEMUCommand(qcmd),
			vmqemu.WithKernel(k.Path),
			vmqemu.WithInitramfs(initrd),
			vmqemu.WithAppendKernel(common, fmt.Sprintf("dimmnet.run=%s dimmnet.role=%s dimmnet.peer=%d", map[bool]string{false: "pingpong", true: "fipingpong"}[fi], role, 1-i)),
			vmqemu.WithQEMUArgs(guestArgs(i)...),
			vmqemu.WithSerialOutput(g.log),
			vmqemu.LogSerialByLine(line),
		)
		if err != nil {
			for _, o := range guests[:i] {
				o.vm.Kill()
				o.vm.Wait()
			}
			return fmt.Errorf("start guest %d: %w", i, err)
		}
		progress("guest %d booting (%s), console log %s", i, role, g.log.Name())
	}
	// Whichever guest ends first: if it ended badly, stop the other at once.
	exited := make(chan int, len(guests))
	werr := make([]error, len(guests))
	for i, g := range guests {
		go func() { werr[i] = g.vm.Wait(); exited <- i }()
	}
	first := -1 // the guest that ended badly first: the one to name
	for range guests {
		i := <-exited
		g := guests[i]
		g.mu.Lock()
		done := g.done
		g.mu.Unlock()
		if (werr[i] != nil || done != "ok") && first < 0 {
			first = i
			for _, o := range guests {
				o.vm.Kill()
			}
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("lab stopped: %w (logs in %s)", ctx.Err(), workDir)
	}
	// Name the guest that failed first, not the peer the lab then killed.
	if first >= 0 {
		g := guests[first]
		if g.panic != "" {
			return fmt.Errorf("guest %d's kernel panicked: %s (console log %s); the other was stopped", first, g.panic, g.log.Name())
		}
		if werr[first] != nil && g.done == "" {
			return fmt.Errorf("guest %d died: %v (console log %s); the other was stopped", first, werr[first], g.log.Name())
		}
		return fmt.Errorf("guest %d did not finish: %q (console log %s); the other was stopped", first, g.done, g.log.Name())
	}
	if fi {
		return labFiReport(o, guests[0].fi, guests[1].fi, [2]string{attachKind(guests[0].attach), attachKind(guests[1].attach)},
			time.Since(start), workDir, progress)
	}
	res := append(guests[0].results, hostRaw...)
	var raws, devs []pingpong.Result
	for _, r := range res {
		if r.Mode == "raw" {
			raws = append(raws, r)
		} else {
			devs = append(devs, r)
		}
	}
	if want := len(pingpong.NewPlan(o.MaxSize, o.Iters, 0)); len(devs) != want || len(raws) == 0 {
		return fmt.Errorf("guest 0 reported %d device results (want %d) and %d raw ones (console log %s)", len(devs), want, len(raws), guests[0].log.Name())
	}
	progress("both guests powered off after %.1f s; payloads verified byte for byte: %d by guest 0, %d by guest 1",
		time.Since(start).Seconds(), guests[0].ver, guests[1].ver)
	progress("attached through %s by guest 0, %s by guest 1; interrupts received: %d by guest 0, %d by guest 1",
		attachKind(guests[0].attach), attachKind(guests[1].attach), guests[0].irqs, guests[1].irqs)
	if o.Storm {
		progress("doorbell storm: guest 0 stored to its Doorbell register %s while the ping-pong ran", guests[0].rings)
	}
	for i := range devs {
		devs[i].Link = o.LinkKind
	}
	if o.AsJSON {
		return pingpong.WriteJSON(os.Stdout, append(raws, devs...), o.LinkKind)
	}
	base := map[string]pingpong.Result{}
	for _, r := range raws {
		base[r.Condition] = r
	}
	word, irq, udp := base["word"], base["irq"], base["udp"]
	title := "two QEMU guests (TCG), each with a dimmnet device of one daemon"
	switch o.LinkKind {
	case "udp":
		title = "two QEMU guests (TCG), a daemon each, the devices linked over loopback UDP"
	case "tap":
		title = "two QEMU guests (TCG), a daemon each, the devices' TAPs on a bridge"
	case "afpacket":
		title = "two QEMU guests (TCG), a daemon each, the devices on the ends of a veth pair (AF_PACKET)"
	}
	pingpong.PrintTable(os.Stdout, title, devs)
	fmt.Printf("\nraw baseline between the guests (a word through one shared ivshmem-plain region): RTT/2 %.2f µs\n", word.RTTHalfUs)
	if irq.Iters > 0 {
		fmt.Printf("raw interrupt baseline (MSI-X through a device-less ivshmem server, VFIO): RTT/2 median %.2f µs (mean %.2f)\n", irq.RTTHalfP50Us, irq.RTTHalfUs)
	}
	if udp.Iters > 0 {
		fmt.Printf("host UDP loopback, 8 B: RTT/2 median %.2f µs (mean %.2f)\n", udp.RTTHalfP50Us, udp.RTTHalfUs)
	}
	for _, r := range devs {
		if r.Size == 8 && r.Condition == pingpong.CondLinkMem {
			fmt.Printf("  %-5s 8 B linkmem: RTT/2 median %.2f µs = %.1fx raw word", r.Mode, r.RTTHalfP50Us, r.RTTHalfP50Us/word.RTTHalfP50Us)
			if irq.RTTHalfP50Us > 0 {
				fmt.Printf(", %.1fx raw interrupt", r.RTTHalfP50Us/irq.RTTHalfP50Us)
				if udp.RTTHalfP50Us > 0 {
					fmt.Printf(", %.1fx raw interrupt + UDP", r.RTTHalfP50Us/(irq.RTTHalfP50Us+udp.RTTHalfP50Us))
				}
			}
			fmt.Println()
		}
	}
	fmt.Printf("boot to /init: %s s and %s s of guest time; logs in %s\n", guests[0].booted, guests[1].booted, workDir)
	return nil

}

// labDaemon starts `dimmnet serve args...` as a child that dies with us,
// logging to logPath, and waits for its ready lines (one per socket). The
// returned function stops it.
func labDaemon(self string, args []string, logPath string, progress func(string, ...any)) (func(), error) {
	daemon := exec.Command(self, append([]string{"serve"}, args...)...)
	daemon.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	dlog, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	daemon.Stderr = dlog
	dout, err := daemon.StdoutPipe()
	if err != nil {
		dlog.Close()
		return nil, err
	}
	if err := daemon.Start(); err != nil {
		dlog.Close()
		return nil, fmt.Errorf("start daemon: %w", err)
	}
	stop := func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
		dlog.Close()
	}
	want := 0
	for i, a := range args {
		if a == "--nodes" && i+1 < len(args) {
			want, _ = strconv.Atoi(args[i+1])
		}
		if a == "--raw-irq" {
			want++
		}
	}
	sc := bufio.NewScanner(dout)
	for range want {
		if !sc.Scan() {
			stop()
			return nil, fmt.Errorf("daemon did not get ready (see %s)", logPath)
		}
		progress("%s", sc.Text())
	}
	go io.Copy(io.Discard, dout)
	return stop, nil
}

// labNetns makes the medium of --link tap|afpacket in a network namespace
// of its own, so nothing touches the host's interfaces and one removal
// takes everything: a bridge the daemons' TAPs join (tap), or a veth pair
// with an end per daemon (afpacket, jumbo MTU: fewer frames per message).
// It returns the namespace's name, each daemon's extra serve flags, and
// the removal (call it once the daemons are gone).
func labNetns(kind string, progress func(string, ...any)) (string, func(int) []string, func() error, error) {
	// A lab killed with SIGKILL could not remove its namespace: clear
	// those of labs that are gone before making ours.
	if gone, err := netsetup.DeleteOrphans("dimmnet-lab-"); err != nil {
		return "", nil, nil, fmt.Errorf("--link %s: %w", kind, err)
	} else if len(gone) > 0 {
		progress("removed the network namespaces of labs that were killed: %s", strings.Join(gone, ", "))
	}
	name := fmt.Sprintf("dimmnet-lab-%d", os.Getpid())
	ns, err := netsetup.NewNamespace(name)
	if err != nil {
		return "", nil, nil, fmt.Errorf("--link %s: %w", kind, err)
	}
	defer ns.Close() // the daemons open it by name
	remove := func() error {
		if err := netsetup.DeleteNamespace(name); err != nil {
			return fmt.Errorf("remove network namespace %s: %w", name, err)
		}
		return nil
	}
	var devArgs func(int) []string
	switch kind {
	case "tap":
		const bridge = "dnlabbr"
		err = netsetup.Bridge(ns, bridge)
		devArgs = func(int) []string { return []string{"--bridge", bridge} }
		progress("network namespace %s: bridge %s, each daemon's TAP dimmnet<node> joins it", name, bridge)
	case "afpacket":
		ends := [2]string{"dnlab0", "dnlab1"}
		if err = netsetup.VethPair(ns, ends[0], ends[1], nil, nil); err == nil {
			err = netsetup.SetMTU(ns, 9000, ends[:]...)
		}
		devArgs = func(i int) []string { return []string{"--ifname", ends[i]} }
		progress("network namespace %s: veth pair %s-%s, a daemon on each end", name, ends[0], ends[1])
	}
	if err != nil {
		remove()
		return "", nil, nil, fmt.Errorf("--link %s: %w", kind, err)
	}
	return name, devArgs, remove, nil
}

// labUDPPeers writes the peers file of --link udp: nodes 0 and 1 on two
// loopback ports free a moment ago.
func labUDPPeers(workDir string) (string, error) {
	var lines []string
	for i := range 2 {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("find a free UDP port: %w", err)
		}
		defer c.Close() // both held until both are chosen, so they differ
		lines = append(lines, fmt.Sprintf("node %d %s", i, c.LocalAddr()))
	}
	p := filepath.Join(workDir, "peers")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return "", err
	}
	return p, nil
}

// labUDPLoopback measures the host's own UDP loopback ping-pong, 8 bytes
// between two sockets served by two goroutines: the medium --link udp
// adds, measured in the same run. The median is of per-round-trip times.
func labUDPLoopback(iters int) (pingpong.Result, error) {
	a, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return pingpong.Result{}, fmt.Errorf("udp loopback: %w", err)
	}
	defer a.Close()
	b, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return pingpong.Result{}, fmt.Errorf("udp loopback: %w", err)
	}
	defer b.Close()
	echo := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for range iters {
			n, from, err := b.ReadFromUDP(buf)
			if err == nil {
				_, err = b.WriteToUDP(buf[:n], from)
			}
			if err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	msg, buf := make([]byte, 8), make([]byte, 64)
	lat := make([]time.Duration, 0, iters)
	a.SetReadDeadline(time.Now().Add(30 * time.Second))
	for range iters {
		t0 := time.Now()
		if _, err := a.WriteToUDP(msg, b.LocalAddr().(*net.UDPAddr)); err != nil {
			return pingpong.Result{}, fmt.Errorf("udp loopback: %w", err)
		}
		if _, _, err := a.ReadFromUDP(buf); err != nil {
			return pingpong.Result{}, fmt.Errorf("udp loopback: %w", err)
		}
		lat = append(lat, time.Since(t0))
	}
	if err := <-echo; err != nil {
		return pingpong.Result{}, fmt.Errorf("udp loopback echo: %w", err)
	}
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	slices.Sort(lat)
	mean := float64(sum.Nanoseconds()) / float64(iters) / 2 / 1e3
	return pingpong.Result{Mode: "raw", Condition: "udp", Size: 8, RTTHalfUs: mean, RTTHalfP50Us: float64(lat[iters/2].Nanoseconds()) / 2 / 1e3,
		MBps: 8 / mean, Iters: iters, Path: "host", Link: "udp"}, nil
}

// attachKind is the first word of a guest's DIMMNET-ATTACH line ("vfio",
// "sysfs"), the reason having been shown when the line arrived.
func attachKind(line string) string {
	if f := strings.Fields(line); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// labKernel is the user's kernel or Debian's cloud kernel from the cache,
// checked for what the guest needs.
func labKernel(path string, progress func(string, ...any)) (kernel.Kernel, error) {
	var k kernel.Kernel
	var err error
	if path != "" {
		k, err = kernel.FromFile(path)
	} else {
		cache, cerr := os.UserCacheDir()
		if cerr != nil {
			cache = os.TempDir()
		}
		k, err = kernel.Fetch(filepath.Join(cache, "dimmnet", "kernel"), func(s string) { progress("%s", s) })
	}
	if err != nil {
		return k, err
	}
	if err := k.Check(); err != nil {
		return k, fmt.Errorf("kernel %s: %w", k.Path, err)
	}
	progress("kernel %s", k.Path)
	return k, nil
}

// labModules lists the kernel's VFIO modules for the initramfs, under
// lib/modules/<release>/ as the guest init looks for them.
func labModules(k kernel.Kernel) (map[string]string, error) {
	files, err := k.VFIOModuleFiles()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for i, f := range files {
		m[filepath.ToSlash(filepath.Join("lib", "modules", k.Version, kernel.VFIOModules[i]))] = f
	}
	return m, nil
}

// labInitramfs builds the guests' initramfs: this project's dimmnet, built
// static, as /init (and bin/dimmnet), the kernel's VFIO modules, plus a
// static busybox when the host has one (for lab shell).
func labInitramfs(out, workDir string, modules map[string]string, progress func(string, ...any)) error {
	bin := filepath.Join(workDir, "dimmnet-static")
	self, _ := os.Executable()
	if initramfs.IsStatic(self) {
		bin = self
	} else {
		root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
		if err != nil {
			return fmt.Errorf("this dimmnet is not static and no module to rebuild it from (run the lab from the source tree, or build with CGO_ENABLED=0): %w", err)
		}
		progress("building a static dimmnet for the guests")
		if err := initramfs.GoBuildStatic(filepath.Join(strings.TrimSpace(string(root)), "cmd", "dimmnet"), bin); err != nil {
			return err
		}
	}
	bb := initramfs.FindBusybox()
	if bb == "" {
		progress("no static busybox on this host (Debian: busybox-static): guests get no shell")
	}
	files := map[string]string{"bin/dimmnet": bin}
	maps.Copy(files, modules)
	return initramfs.Build(out, initramfs.Spec{Init: bin, Files: files, Busybox: bb})
}

// labShell boots the two guests, guest 0 with a shell on this terminal and
// guest 1 idle in the background, until the shell exits.
func labShell(ctx context.Context, qcmd, kpath, initrd, common string, guestArgs func(int) []string, workDir string, progress func(string, ...any)) error {
	q := strings.Fields(qcmd)
	bg := exec.CommandContext(ctx, q[0], append(append(q[1:], "-kernel", kpath, "-initrd", initrd,
		"-append", common+" dimmnet.run=shell"), guestArgs(1)...)...)
	bgLog, err := os.Create(filepath.Join(workDir, "guest1.log"))
	if err != nil {
		return err
	}
	defer bgLog.Close()
	bg.Stdout, bg.Stderr, bg.Stdin = bgLog, bgLog, nil
	bg.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := bg.Start(); err != nil {
		return fmt.Errorf("start guest 1: %w", err)
	}
	defer func() { bg.Process.Kill(); bg.Wait() }()
	fg := exec.CommandContext(ctx, q[0], append(append(q[1:], "-kernel", kpath, "-initrd", initrd,
		"-append", common+" dimmnet.run=shell"), guestArgs(0)...)...)
	fg.Stdin, fg.Stdout, fg.Stderr = os.Stdin, os.Stdout, os.Stderr
	fg.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	progress("booting guest 0 with a shell on this console (guest 1 logs to %s); `exit` powers off", bgLog.Name())
	return fg.Run()
}
