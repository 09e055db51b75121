package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dimmnet/dimmnet/internal/provenance"
)

// versionCmd prints this binary's provenance: what every --json record
// carries under "provenance".
func versionCmd(args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print it as a JSON record")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *asJSON {
		return provenance.NewEncoder(os.Stdout).Encode(struct{}{})
	}
	fmt.Print(provenance.Collect())
	return nil
}
