package main

import (
	"flag"

	"github.com/dimmnet/dimmnet/lmmc/lmmcbench"
)

// lmmcBenchCmd runs LMMC's communication patterns with more ports than link
// page frames under each replacement policy, and the paper's own figures;
// --pcap records the whole run's traffic in one file to study its paging.
func lmmcBenchCmd(args []string) (rerr error) {
	fs := flag.NewFlagSet("lmmc-bench", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON records")
	check := fs.Bool("check", false, "checked devices: the LMMC manager's driver is held to the datasheet; a violation fails the run")
	ports := fs.Int("ports", 8, "ports per connection")
	frames := fs.Int("frames", 3, "receive frames per connected node (fewer than ports: it pages)")
	rounds := fs.Int("rounds", 120, "rounds of each pattern")
	size := fs.Int("size", 64, "message bytes")
	quiet := fs.Bool("q", false, "no progress line")
	pcapFile := fs.String("pcap", "", "capture every frame of every device of the run to this pcap file")
	linkName := fs.String("link", "", "also run every node as a process of its own over this medium (shm or udp), beside the run in one process")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return lmmcbench.Run(lmmcbench.Options{
		AsJSON:   *asJSON,
		Check:    *check,
		Ports:    *ports,
		Frames:   *frames,
		Rounds:   *rounds,
		Size:     *size,
		Progress: progressLine(*quiet),
		PcapFile: *pcapFile,
		Link:     *linkName,
	})
}
