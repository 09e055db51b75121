package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/dimmnet/dimmnet/driver/acp/acpbench"
	"github.com/dimmnet/dimmnet/driver/acp/acptables"
)

// acpTablesCmd regenerates the ACP paper's memory and format tables and
// the IPUSH paper's receive-area table beside the papers' numbers.
func acpTablesCmd(args []string) error {
	fs := flag.NewFlagSet("acp-tables", flag.ContinueOnError)
	ranks := fs.Int("ranks", 64, "ranks of the receive-area skeletons")
	linkMem := fs.Uint64("linkmem", 62<<20, "link memory bytes per device (sets the global address split)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := acptables.PrintMemory(os.Stdout, *linkMem); err != nil {
		return err
	}
	fmt.Println()
	acptables.PrintFormats(os.Stdout)
	fmt.Println()
	fmt.Printf("IPUSH receive area (IPUSH paper Table 1): NPB skeletons on %d devices\n", *ranks)
	return acptables.PrintReceiveArea(os.Stdout, acpbench.LocalDevices, *ranks)
}
