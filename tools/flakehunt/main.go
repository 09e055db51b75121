// Command flakehunt runs the README's test command several times back to
// back and once beside a CPU hog, and prints every test that failed in
// any run with its message (a Markdown table). Run it as root from the
// module's root, so the namespace, TAP and AF_PACKET tests run too:
//
//	go run ./tools/flakehunt -runs 5 -hog
//
// It exits 1 when any test failed. See internal/flakehunt.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/dimmnet/dimmnet/internal/flakehunt"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == flakehunt.HogFlag {
		flakehunt.Hog()
	}
	runs := flag.Int("runs", 5, "back-to-back runs of the test command")
	hog := flag.Bool("hog", true, "one more run beside a process spinning on one CPU")
	env := flag.String("env", "", "comma-separated VAR=value added to the tests' environment (e.g. DIMMNET_VM_TESTS=1)")
	flag.Parse()
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flakehunt:", err)
		os.Exit(2)
	}
	o := flakehunt.Options{Runs: *runs, Hog: *hog, Args: flag.Args(), Dir: ".", Log: os.Stderr, HogSelf: self}
	if *env != "" {
		o.Env = strings.Split(*env, ",")
	}
	res, err := flakehunt.Hunt(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flakehunt:", err)
		os.Exit(2)
	}
	res.Table(os.Stdout)
	if len(res.Failures) > 0 {
		os.Exit(1)
	}
}
