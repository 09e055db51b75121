// Package subproc runs parts of a benchmark or test as separate processes
// of the same binary: a measurement across processes (two ends of a
// ping-pong, a relay in the middle) needs real processes, and re-running
// our own executable needs no second binary to build or find. A role is
// registered by name in an init function; Main, called first thing in
// main and in TestMain, runs the role the environment names and exits.
package subproc

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
)

// envRole names the role a re-executed process runs.
const envRole = "DIMMNET_SUBPROC"

var (
	mu    sync.Mutex
	roles = map[string]func(args []string) error{}
)

// Register makes fn runnable as role name in a child process. Call it from
// an init function, so the child has it before Main runs.
func Register(name string, fn func(args []string) error) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := roles[name]; dup {
		panic("subproc: role " + name + " registered twice")
	}
	roles[name] = fn
}

// Main runs the role this process was started for, if any, and exits with
// status 0 when it returns nil and 1 (after printing the error) otherwise.
// In a process not started by Command it returns at once.
func Main() {
	name := os.Getenv(envRole)
	if name == "" {
		return
	}
	os.Unsetenv(envRole) // the role's own children start clean
	mu.Lock()
	fn := roles[name]
	mu.Unlock()
	if fn == nil {
		fmt.Fprintf(os.Stderr, "subproc: no role %q in this binary\n", name)
		os.Exit(2)
	}
	args := []string{}
	if len(os.Args) > 1 {
		args = os.Args[1:]
	}
	if err := fn(args); err != nil {
		fmt.Fprintf(os.Stderr, "subproc %s: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Command prepares this executable to run role name with args. Stderr goes
// to ours, so a child's failure is seen; set Stdout, ExtraFiles and the
// rest before starting it. A test binary must call Main from TestMain.
func Command(name string, args ...string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("subproc %s: find own executable: %w", name, err)
	}
	c := exec.Command(self, args...)
	c.Env = append(os.Environ(), envRole+"="+name)
	c.Stderr = os.Stderr
	return c, nil
}
