package mpbench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// find returns the first record matching, or nil.
func find(recs []Record, lib, medium, test, buffer string, size, p int) *Record {
	for i := range recs {
		r := &recs[i]
		if r.Lib == lib && (medium == "" || r.Medium == medium) && r.Test == test && (buffer == "" || r.Buffer == buffer) && r.Size == size && r.P == p {
			return r
		}
	}
	return nil
}

func ratio(a, b *Record) string {
	if a == nil || b == nil || b.OnewayUS == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a.OnewayUS/b.OnewayUS)
}

func val(r *Record) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.OnewayUS)
}

func bw(r *Record) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", r.MBps)
}

// Print writes the tables: ping-pong beside raw PUSH and Open MPI, with
// ratios; Tables 1 and 2; collectives; stage counts.
func Print(out io.Writer, recs []Record, medium string) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "size\traw µs\tfmpl µs\tfmpl/raw\tfmpl host µs\tompi vader µs\tompi tcp µs\tompi-dimmnet µs\tfmpl/vader\tompi-dimmnet/fmpl\traw MB/s\tfmpl MB/s\tfmpl/raw MB/s\thost MB/s\thost/link\tvader MB/s\tompi-dimmnet MB/s\t\n")
	for i := range recs {
		r := &recs[i]
		if r.Lib != "raw" || r.Test != "pingpong" {
			continue
		}
		f := find(recs, "fmpl", medium, "pingpong", "link", r.Size, 2)
		h := find(recs, "fmpl", medium, "pingpong", "host", r.Size, 2)
		v := find(recs, "ompi", "vader", "pingpong", "", r.Size, 2)
		t := find(recs, "ompi", "tcp", "pingpong", "", r.Size, 2)
		d := find(recs, "ompi", "dimmnet", "pingpong", "", r.Size, 2)
		bwr := "-"
		if f != nil && r.MBps > 0 {
			bwr = fmt.Sprintf("%.2f", f.MBps/r.MBps)
		}
		hr := "-"
		if f != nil && h != nil && f.MBps > 0 {
			hr = fmt.Sprintf("%.2f", h.MBps/f.MBps)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Size, val(r), val(f), ratio(f, r), val(h), val(v), val(t), val(d), ratio(f, v), ratio(d, f), bw(r), bw(f), bwr, bw(h), hr, bw(v), bw(d))
	}
	tw.Flush()
	fmt.Fprintf(out, "\nTable 1, one 8-byte send and recv (µs, medians; paper: send 0.5 / 5.0 / 8.1, recv 0.5 / 6.1 / 5.6)\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "send\tinit\theader wait\tdata send\t\n")
	fmt.Fprintf(tw, "\t%s\t%s\t%s\t\n", val(find(recs, "fmpl", medium, "table1_send_init", "", 8, 2)), val(find(recs, "fmpl", medium, "table1_send_header_wait", "", 8, 2)), val(find(recs, "fmpl", medium, "table1_send_data", "", 8, 2)))
	fmt.Fprintf(tw, "recv\tinit\theader send\tdata receive\t\n")
	fmt.Fprintf(tw, "\t%s\t%s\t%s\t\n", val(find(recs, "fmpl", medium, "table1_recv_init", "", 8, 2)), val(find(recs, "fmpl", medium, "table1_recv_header_send", "", 8, 2)), val(find(recs, "fmpl", medium, "table1_recv_data", "", 8, 2)))
	fmt.Fprintf(tw, "device, one 8-byte PUSH (stamps)\tdescriptor to frame received\tplacement\tstatus\t\n")
	fmt.Fprintf(tw, "\t%s\t%s\t%s\t\n", val(find(recs, "raw", medium, "device_send_link", "", 8, 2)), val(find(recs, "raw", medium, "device_place", "", 8, 2)), val(find(recs, "raw", medium, "device_status", "", 8, 2)))
	tw.Flush()
	fmt.Fprintf(out, "\nTable 2, 600 pre-posted Irecvs of 4 bytes (µs; paper FMPL 7.03 / 9.90, MPI 370.1 / 945.8)\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "lib\torder\tgap@600\tgap@1\tgap600/gap1\tlatency\tlatency/blocking 8B\t\n")
	blocking := find(recs, "fmpl", medium, "pingpong", "link", 8, 2)
	for _, lib := range []struct{ lib, med string }{{"fmpl", medium}, {"ompi", "vader"}, {"ompi", "tcp"}, {"ompi", "dimmnet"}} {
		for _, o := range []string{"inorder", "reverse"} {
			r := find(recs, lib.lib, lib.med, "table2_"+o, "", 4, 2)
			if r == nil {
				continue
			}
			g1, gr, lr := "-", "-", "-"
			if r.Gap1US > 0 {
				g1, gr = fmt.Sprintf("%.2f", r.Gap1US), fmt.Sprintf("%.2f", r.GapUS/r.Gap1US)
			}
			if lib.lib == "fmpl" && blocking != nil {
				lr = fmt.Sprintf("%.2f", r.OnewayUS/blocking.OnewayUS)
			}
			fmt.Fprintf(tw, "%s %s\t%s\t%.2f\t%s\t%s\t%.2f\t%s\t\n", lib.lib, lib.med, o, r.GapUS, g1, gr, r.OnewayUS, lr)
		}
		in, rev := find(recs, lib.lib, lib.med, "table2_inorder", "", 4, 2), find(recs, lib.lib, lib.med, "table2_reverse", "", 4, 2)
		if in != nil && rev != nil && in.GapUS > 0 {
			fmt.Fprintf(tw, "%s %s\treverse/inorder gap\t%.2f\t\t\t\t\t\n", lib.lib, lib.med, rev.GapUS/in.GapUS)
		}
	}
	tw.Flush()
	fmt.Fprintf(out, "\nCollectives, µs per operation (roots rotating), fmpl over %s beside Open MPI\n", medium)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "op\tsize\tp\tfmpl\tvader\ttcp\tompi-dimmnet\tfmpl/vader\tfmpl/tcp\tompi-dimmnet/fmpl\t\n")
	for i := range recs {
		r := &recs[i]
		if r.Lib != "fmpl" || r.Medium != medium || (r.Test != "barrier" && r.Test != "bcast" && r.Test != "reduce") {
			continue
		}
		v, t := find(recs, "ompi", "vader", r.Test, "", r.Size, r.P), find(recs, "ompi", "tcp", r.Test, "", r.Size, r.P)
		d := find(recs, "ompi", "dimmnet", r.Test, "", r.Size, r.P)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Test, r.Size, r.P, val(r), val(v), val(t), val(d), ratio(r, v), ratio(r, t), ratio(d, r))
	}
	tw.Flush()
	fmt.Fprintf(out, "\nStages counted (rounds up/down per phase) against ceil(log2 p)\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "p\tceil(log2 p)\tbarrier\tbcast\treduce\t\n")
	for p := 1; p <= 64; p++ {
		b, c, r := find(recs, "fmpl", "", "stages_barrier", "", 0, p), find(recs, "fmpl", "", "stages_bcast", "", 0, p), find(recs, "fmpl", "", "stages_reduce", "", 0, p)
		if b == nil {
			continue
		}
		lg := 0
		for 1<<lg < p {
			lg++
		}
		st := func(r *Record) string {
			if r == nil || len(r.Stages) != 2 {
				return "-"
			}
			return fmt.Sprintf("%d/%d", r.Stages[0], r.Stages[1])
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t\n", p, lg, st(b), st(c), st(r))
	}
	tw.Flush()
}
