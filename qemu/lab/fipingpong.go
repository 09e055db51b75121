package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/driver/ompi"
	"github.com/dimmnet/dimmnet/qemu/initramfs"
	"github.com/dimmnet/dimmnet/qemu/kernel"
)

// fiMinMem is the guest memory, in MiB, a fi_pingpong guest gets at least.
const fiMinMem = 256

// FiResult is one row of fi_pingpong's table: one message size, timed by
// fi_pingpong itself.
type FiResult struct {
	Bytes       string  `json:"bytes"` // the size as fi_pingpong prints it ("8", "1.5k")
	Size        int     `json:"size"`  // that size in bytes
	Iters       int     `json:"iters"`
	MBps        float64 `json:"mb_per_s"`
	UsecPerXfer float64 `json:"usec_per_xfer"` // one way: elapsed / iterations / 2
}

// FiReport is what `dimmnet lab fi_pingpong --json` prints.
type FiReport struct {
	Results []FiResult `json:"results"` // the client's (guest 0's) table
	Stats   [2]string  `json:"stats"`   // each guest's provider counts (FI_DIMMNET_STATS)
	Attach  [2]string  `json:"attach"`  // how each guest reached its device
}

// ErrNoFiRows is returned (wrapped) when fi_pingpong printed no table.
var ErrNoFiRows = errors.New("fi_pingpong printed no result rows")

// ParseFiPingpong reads the rows of fi_pingpong's table ("bytes #sent
// #ack total time MB/sec usec/xfer Mxfers/sec") from its output, where
// sizes and counts carry fabtests' suffixes (k, m, g: powers of 1024 for
// sizes, of 1000 for counts).
func ParseFiPingpong(lines []string) ([]FiResult, error) {
	var rs []FiResult
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 8 || !strings.HasPrefix(f[2], "=") {
			continue
		}
		size, err1 := scaled(f[0], 1024)
		iters, err2 := scaled(f[1], 1000)
		mbps, err3 := strconv.ParseFloat(f[5], 64)
		usec, err4 := strconv.ParseFloat(f[6], 64)
		if err := errors.Join(err1, err2, err3, err4); err != nil {
			return rs, fmt.Errorf("fi_pingpong row %q: %w", l, err)
		}
		rs = append(rs, FiResult{Bytes: f[0], Size: size, Iters: iters, MBps: mbps, UsecPerXfer: usec})
	}
	if len(rs) == 0 {
		return nil, ErrNoFiRows
	}
	return rs, nil
}

// scaled parses "12", "1.5k", "3m" with base per suffix step.
func scaled(s string, base float64) (int, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult = base
	case strings.HasSuffix(s, "m"):
		mult = base * base
	case strings.HasSuffix(s, "g"), strings.HasSuffix(s, "b"):
		mult = base * base * base
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	return int(v*mult + 0.5), nil
}

// labFiFiles lists what a fi_pingpong guest needs beside the dimmnet
// init: the host's fi_pingpong (libfabric-bin), the provider (built from
// this source tree unless given), their shared-library closure with the
// loader, and the kernel's virtio-net modules for the control link.
func labFiFiles(k kernel.Kernel, workDir, provider string, progress func(string, ...any)) (map[string]string, error) {
	fipp, err := exec.LookPath("fi_pingpong")
	if err != nil {
		return nil, errors.New("fi_pingpong not found: install Debian's libfabric-bin")
	}
	if provider == "" {
		progress("building the libfabric provider for the guests")
		if provider, err = ompi.BuildProvider(workDir); err != nil {
			return nil, fmt.Errorf("%w (or give --provider)", err)
		}
	}
	files, err := initramfs.Closure(fipp, provider)
	if err != nil {
		return nil, err
	}
	files[FiPingpongPath] = fipp
	files[FiProviderDir+"/libdimmnet-fi.so"] = provider
	mods, err := k.ModuleFiles(kernel.NetModules)
	if err != nil {
		return nil, fmt.Errorf("fi_pingpong's control link needs the kernel's virtio-net modules: %w", err)
	}
	for i, f := range mods {
		files[filepath.ToSlash(filepath.Join("lib", "modules", k.Version, kernel.NetModules[i]))] = f
	}
	return files, nil
}

// labFreeUDPPorts returns two loopback UDP ports free a moment ago, for
// the two ends of the guests' control link.
func labFreeUDPPorts() ([2]int, error) {
	var ports [2]int
	for i := range ports {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return ports, fmt.Errorf("find a free UDP port: %w", err)
		}
		defer c.Close() // both held until both are chosen, so they differ
		ports[i] = c.LocalAddr().(*net.UDPAddr).Port
	}
	return ports, nil
}

// labFiReport parses the client's fi_pingpong table and each guest's
// provider counts, and prints them (as JSON with --json).
func labFiReport(o Options, client, server []string, attach [2]string, took time.Duration, workDir string, progress func(string, ...any)) error {
	rs, err := ParseFiPingpong(client)
	if err != nil {
		return fmt.Errorf("guest 0: %w (console log %s)", err, filepath.Join(workDir, "guest0.log"))
	}
	rep := FiReport{Results: rs, Attach: attach}
	for i, lines := range [][]string{client, server} {
		for _, l := range lines {
			if strings.HasPrefix(l, "dimmnet-fi stats: ") {
				rep.Stats[i] = strings.TrimPrefix(l, "dimmnet-fi stats: ")
			}
		}
	}
	progress("both guests powered off after %.1f s; fi_pingpong checked every payload (-c); attached through %s by guest 0, %s by guest 1",
		took.Seconds(), attach[0], attach[1])
	progress("provider counts: guest 0 %s; guest 1 %s", rep.Stats[0], rep.Stats[1])
	if o.AsJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Println("fi_pingpong -p dimmnet -e rdm between two QEMU guests (TCG), each with a dimmnet device of one daemon")
	fmt.Printf("%8s %8s %12s %10s\n", "bytes", "iters", "usec/xfer", "MB/s")
	for _, r := range rs {
		fmt.Printf("%8s %8d %12.2f %10.2f\n", r.Bytes, r.Iters, r.UsecPerXfer, r.MBps)
	}
	fmt.Printf("logs in %s\n", workDir)
	return nil
}
