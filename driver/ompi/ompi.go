// Package ompi is Open MPI as a peer of the project's benchmarks: it
// builds their C programs with Open MPI's compiler wrappers and runs them
// under mpirun on this host, over Open MPI's own transports (vader, tcp)
// or over dimmnet through the project's libfabric provider (driver/ofi),
// so mpbench, acp-bench and perf compare the same program on each wire
// with one build and one launch.
package ompi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoMPI reports a machine without the Open MPI compiler wrapper or
// launcher a job needs (Debian: openmpi-bin, libopenmpi-dev).
var ErrNoMPI = errors.New("ompi: Open MPI (its compiler wrapper or launcher) not found")

// ErrNoProvider reports that the dimmnet libfabric provider cannot be
// built here (no libfabric-dev, or not run from the source tree).
var ErrNoProvider = errors.New("ompi: the dimmnet libfabric provider cannot be built")

// Build compiles the C program src with the compiler wrapper cc ("mpicc",
// "oshcc") into dir/name, with flags after the source ("-lm"), and
// returns the program's path.
func Build(dir, cc, name, src string, flags ...string) (string, error) {
	path, err := exec.LookPath(cc)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoMPI, err)
	}
	f := filepath.Join(dir, name+".c")
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	args := append([]string{"-O2", "-o", bin, f}, flags...)
	if out, err := exec.Command(path, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s", cc, name, err, out)
	}
	return bin, nil
}

// Transport is how Open MPI moves the job's messages: MCA parameters
// (name, value pairs) and environment variables its ranks need.
type Transport struct {
	Name string   // vader, tcp, dimmnet: what the programs print as the medium
	MCA  []string // pairs: "btl", "self,vader"
	Env  []string // NAME=value, exported to the ranks with -x
}

// Vader is Open MPI's shared-memory transport (pml ob1).
var Vader = Transport{Name: "vader", MCA: []string{"btl", "self,vader"}}

// TCP is Open MPI's TCP transport (pml ob1), over loopback on one host.
var TCP = Transport{Name: "tcp", MCA: []string{"btl", "self,tcp"}}

// Dimmnet is Open MPI over dimmnet: pml cm with mtl ofi, libfabric
// restricted to the provider in providerDir (BuildProvider), each rank
// embedding its device on the shared-memory link as a provider endpoint
// does (docs/ofi.md).
func Dimmnet(providerDir string) Transport {
	return Transport{Name: "dimmnet",
		MCA: []string{"pml", "cm", "mtl", "ofi", "mtl_ofi_provider_include", "dimmnet"},
		Env: []string{"FI_PROVIDER_PATH=" + providerDir}}
}

// Job is one mpirun (or oshrun) of prog on NP ranks of this host.
type Job struct {
	Launcher string // "" is mpirun
	NP       int
	T        Transport
	MCA      []string // more pairs, after the transport's
	Env      []string // more NAME=value for the launcher's environment (not exported)
	Prog     string
	Args     []string
}

// Limit bounds one job: a hang (a rank that never started) ends as an
// error instead of holding the run for ever. A bound, not a measurement.
const Limit = 10 * time.Minute

// Run runs j and returns its standard output. Root may run it
// (containers, CI) and ranks may outnumber cores.
func Run(j Job) ([]byte, error) {
	launcher := j.Launcher
	if launcher == "" {
		launcher = "mpirun"
	}
	if _, err := exec.LookPath(launcher); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoMPI, err)
	}
	a := []string{"--allow-run-as-root", "--oversubscribe", "-np", strconv.Itoa(j.NP)}
	mca := append(append([]string{}, j.T.MCA...), j.MCA...)
	for i := 0; i+1 < len(mca); i += 2 {
		a = append(a, "--mca", mca[i], mca[i+1])
	}
	for _, e := range j.T.Env {
		name, _, _ := strings.Cut(e, "=")
		a = append(a, "-x", name)
	}
	a = append(append(a, j.Prog), j.Args...)
	ctx, cancel := context.WithTimeout(context.Background(), Limit)
	defer cancel()
	c := exec.CommandContext(ctx, launcher, a...)
	var stderr bytes.Buffer
	c.Stderr = &stderr
	c.Env = append(append(os.Environ(), j.T.Env...), j.Env...)
	out, err := c.Output()
	if err != nil {
		return out, fmt.Errorf("%s over %s: %v: %s", launcher, j.T.Name, err, stderr.String())
	}
	return out, nil
}

// ProviderBuild is the README's build of the provider, run in the
// module's root with the output path and ./driver/ofi appended.
var ProviderBuild = []string{"go", "build", "-tags", "dimmnet_ofi", "-buildmode=c-shared",
	"-ldflags=-extldflags=-Wl,-z,nodelete", "-o"}

// BuildProvider builds libdimmnet-fi.so into dir from the source tree
// this process runs in (go list -m finds the module) and returns its
// path; FI_PROVIDER_PATH names its directory. It needs libfabric's
// headers (ErrNoProvider names what is missing).
func BuildProvider(dir string) (string, error) {
	if _, err := os.Stat("/usr/include/rdma/providers/fi_prov.h"); err != nil {
		return "", fmt.Errorf("%w: no libfabric headers (Debian: libfabric-dev)", ErrNoProvider)
	}
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("%w: no module to build it from (run from the source tree): %v", ErrNoProvider, err)
	}
	so := filepath.Join(dir, "libdimmnet-fi.so")
	cmd := exec.Command(ProviderBuild[0], append(ProviderBuild[1:], so, "./driver/ofi")...)
	cmd.Dir = strings.TrimSpace(string(root))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %v\n%s", ErrNoProvider, err, b)
	}
	return so, nil
}
