package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/dimmnet/dimmnet/driver/conform"
)

// conformCmd runs a user's driver program once per situation against a
// checked device pair and prints the verdicts.
func conformCmd(args []string) error {
	fs := flag.NewFlagSet("conform", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the verdicts as JSON records")
	limit := fs.Duration("limit", 30*time.Second, "each situation's time limit: a program still running then is killed and reported hung")
	only := fs.String("only", "", "run only these situations (comma-separated names)")
	quiet := fs.Bool("q", false, "no progress line")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: dimmnet conform [flags] -- CMD ARGS\n\nruns CMD once per situation with the socket directory in DIMMNET_DIR (devices node0.sock and node1.sock); situations:")
		for _, s := range conform.Situations() {
			fmt.Fprintf(fs.Output(), "  %-17s %s\n", s.Name, s.What)
		}
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return errors.New("no driver program given")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	sits, err := conform.Pick(*only)
	if err != nil {
		return fmt.Errorf("--only: %w", err)
	}
	progress := progressLine(*quiet)
	res, err := conform.Run(conform.Config{
		Daemon:  func(a ...string) *exec.Cmd { return exec.Command(self, append([]string{"serve"}, a...)...) },
		Limit:   *limit,
		Program: fs.Args(),
	}, sits, progress)
	progress("")
	if err != nil {
		return err
	}
	return conform.Report(os.Stdout, res, *asJSON)
}
