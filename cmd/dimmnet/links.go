package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dimmnet/dimmnet/vdev/link/auth"
)

// rankFlags adds --key and --check to a command whose ranks are other
// processes (mpbench, acp-bench).
func rankFlags(fs *flag.FlagSet) (keyFile *string, check *bool) {
	keyFile = fs.String("key", "", "authenticate every frame between the ranks' devices with this pre-shared key file (passed to the ranks as DIMMNET_KEY; under mpirun, export DIMMNET_KEY instead)")
	check = fs.Bool("check", false, "checked devices: a rank whose library breaks the datasheet fails (DIMMNET_CHECK=1 for the ranks)")
	return keyFile, check
}

// setRankEnv hands --key and --check to the rank processes, which read
// them from the environment (driver/ranks), as ranks an outside launcher
// starts do.
func setRankEnv(keyFile string, check bool) error {
	if keyFile != "" {
		p, err := filepath.Abs(keyFile)
		if err != nil {
			return err
		}
		if _, err := auth.LoadKey(p); err != nil { // refuse a weak key here, not in every rank
			return fmt.Errorf("--key: %w", err)
		}
		os.Setenv("DIMMNET_KEY", p)
	}
	if check {
		os.Setenv("DIMMNET_CHECK", "1")
	}
	return nil
}
