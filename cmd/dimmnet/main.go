// Command dimmnet is the one CLI of the project: it runs the embedded
// two-node ping-pong (and, in later issues, the daemon, the FUSE inspector
// and the VM lab).
package main

import (
	"fmt"
	"os"

	"github.com/dimmnet/dimmnet/internal/interrupt"
	"github.com/dimmnet/dimmnet/internal/subproc"
	"github.com/dimmnet/dimmnet/qemu/guest"
)

const usage = `usage: dimmnet <command> [flags]

commands:
  pingpong   two-node ping-pong: RTT/2 and bandwidth for PUSH and IPUSH
             (embedded in-process devices by default; --breakdown for the
             paper's Table 7 stage breakdown)

  perf       a device pair measured like a NIC: latency with its tails,
             windowed bandwidth and message rate (perftest, OSU), beside
             the raw floors and Open MPI in the same run; across hosts
             with perf serve / perf HOST; perf targets: issue 34's table

  serve      the backend daemon: devices in shared memory behind QEMU ivshmem
             server sockets (dimmnet serve [--dir DIR] --nodes N; the
             default DIR is $XDG_RUNTIME_DIR/dimmnet, /run/dimmnet for root)

  fs         mount a live /dev-like view of every device a daemon serves
             (dimmnet fs [--dir DIR] [--rw] MOUNTPOINT)
  stat       print a device's registers and counters (dimmnet stat [-w] [--json]
             [SOCK]; -w: every second, with each counter's rate; no SOCK:
             the default DIR's node0.sock, or inside a lab guest the PCI
             device)
  devices    every device a daemon serves (or a lab guest has), with node,
             state, ABI, features, MTU, MAX_INFLIGHT, sizes, link and peers,
             like ibv_devinfo -v (dimmnet devices [--dir DIR] [--json])
  trace      stream a daemon device's live trace, decoded: commands, statuses,
             doorbells, interrupts, frames, violations (dimmnet trace SOCK)
  conform    run a driver program against checked devices in every situation
             a driver must survive (dimmnet conform -- CMD ARGS)
  lab        two QEMU guests with a device each: dimmnet lab pingpong|shell
  lmmc-bench LMMC remote paging: faults and write latencies per policy and pattern
  fabric-bench
             the RHiNET-2 multicast paper's Tables 2-5 on the switch-fabric
             model beside the paper's numbers (plots: dimmnet-plot on --json)
  barrier    the paper's barrier and multicast orders on 64 real devices
             behind a switch fabric, beside the model (dimmnet barrier
             --nodes 64 --topology mesh4x4 --routing updown --order shio)
  mpbench    FMPL message passing beside raw PUSH and Open MPI (dimmnet mpbench -np N; or under mpirun)
  acp-bench  ACP global memory copies and atomics between rank processes
             beside OpenSHMEM and MPI one-sided (osc pt2pt)
  acp-tables the ACP paper's memory and format tables and the IPUSH
             paper's receive-area table, regenerated beside the papers'
  version    this build's provenance (module, VCS revision, Go, ABI, CPU,
             cores, load average): what every --json record carries

run "dimmnet <command> -h" for a command's flags.
`

// commands are the CLI's commands by name, each parsing its own flags.
var commands = map[string]func(args []string) error{
	"pingpong": pingpongCmd, "perf": perfCmd, "serve": serveCmd, "fs": fsCmd, "stat": statCmd,
	"devices": devicesCmd, "trace": traceCmd, "conform": conformCmd, "lab": labCmd,
	"lmmc-bench": lmmcBenchCmd, "fabric-bench": fabricBenchCmd, "barrier": barrierCmd,
	"mpbench": mpbenchCmd, "acp-bench": acpBenchCmd, "acp-tables": acpTablesCmd, "version": versionCmd,
}

func main() {
	subproc.Main()        // a child this binary started to be one end of a measurement
	if os.Getpid() == 1 { // /init of a lab guest
		guest.Init()
	}
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	}
	cmd, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "dimmnet: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	err := cmd(os.Args[2:])
	if interrupt.Signaled() {
		// The measurement stopped first, then everything was torn down.
		fmt.Fprintf(os.Stderr, "dimmnet %s: interrupted; devices and links torn down\n", os.Args[1])
		os.Exit(interrupt.ExitCode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dimmnet %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}
