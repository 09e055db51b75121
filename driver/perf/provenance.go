package perf

import "github.com/dimmnet/dimmnet/internal/provenance"

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

// CollectInfo is internal/provenance's Collect in this package's record
// shape: the facts come from the one place every --json record gets them.
func CollectInfo() Info {
	p := provenance.Collect()
	return Info{Version: p.Version, Revision: p.Revision, Modified: p.Modified, ABI: int(p.ABIVersion),
		CPUModel: p.CPUModel, Cores: p.Cores, Load: p.LoadAverage}
}

// LoadAverage is /proc/loadavg's three figures (zero where unreadable).
func LoadAverage() [3]float64 { return provenance.Collect().LoadAverage }
