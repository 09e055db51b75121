package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dimmnet/dimmnet/driver/conform"
	"github.com/dimmnet/dimmnet/driver/pingpong"
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
	sits := conform.Situations()
	if *only != "" {
		var pick []conform.Situation
		for _, n := range strings.Split(*only, ",") {
			found := false
			for _, s := range sits {
				if s.Name == n {
					pick, found = append(pick, s), true
				}
			}
			if !found {
				return fmt.Errorf("--only: no situation %q", n)
			}
		}
		sits = pick
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
	passed := 0
	for _, r := range res {
		if r.Pass {
			passed++
		}
	}
	if *asJSON {
		if err := pingpong.WriteJSON(os.Stdout, res); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "situation\tresult\tviolations\ttime")
		for _, r := range res {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f s\n", r.Situation, r.Verdict, r.Violations, r.Seconds)
		}
		tw.Flush()
		for _, r := range res {
			if !r.Pass {
				fmt.Printf("\n%s: %s\n", r.Situation, r.Verdict)
				for _, l := range r.Logged {
					fmt.Println("  " + l)
				}
				if r.Output != "" {
					fmt.Println("  the program's last lines:\n    " + strings.ReplaceAll(r.Output, "\n", "\n    "))
				}
			}
		}
		fmt.Printf("\n%d of %d situations passed\n", passed, len(res))
	}
	if passed != len(res) {
		return fmt.Errorf("%d of %d situations failed", len(res)-passed, len(res))
	}
	return nil
}
