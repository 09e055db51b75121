package perf

import (
	"bufio"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/dimmnet/dimmnet/uapi"
)

// Info is where and with what a record was measured: figures from a
// shared two-core machine mean little without the build, the CPU and the
// load beside them.
type Info struct {
	Version  string     `json:"version,omitempty"`
	Revision string     `json:"revision,omitempty"`
	Modified bool       `json:"modified,omitempty"`
	ABI      int        `json:"abi"`
	CPUModel string     `json:"cpu_model,omitempty"`
	Cores    int        `json:"cores"`
	Load     [3]float64 `json:"load"`
}

// CollectInfo reads the build's module version and VCS revision, the ABI
// version, the CPU model, the cores and the load average now.
func CollectInfo() Info {
	in := Info{ABI: int(uapi.ABIVersion), Cores: runtime.NumCPU()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		in.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				in.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	in.Load = LoadAverage()
	return in
}

// LoadAverage is /proc/loadavg's three figures (zero where unreadable).
func LoadAverage() [3]float64 {
	var l [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return l
	}
	for i, f := range strings.Fields(string(b)) {
		if i == 3 {
			break
		}
		l[i], _ = strconv.ParseFloat(f, 64)
	}
	return l
}
