package acpbench

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// find returns the record of op by path on medium.
func find(recs []Record, op, path, medium string) (Record, bool) {
	for _, r := range recs {
		if r.Operation == op && r.Path == path && r.Medium == medium {
			return r, true
		}
	}
	return Record{}, false
}

func cell(r Record, ok bool) string {
	if !ok {
		return "-"
	}
	if r.Bytes >= 1<<20 {
		return fmt.Sprintf("%.1f (%.0f MB/s)", r.US, r.MBps)
	}
	return fmt.Sprintf("%.2f", r.US)
}

func ratio(a Record, aok bool, b Record, bok bool) string {
	if !aok || !bok || b.US == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a.US/b.US)
}

// Print writes the table: ours beside each peer with the ratio ours/peer
// (below 1: we are faster), then the targets.
func Print(w io.Writer, recs []Record, link string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "operation\tpath\tACP %s µs\toshmem shm\tratio\tosc pt2pt shm\tratio\tosc pt2pt tcp\tratio\toshmem tcp\tratio\tosc pt2pt ompi-dimmnet\tratio\n", link)
	for _, op := range []string{"copy-out-8", "copy-in-8", "third-party-copy-8", "fetch-add-8", "cas-8", "copy-out-1M", "copy-in-1M"} {
		for _, path := range []string{"device", "delegated"} {
			a, ok := find(recs, op, path, link)
			if !ok {
				continue
			}
			peer := op
			if op == "third-party-copy-8" {
				peer = "copy-in-8" // the peers have no third-party copy: the delegate's own PULL
			}
			if op == "copy-out-1M" {
				peer = "copy-in-1M"
			}
			os, osok := find(recs, peer, "oshmem", "shm")
			ms, msok := find(recs, peer, "mpi-osc-pt2pt", "shm")
			mt, mtok := find(recs, peer, "mpi-osc-pt2pt", "tcp")
			ot, otok := find(recs, peer, "oshmem", "tcp")
			md, mdok := find(recs, peer, "mpi-osc-pt2pt", "dimmnet")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", op, path, cell(a, ok), cell(os, osok), ratio(a, ok, os, osok),
				cell(ms, msok), ratio(a, ok, ms, msok), cell(mt, mtok), ratio(a, ok, mt, mtok), cell(ot, otok), ratio(a, ok, ot, otok), cell(md, mdok), ratio(a, ok, md, mdok))
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "targets (docs/acp.md):")
	target := func(what string, got float64, ok bool, limit float64, atMost bool) {
		if !ok {
			fmt.Fprintf(w, "  %-58s not measured\n", what)
			return
		}
		met := got <= limit
		if !atMost {
			met = got >= limit
		}
		verdict := "met"
		if !met {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "  %-58s %.2f (%s)\n", what, got, verdict)
	}
	for _, op := range []string{"copy-out-8", "copy-in-8", "fetch-add-8", "cas-8"} {
		path := "device"
		if op == "fetch-add-8" || op == "cas-8" {
			path = "delegated"
		}
		a, ok := find(recs, op, path, link)
		if link == "shm" {
			os, osok := find(recs, op, "oshmem", "shm")
			target(op+" / oshmem shm, at most 2", a.US/os.US, ok && osok, 2, true)
		} else {
			mt, mtok := find(recs, op, "mpi-osc-pt2pt", "tcp")
			target(op+" / osc pt2pt tcp, at most 1", a.US/mt.US, ok && mtok, 1, true)
		}
	}
	tp, tpok := find(recs, "third-party-copy-8", "delegated", link)
	ci, ciok := find(recs, "copy-in-8", "device", link)
	target("third-party copy / two-party copy (copy-in-8), at most 2", tp.US/ci.US, tpok && ciok, 2, true)
	g, gok := find(recs, "copy-in-1M", "device", link)
	og, ogok := find(recs, "copy-in-1M", "oshmem", "shm")
	target("1 MiB copy-in bandwidth / oshmem shm get, at least 0.5", g.MBps/og.MBps, gok && ogok, 0.5, false)
	for _, op := range []string{"fetch-add-8", "cas-8"} {
		dv, dok := find(recs, op, "device", link)
		dl, lok := find(recs, op, "delegated", link)
		target(op+" device / delegated, at most 0.5", dv.US/dl.US, dok && lok, 0.5, true)
	}
}
