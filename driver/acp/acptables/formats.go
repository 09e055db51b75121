package acptables

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

type field struct {
	name string
	size int
}

type format struct {
	name   string
	stated int // the size the paper states
	fields []field
	note   string
}

var base = field{"basic (22)", 22}

// The paper's Tables 1 (Tofu) and 2 (UDP), field by field as printed.
var (
	paperTofuFormats = []format{
		{"basic", 22, []field{{"parallel process ID", 4}, {"command", 2}, {"rank", 4}, {"handle", 2}, {"status", 2}, {"reply data", 8}}, ""},
		{"COPY", 48, []field{base, {"parent rank", 4}, {"parent handle", 2}, {"GA_DST", 8}, {"GA_SRC", 8}, {"size", 4}}, ""},
		{"CAS4", 52, []field{base, {"parent rank", 4}, {"parent handle", 2}, {"GA_DST", 8}, {"GA_SRC", 8}, {"data 1", 4}, {"data 2", 4}}, ""},
		{"CAS8", 56, []field{base, {"parent rank", 4}, {"parent handle", 2}, {"GA_DST", 8}, {"GA_SRC", 8}, {"data 1", 8}, {"data 2", 8}}, ""},
		{"RMW4", 48, []field{base, {"parent rank", 4}, {"parent handle", 2}, {"GA_DST", 8}, {"GA_SRC", 8}, {"data", 4}}, ""},
		{"RMW8", 56, []field{base, {"parent rank", 4}, {"parent handle", 2}, {"GA_DST", 8}, {"GA_SRC", 8}, {"data", 8}}, ""},
	}
	paperUDPFormats = []format{
		{"COPY", 48, []field{{"TASK", 4}, {"TYPE", 4}, {"RANK", 4}, {"SEQ", 4}, {"PTR", 8}, {"DST", 8}, {"SRC", 8}, {"SIZE", 8}}, ""},
		{"CAS4", 48, []field{{"TASK", 4}, {"TYPE", 4}, {"RANK", 4}, {"SEQ", 4}, {"PTR", 8}, {"DST", 8}, {"SRC", 8}, {"OLD4", 4}, {"NEW4", 4}}, ""},
		{"CAS8", 56, []field{{"TASK", 4}, {"TYPE", 4}, {"RANK", 4}, {"SEQ", 4}, {"PTR", 8}, {"DST", 8}, {"SRC", 8}, {"OLD4", 8}, {"NEW8", 8}}, "its old value is printed OLD4(8): an 8-byte field named as the 4-byte one"},
		{"Atomic4", 44, []field{{"TASK", 4}, {"TYPE", 4}, {"RANK", 4}, {"SEQ", 4}, {"PTR", 8}, {"DST", 8}, {"VAL4", 4}}, "no SRC field, though the stated size includes 8 bytes for one"},
		{"Atomic8", 48, []field{{"TASK", 4}, {"TYPE", 4}, {"RANK", 4}, {"SEQ", 4}, {"PTR", 8}, {"DST", 8}, {"VAL8", 8}}, "no SRC field, though the stated size includes 8 bytes for one"},
		{"Put", 32, []field{{"TASK", 4}, {"TYPE", 4}, {"RANK", 4}, {"SEQ", 4}, {"PLEN", 8}, {"DST", 8}}, "32 + data"},
		{"ACK/NACK/RETRY", 16, []field{{"TASK", 4}, {"TYPE", 4}, {"RANK", 4}, {"SEQ", 4}}, ""},
		{"Read", 32, []field{{"TASK", 4}, {"TYPE/ID", 4}, {"RANK", 4}, {"LEN", 4}, {"PTR", 8}, {"DST", 8}}, ""},
		{"ReadACK", 32, []field{{"TASK", 4}, {"TYPE/ID", 4}, {"RANK", 4}, {"LEN", 4}, {"PTR", 8}, {"DST", 8}}, "32 + data"},
		{"Write", 32, []field{{"TASK", 4}, {"TYPE/ID", 4}, {"RANK", 4}, {"LEN", 4}, {"PTR", 8}, {"DST", 8}}, "32 + data"},
		{"END/WriteACK/EndACK", 24, []field{{"TASK", 4}, {"TYPE", 4}, {"RANK", 4}, {"reserve", 4}, {"SEQ", 4}}, ""},
	}
)

// ourFormats is driver/acp's one 64-byte delegation message (msg.go),
// the fields each type uses.
var ourFormats = []struct{ name, fields string }{
	{"COPY", "type 1, parent rank 4, parent handle 8, GA_DST 8, GA_SRC 8, size 8, epoch 4"},
	{"ATOMIC (CAS, SWAP, ADD, AND, OR, XOR; 4 or 8)", "type 1, op 1, width 1, parent rank 4, parent handle 8, GA_DST 8, GA_SRC 8, operand 8, CAS new 8, epoch 4"},
	{"PUT (an atomic's old value to a third rank)", "type 1, width 1, parent rank 4, parent handle 8, GA_DST 8, value 8, epoch 4"},
	{"END", "type 1, error code 1, parent rank 4, parent handle 8, value 8, epoch 4"},
	{"LANDED (a third-party copy's PUSH arrived)", "type 1, parent rank 4, parent handle 8, epoch 4"},
	{"DATA (a third-party copy of 1-16 bytes)", "type 1, parent rank 4, parent handle 8, GA_DST 8, bytes 0-7 8, size 8, bytes 8-15 8, epoch 4"},
	{"HELLO / HELLO_OK", "type 1, epoch 4, rank 4, layout check 8"},
	{"SYNC / RELEASE", "type 1, epoch 4, sequence 4"},
}

// PrintFormats writes the paper's formats with the sums of their fields
// (inconsistent rows marked) and ours.
func PrintFormats(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "paper format\tstated B\tsum of fields B\tcheck\tfields")
	pr := func(impl string, fs []format) {
		for _, f := range fs {
			sum := 0
			var names []string
			for _, x := range f.fields {
				sum += x.size
				names = append(names, fmt.Sprintf("%s %d", x.name, x.size))
			}
			check := "ok"
			if sum != f.stated {
				check = fmt.Sprintf("INCONSISTENT (%+d)", sum-f.stated)
			}
			if f.note != "" {
				check += "; " + f.note
			}
			fmt.Fprintf(tw, "%s %s\t%d\t%d\t%s\t%s\n", impl, f.name, f.stated, sum, check, strings.Join(names, ", "))
		}
	}
	pr("Tofu", paperTofuFormats)
	pr("UDP", paperUDPFormats)
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "ours: every delegation message is one 64-byte IPUSH (little-endian; layout in driver/acp/msg.go and docs/acp.md);")
	fmt.Fprintln(w, "the device's reliable link does the UDP layer's ACK/NACK/RETRY, sequence numbers and resends, and PUSH/PULL its Put, Read and Write")
	for _, f := range ourFormats {
		fmt.Fprintf(w, "  %-46s %s\n", f.name, f.fields)
	}
}
