// Package flakehunt runs the README's test command again and again, once
// beside a CPU hog, and lists every test that failed in any run with its
// message. A test that fails only when the machine is busy or when other
// packages run beside it fails a new user's first `go test` and a good
// change's CI, and one run on a quiet machine never shows it.
package flakehunt

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Event is one line of `go test -json` (cmd/test2json's TestEvent).
type Event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// Failure is one test (or package, when Test is empty: a build failure,
// panic or timeout) that failed in one run.
type Failure struct {
	Run     string // "1", "2", ... or "hog"
	Package string
	Test    string
	Message []string // the failing test's own output lines, log lines first
}

// Parse reads `go test -json` output and returns every failed test with
// the output it printed. A subtest's failure also fails its parent; only
// the innermost is reported, so one cause is one row.
func Parse(r io.Reader, run string) ([]Failure, error) {
	out := map[testKey][]string{}
	var failed []testKey
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e Event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line the test binary printed before test2json framed it
		}
		k := testKey{e.Package, e.Test}
		switch e.Action {
		case "output":
			out[k] = append(out[k], e.Output)
		case "fail":
			failed = append(failed, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read go test output: %w", err)
	}
	var fs []Failure
	for _, k := range failed {
		if k.test == "" && hasTestFailure(failed, k.pkg) {
			continue // the package failed because a test did
		}
		if k.test != "" && hasSubFailure(failed, k) {
			continue
		}
		fs = append(fs, Failure{Run: run, Package: k.pkg, Test: k.test, Message: message(out[k])})
	}
	return fs, nil
}

// testKey names a test within its package (test empty: the package).
type testKey struct{ pkg, test string }

func hasTestFailure(failed []testKey, pkg string) bool {
	for _, f := range failed {
		if f.pkg == pkg && f.test != "" {
			return true
		}
	}
	return false
}

func hasSubFailure(failed []testKey, k testKey) bool {
	for _, f := range failed {
		if f.pkg == k.pkg && strings.HasPrefix(f.test, k.test+"/") {
			return true
		}
	}
	return false
}

// message keeps the lines that say why: the test's log lines, panics and
// build errors, without the === RUN / --- FAIL framing.
func message(lines []string) []string {
	var m []string
	for _, l := range lines {
		t := strings.TrimRight(l, "\n")
		s := strings.TrimSpace(t)
		if s == "" || strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- FAIL") ||
			strings.HasPrefix(s, "--- PASS") || s == "FAIL" || s == "PASS" || strings.HasPrefix(s, "FAIL\t") {
			continue
		}
		m = append(m, s)
		if len(m) == 12 {
			m = append(m, "...")
			break
		}
	}
	return m
}

// Options say how many runs and with what environment.
type Options struct {
	Runs    int      // back-to-back runs of the test command
	Hog     bool     // one more run beside a process spinning on one CPU
	Args    []string // go test arguments; default: -race ./...
	Env     []string // added to the environment (e.g. DIMMNET_VM_TESTS=1)
	Dir     string   // the module's root
	Log     io.Writer
	HogSelf string // this executable, re-run with HogFlag to hog a CPU
}

// HogFlag is the argument with which the hunt's own executable becomes
// the CPU hog (so the hog needs no second program).
const HogFlag = "-flakehunt-hog"

// Hog spins on the first CPU this process may use until killed. It is
// what a busy machine looks like to the tests: one core taken.
func Hog() {
	runtime.LockOSThread()
	var s unix.CPUSet
	if unix.SchedGetaffinity(0, &s) == nil {
		for c := 0; c < 1024; c++ {
			if s.IsSet(c) {
				var one unix.CPUSet
				one.Set(c)
				_ = unix.SchedSetaffinity(0, &one)
				break
			}
		}
	}
	for x := uint64(0); ; x++ {
		if x == 0 {
			runtime.Gosched()
		}
	}
}

// Result is what a hunt found: every failure, and each run's duration.
type Result struct {
	Failures []Failure
	Runs     []RunInfo
}

// RunInfo is one run of the test command.
type RunInfo struct {
	Name     string
	Duration time.Duration
	Failed   int
	Load     string // the load average when it ended
}

// Hunt runs the test command o.Runs times back to back, then once beside a
// CPU hog when o.Hog, and gathers every failure.
func Hunt(o Options) (Result, error) {
	var res Result
	args := o.Args
	if len(args) == 0 {
		args = []string{"-race", "./..."}
	}
	names := []string{}
	for i := 1; i <= o.Runs; i++ {
		names = append(names, fmt.Sprint(i))
	}
	if o.Hog {
		names = append(names, "hog")
	}
	for _, name := range names {
		var hog *exec.Cmd
		if name == "hog" {
			hog = exec.Command(o.HogSelf, HogFlag)
			if err := hog.Start(); err != nil {
				return res, fmt.Errorf("start CPU hog: %w", err)
			}
		}
		start := time.Now()
		fs, err := runOnce(o, args, name)
		if hog != nil {
			_ = hog.Process.Kill()
			_ = hog.Wait()
		}
		if err != nil {
			return res, err
		}
		ri := RunInfo{Name: name, Duration: time.Since(start), Failed: len(fs), Load: loadavg()}
		res.Runs = append(res.Runs, ri)
		res.Failures = append(res.Failures, fs...)
		if o.Log != nil {
			fmt.Fprintf(o.Log, "run %s: %d failed in %s (load %s)\n", name, len(fs), ri.Duration.Round(time.Second), ri.Load)
			for _, f := range fs { // as they come: a long hunt stopped early still tells
				fmt.Fprintf(o.Log, "  %s %s: %s\n", f.Package, f.Test, strings.Join(f.Message, " / "))
			}
		}
	}
	return res, nil
}

// runOnce runs `go test -json ARGS` with -count=1 (a cached pass proves
// nothing about flakes) and parses what failed.
func runOnce(o Options, args []string, name string) ([]Failure, error) {
	full := append([]string{"test", "-json", "-count=1"}, args...)
	cmd := exec.Command("go", full...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), o.Env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("go test pipe: %w", err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start go test: %w", err)
	}
	fs, perr := Parse(stdout, name)
	werr := cmd.Wait()
	if perr != nil {
		return nil, perr
	}
	if werr != nil && len(fs) == 0 {
		// go test failed and no test or package said why (a build or vet
		// failure reported on stderr only): that is a failure too.
		fs = append(fs, Failure{Run: name, Package: "(go test)", Message: message(strings.SplitAfter(stderr.String(), "\n"))})
	}
	return fs, nil
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// Table prints the failures grouped by test: how many runs it failed in,
// which, and the first message, as a Markdown table for the closing note.
func (r Result) Table(w io.Writer) {
	fmt.Fprintln(w, "| run | duration | failed | load at end |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, ri := range r.Runs {
		fmt.Fprintf(w, "| %s | %s | %d | %s |\n", ri.Name, ri.Duration.Round(time.Second), ri.Failed, ri.Load)
	}
	if len(r.Failures) == 0 {
		fmt.Fprintln(w, "\nno test failed in any run")
		return
	}
	type row struct {
		pkg, test string
		runs      []string
		msg       []string
	}
	byKey := map[string]*row{}
	for _, f := range r.Failures {
		k := f.Package + " " + f.Test
		if byKey[k] == nil {
			byKey[k] = &row{pkg: f.Package, test: f.Test, msg: f.Message}
		}
		byKey[k].runs = append(byKey[k].runs, f.Run)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(w, "\n| package | test | failed in runs | message |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, k := range keys {
		r := byKey[k]
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.pkg, r.test, strings.Join(r.runs, ", "),
			strings.ReplaceAll(strings.Join(r.msg, " / "), "|", `\|`))
	}
}
