// Package acptables regenerates the ACP and IPUSH papers' tables beside
// their numbers, for `dimmnet acp-tables`: memory per rank (the ACP
// paper's Tables 5 and 6, its text calls them 6 and 7) against what
// driver/acp allocates, the delegation formats (Tables 1 and 2) against
// ours, and the IPUSH paper's receive-area reduction (its Table 1) from
// communication skeletons of the six NPB kernels run on 64 devices.
package acptables

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/dimmnet/dimmnet/driver/acp"
)

// Ranks are the rank counts the memory table is printed for; 1M is 2^20.
var Ranks = []int{2, 1024, 1 << 20}

// paperRow is one of the paper's memory entries: fixed bytes plus bytes
// per rank and per registration.
type paperRow struct {
	use                    string
	fixed, perRank, perReg uint64
}

// The paper gives entries, not totals. Tofu: 262,144 + 68·P (+56 per
// registration). UDP: 649,728 + 18·P, counting the delegate station as the
// text's 225,792 bytes (48x64 resend + 3,480x64 execution), not the
// table's 1,504x64.
var (
	paperTofu = []paperRow{
		{"command queue / send / reply receive buffer (64 B x 4,096)", 262144, 0, 0},
		{"command receive buffers (64 B x P)", 0, 64, 0},
		{"registered memory table (40 B per registration)", 0, 0, 40},
		{"logical address search table (16 B per registration)", 0, 0, 16},
		{"Tofu address table (4 B x P)", 0, 4, 0},
	}
	paperUDP = []paperRow{
		{"command queue (80 B x 4,096)", 327680, 0, 0},
		{"command station (1,504 B x 64)", 96256, 0, 0},
		{"delegate station (text: 48x64 + 3,480x64)", 225792, 0, 0},
		{"listening IP/port (6 B x P)", 0, 6, 0},
		{"sequence numbers, send and receive (8 B x P)", 0, 8, 0},
		{"rank numbers (4 B x P)", 0, 4, 0},
	}
)

func sumPaper(rows []paperRow, p uint64) uint64 {
	var t uint64
	for _, r := range rows {
		t += r.fixed + r.perRank*p
	}
	return t
}

// human prints bytes the paper's way (K = 1,024).
func human(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// PrintMemory writes the paper's entries and ours for each of Ranks, with
// linkMem bytes of link memory per device (it sets the address split).
func PrintMemory(w io.Writer, linkMem uint64) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "memory per rank (no registrations; P ranks, 1M = 2^20)\tformula\t")
	head := "use\tgrowth\t"
	for _, p := range Ranks {
		head += fmt.Sprintf("P=%d\t", p)
	}
	fmt.Fprintln(tw, head)
	paper := func(name string, rows []paperRow) {
		for _, r := range rows {
			line := fmt.Sprintf("%s: %s\t%s\t", name, r.use, growth(r.fixed, r.perRank, r.perReg))
			for _, p := range Ranks {
				line += human(r.fixed+r.perRank*uint64(p)) + "\t"
			}
			fmt.Fprintln(tw, line)
		}
		line := fmt.Sprintf("%s: total\t\t", name)
		for _, p := range Ranks {
			line += human(sumPaper(rows, uint64(p))) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	paper("paper Tofu", paperTofu)
	paper("paper UDP", paperUDP)
	totals := make([]uint64, len(Ranks))
	var rows [][]acp.MemoryRow
	for _, p := range Ranks {
		r, err := acp.MemoryUse(p, acp.Options{}, linkMem)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	for i := range rows[0] {
		r := rows[0][i]
		where := "host"
		if r.Link {
			where = "link"
		}
		line := fmt.Sprintf("ours (%s): %s\t%s\t", where, r.Use, growth(r.Bytes-r.PerRank*uint64(Ranks[0]), r.PerRank, r.PerRegistration))
		for j := range Ranks {
			line += human(rows[j][i].Bytes) + "\t"
			totals[j] += rows[j][i].Bytes
		}
		fmt.Fprintln(tw, line)
	}
	line := "ours: total\t\t"
	for _, t := range totals {
		line += human(t) + "\t"
	}
	fmt.Fprintln(tw, line)
	line = "ours without the bounce buffer\t\t"
	for j, t := range totals {
		line += human(t-rows[j][len(rows[j])-2].Bytes) + "\t"
	}
	fmt.Fprintln(tw, line)
	return tw.Flush()
}

func growth(fixed, perRank, perReg uint64) string {
	s := ""
	if fixed != 0 {
		s = fmt.Sprintf("%d", fixed)
	}
	if perRank != 0 {
		if s != "" {
			s += " + "
		}
		s += fmt.Sprintf("%d·P", perRank)
	}
	if perReg != 0 {
		if s != "" {
			s += " + "
		}
		s += fmt.Sprintf("%d/reg", perReg)
	}
	return s
}
