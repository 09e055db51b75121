// Package provenance says where a measurement or a verdict came from: the
// build (module version, VCS revision, Go version), the ABI, and the
// machine (CPU model, cores, load average). Every command's --json records
// carry it from here, so a figure read months later says what produced it
// and how busy the machine was (figures on a shared 2-core machine are
// noise without the load average beside them).
package provenance

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/dimmnet/dimmnet/internal/loadavg"
	"github.com/dimmnet/dimmnet/uapi"
)

// Info is the provenance of one run. Medium and Binding are per-run facts
// that Collect cannot know: the command that knows them fills them in.
type Info struct {
	Module      string     `json:"module"`                 // main module path
	Version     string     `json:"module_version"`         // its version ("(devel)" for a local build)
	Revision    string     `json:"vcs_revision,omitempty"` // the VCS commit it was built from
	Modified    bool       `json:"vcs_modified"`           // built from a tree with uncommitted changes
	GoVersion   string     `json:"go_version"`
	ABIVersion  uint64     `json:"abi_version"`
	CPUModel    string     `json:"cpu_model"`
	Cores       int        `json:"cores"`
	LoadAverage [3]float64 `json:"load_average"`      // 1, 5 and 15 minutes, when the record was made
	Medium      string     `json:"medium,omitempty"`  // the link medium a run used (shm, udp, ...)
	Binding     string     `json:"binding,omitempty"` // how the run's threads were bound to CPUs
}

// Collect gathers what this process can learn itself. Nothing in it
// fails: a field it cannot learn is left empty.
func Collect() Info {
	in := Info{GoVersion: runtime.Version(), ABIVersion: uapi.ABIVersion, Cores: runtime.NumCPU()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		in.Module, in.Version = bi.Main.Path, bi.Main.Version
		if in.Module == "" && bi.Path != "" { // a test binary: its package
			in.Module = bi.Path
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Revision = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			}
		}
	}
	in.CPUModel = cpuModel("/proc/cpuinfo")
	in.LoadAverage, _ = loadavg.Read()
	return in
}

// cpuModel is the first "model name" of a cpuinfo file (x86), or the
// first of the keys other architectures use.
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	return parseCPUModel(f)
}

func parseCPUModel(r io.Reader) string {
	sc := bufio.NewScanner(r)
	found := map[string]string{}
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, seen := found[k]; !seen {
			found[k] = strings.TrimSpace(v)
		}
	}
	for _, k := range []string{"model name", "Model", "cpu model", "cpu", "CPU part"} {
		if v := found[k]; v != "" {
			return v
		}
	}
	return ""
}

// String is Info for people: one line per fact, as `dimmnet version` prints it.
func (in Info) String() string {
	var b strings.Builder
	rev := in.Revision
	if rev == "" {
		rev = "unknown"
	}
	if in.Modified {
		rev += " (modified)"
	}
	fmt.Fprintf(&b, "module      %s %s\n", in.Module, in.Version)
	fmt.Fprintf(&b, "revision    %s\n", rev)
	fmt.Fprintf(&b, "go          %s\n", in.GoVersion)
	fmt.Fprintf(&b, "abi         %d\n", in.ABIVersion)
	fmt.Fprintf(&b, "cpu         %s, %d cores\n", in.CPUModel, in.Cores)
	fmt.Fprintf(&b, "load        %.2f %.2f %.2f\n", in.LoadAverage[0], in.LoadAverage[1], in.LoadAverage[2])
	if in.Medium != "" {
		fmt.Fprintf(&b, "medium      %s\n", in.Medium)
	}
	if in.Binding != "" {
		fmt.Fprintf(&b, "binding     %s\n", in.Binding)
	}
	return b.String()
}

// Key is the field every stamped record carries its provenance in.
const Key = "provenance"

// Encoder writes JSON records, one a line, each with Key added: the one
// place every command's --json output gets its provenance from. A record
// is any value that encodes as a JSON object; a slice of them is written
// as one array whose objects each carry it.
type Encoder struct {
	enc *json.Encoder
	// Info is what each record carries; the load average is taken again
	// at most once a second (a long run's load changes; a trace's records
	// come by the thousand).
	Info   Info
	loadAt time.Time
}

// NewEncoder returns an Encoder writing to w with Collect's Info.
func NewEncoder(w io.Writer) *Encoder {
	return &Encoder{enc: json.NewEncoder(w), Info: Collect(), loadAt: time.Now()}
}

// SetIndent indents the output as json.Encoder's does.
func (e *Encoder) SetIndent(prefix, indent string) { e.enc.SetIndent(prefix, indent) }

// Encode writes v with the provenance added.
func (e *Encoder) Encode(v any) error {
	if time.Since(e.loadAt) >= time.Second {
		if la, err := loadavg.Read(); err == nil {
			e.Info.LoadAverage = la
		}
		e.loadAt = time.Now()
	}
	out, err := Stamp(v, e.Info)
	if err != nil {
		return err
	}
	return e.enc.Encode(out)
}

// Stamp returns v as JSON with in added under Key to the object it
// encodes to, or to every object of the array it encodes to. A value that
// is neither is an error: a record must be an object to carry fields.
func Stamp(v any, in Info) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("provenance: encode record: %w", err)
	}
	p, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	// Appended as the last field, by hand, so the record keeps its own
	// field order (a map would sort the keys).
	stamp := func(obj json.RawMessage) (json.RawMessage, error) {
		obj = bytes.TrimSpace(obj)
		if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
			return nil, fmt.Errorf("provenance: a record must be a JSON object, not %.40s", obj)
		}
		out := append([]byte(nil), obj[:len(obj)-1]...)
		if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
			out = append(out, ',')
		}
		out = append(out, `"`+Key+`":`...)
		out = append(out, p...)
		return append(out, '}'), nil
	}
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if err := json.Unmarshal(b, &arr); err != nil {
			return nil, err
		}
		for i := range arr {
			if arr[i], err = stamp(arr[i]); err != nil {
				return nil, err
			}
		}
		return json.Marshal(arr)
	}
	return stamp(b)
}
