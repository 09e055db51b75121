package main

import (
	"flag"
	"strings"

	"github.com/dimmnet/dimmnet/driver/collective"
	"github.com/dimmnet/dimmnet/driver/collective/fabricsim"
	"github.com/dimmnet/dimmnet/vdev/fabric"
)

// barrierCmd runs the RHiNET-2 paper's barrier and multicast orders on real
// devices hanging off a switch fabric in this process, and prints each
// beside what the fabric model predicts for the paper's cluster: the
// devices are software (µs per message where RHiNET-2 took 3), so the
// columns compare in ranking and spread, not in value.
func barrierCmd(args []string) error {
	fs := flag.NewFlagSet("barrier", flag.ContinueOnError)
	nodes := fs.Int("nodes", 64, "devices (must be the topology's host count)")
	topoName := fs.String("topology", "mesh4x4", "topology: "+strings.Join(fabric.TopologyNames, ", "))
	routing := fs.String("routing", "updown", "routing: "+strings.Join(fabric.RoutingNames, ", "))
	orders := fs.String("order", "all", "orders, comma-separated ("+strings.Join(collective.Orders, ", ")+") or all")
	barriers := fs.Int("barriers", 2000, "barriers timed per visiting list")
	multicasts := fs.Int("multicasts", 300, "multicasts timed per visiting list")
	size := fs.Int("size", 8, "multicast payload bytes")
	lists := fs.Int("lists", 3, "visiting lists per random order (the paper: 10)")
	seed := fs.Uint64("seed", 1, "seed of the random visiting lists")
	check := fs.Bool("check", false, "checked devices: the collective library's driver is held to the datasheet; a violation fails the run")
	rtc := fs.Bool("run-to-completion", false, "let each rank's goroutine run its own device (default: the engine serves all)")
	asJSON := fs.Bool("json", false, "print JSON records")
	quiet := fs.Bool("q", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return fabricsim.RunBarrier(fabricsim.BarrierOptions{
		Nodes:      *nodes,
		TopoName:   *topoName,
		Routing:    *routing,
		Orders:     *orders,
		Barriers:   *barriers,
		Multicasts: *multicasts,
		Size:       *size,
		Lists:      *lists,
		Seed:       *seed,
		Check:      *check,
		Rtc:        *rtc,
		AsJSON:     *asJSON,
		Progress:   progressLine(*quiet),
	})
}
