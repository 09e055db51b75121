package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/dimmnet/dimmnet/driver"
	"github.com/dimmnet/dimmnet/driver/pingpong"
	"github.com/dimmnet/dimmnet/vdev"
	"golang.org/x/sys/unix"
)

func pingpongCmd(args []string) error {
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the results as JSON records")
	breakdown := fs.Bool("breakdown", false, "print the Table 7 stage breakdown for 8-byte messages instead")
	maxSize := fs.Int("max", 1<<20, "largest message size in bytes")
	iters := fs.Int("iters", 0, "round trips per size (0: chosen per size)")
	payload := fs.Int("mtu", vdev.DefaultHubPayload, "packet payload of the in-memory link in bytes")
	quiet := fs.Bool("q", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *maxSize < 8 || *maxSize > 4<<20 {
		return fmt.Errorf("--max %d: must be 8..4194304", *maxSize)
	}
	l, err := vdev.NewLocal(vdev.Config{}, *payload, 1, 2)
	if err != nil {
		return err
	}
	defer l.Close()
	var sides [2]*pingpong.Side
	for i, dev := range l.Devices {
		d, err := driver.Open(driver.InProcess(dev.Region(), dev.DoorbellFD(), dev.InterruptFD()))
		if err != nil {
			return err
		}
		sides[i] = &pingpong.Side{D: d, Peer: l.Devices[1-i].Node()}
	}
	if err := pingpong.Setup(sides[0], sides[1], *maxSize); err != nil {
		return err
	}
	progress := progressLine(*quiet)
	defer progress("")
	if *breakdown {
		b, err := pingpong.Breakdown(sides[0], sides[1], *iters, progress)
		if err != nil {
			return err
		}
		progress("")
		if *asJSON {
			return writeJSON(os.Stdout, b)
		}
		pingpong.PrintBreakdown(os.Stdout, b)
		return nil
	}
	var res []pingpong.Result
	sizes := pingpong.Sizes(*maxSize)
	combos := [][2]string{{pingpong.ModePush, pingpong.CondLinkMem}, {pingpong.ModeIPush, pingpong.CondLinkMem},
		{pingpong.ModePush, pingpong.CondHostCopy}, {pingpong.ModeIPush, pingpong.CondHostCopy}}
	n := 0
	for _, size := range sizes {
		for _, c := range combos {
			n++
			progress(fmt.Sprintf("pingpong %d/%d: %s %s %s", n, len(sizes)*len(combos), c[0], c[1], sizeName(size)))
			warm, it := pingpong.Iters(size)
			if *iters > 0 {
				it = *iters
			}
			r, err := pingpong.Run(sides[0], sides[1], c[0], c[1], size, warm, it)
			if err != nil {
				return err
			}
			r.Path = "inprocess"
			res = append(res, r)
		}
	}
	if *asJSON {
		progress("")
		return writeJSON(os.Stdout, res)
	}
	progress("raw baselines: word ping-pong through shared memory, memcpy")
	raw := pingpong.RawWordPingPong(20000)
	cp := pingpong.RawMemcpy(min(*maxSize, 1<<20), 200)
	progress("")
	printTable(os.Stdout, res)
	printBaseline(os.Stdout, res, raw, cp)
	return nil
}

// printBaseline sets the smallest and largest rows beside the raw floor
// measured in the same run: a 64-bit word bounced between two goroutines
// through shared memory, and a plain memcpy.
func printBaseline(w io.Writer, res []pingpong.Result, raw, cp float64) {
	fmt.Fprintf(w, "\nraw baseline, same run: word ping-pong RTT/2 %.3f µs; memcpy %.0f MB/s\n", raw, cp)
	small, big := res[0].Size, res[len(res)-1].Size
	for _, r := range res {
		if r.Condition != pingpong.CondLinkMem {
			continue
		}
		switch r.Size {
		case small:
			fmt.Fprintf(w, "  %-5s %s %s: RTT/2 mean %.2f µs = %.1fx the raw word ping-pong; median %.2f µs = %.1fx\n",
				r.Mode, sizeName(r.Size), r.Condition, r.RTTHalfUs, r.RTTHalfUs/raw, r.RTTHalfP50Us, r.RTTHalfP50Us/raw)
		case big:
			fmt.Fprintf(w, "  %-5s %s %s: %.0f MB/s = %.2fx memcpy\n", r.Mode, sizeName(r.Size), r.Condition, r.MBps, r.MBps/cp)
		}
	}
}

// progressLine returns a function that shows progress on stderr: one line
// rewritten in place on a terminal, plain lines (a few) otherwise, nothing
// with quiet. An empty message clears the line.
func progressLine(quiet bool) func(string) {
	if quiet {
		return func(string) {}
	}
	if _, err := unix.IoctlGetTermios(int(os.Stderr.Fd()), unix.TCGETS); err == nil {
		return func(s string) { fmt.Fprintf(os.Stderr, "\r\033[K%s", s) }
	}
	last := time.Time{}
	return func(s string) {
		if s != "" && time.Since(last) > 2*time.Second {
			last = time.Now()
			fmt.Fprintln(os.Stderr, s)
		}
	}
}

func writeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

// printTable prints one row per size with RTT/2 and MB/s for each
// (mode, condition) pair, the paper's Figure 8 in numbers.
func printTable(w io.Writer, res []pingpong.Result) {
	type key struct {
		mode, cond string
		size       int
	}
	m := map[key]pingpong.Result{}
	var sizes []int
	for _, r := range res {
		if _, seen := m[key{pingpong.ModePush, pingpong.CondLinkMem, r.Size}]; !seen && r.Mode == pingpong.ModePush && r.Condition == pingpong.CondLinkMem {
			sizes = append(sizes, r.Size)
		}
		m[key{r.Mode, r.Condition, r.Size}] = r
	}
	fmt.Fprintln(w, "dimmnet ping-pong, embedded two-node in-process devices: RTT/2 in µs and bandwidth (size / RTT/2) in MB/s")
	fmt.Fprintln(w, "linkmem = Table 5 conditions (1)/(2): data left in link memory; hostcopy = conditions (3)/(4): status read and payload copied to host memory")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "size\tPUSH linkmem µs\tMB/s\tIPUSH linkmem µs\tMB/s\tPUSH hostcopy µs\tMB/s\tIPUSH hostcopy µs\tMB/s\t")
	for _, s := range sizes {
		fmt.Fprintf(tw, "%s\t", sizeName(s))
		for _, c := range [][2]string{{"push", "linkmem"}, {"ipush", "linkmem"}, {"push", "hostcopy"}, {"ipush", "hostcopy"}} {
			r := m[key{c[0], c[1], s}]
			fmt.Fprintf(tw, "%.2f\t%.1f\t", r.RTTHalfUs, r.MBps)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	fmt.Fprintln(w, "DIMMnet-2 hardware (paper): min RTT/2 1.74 (PUSH) / 1.78 (IPUSH) µs linkmem, 3.84 / 3.89 µs hostcopy; max 644 / 643 MB/s linkmem, 242 / 241 MB/s hostcopy")
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}
