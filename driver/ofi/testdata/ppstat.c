/* ppstat PROVIDER [ITERS [SIZE]]: fi_pingpong's RDM loop (fi_inject,
 * fi_cq_read spinning on the receive CQ, fi_recv re-posted), between a
 * forked pair, timing every round trip: mean (what fi_pingpong prints),
 * median, tail, and how much of the mean the stalls (round trips over
 * 20 us) make. PPSTAT_SPLIT=1 also times the client's calls (fi_inject,
 * the fi_cq_read that completes, fi_recv); PPSTAT_GAPS=1 histograms the
 * stalls and writes their times to stalls.txt. PPSTAT_SEND=1 sends with
 * fi_send (the buffer kept until its completion, reaped before the next
 * send) instead of fi_inject, as any SIZE over the inject limit does;
 * PPSTAT_LINKMEM=1 (dimmnet) also allocates both sides' buffers from
 * link memory through the provider's ops (../include/fi_dimmnet.h), so
 * bodies move with no bounce copy, and prints the endpoint's counters.
 * PPSTAT_BIND=1 binds the client to CPU 0 and the server to CPU 1, as
 * `dimmnet pingpong --link shm` binds its two processes by default.
 * Not a test: a tool for docs/ofi.md's figures (gcc -O2 ppstat.c -o
 * ppstat -lfabric). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <sys/wait.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include "../include/fi_dimmnet.h"
#include "measure.h"

static ssize_t inject(struct fid_ep *ep, struct fid_cq *txcq, char *tx, int size, fi_addr_t dst)
{
	struct fi_cq_entry e;
	ssize_t r;
	while ((r = fi_inject(ep, tx, size, dst)) == -FI_EAGAIN)
		fi_cq_read(txcq, &e, 1);
	return r;
}

static ssize_t send_reaped(struct fid_ep *ep, struct fid_cq *txcq, char *tx, int size, fi_addr_t dst,
			   struct fi_context *ctx, int *pending)
{
	struct fi_cq_entry e;
	ssize_t r;
	while (*pending) {
		r = fi_cq_read(txcq, &e, 1);
		if (r == 1)
			*pending = 0;
		else if (r != -FI_EAGAIN)
			return r;
	}
	while ((r = fi_send(ep, tx, size, NULL, dst, ctx)) == -FI_EAGAIN)
		fi_cq_read(txcq, &e, 1);
	if (r == 0)
		*pending = 1;
	return r;
}

/* touch writes a zero into every page of [p, p+n). */
static void touch(void *p, size_t n)
{
	volatile char *c = p;
	for (size_t i = 0; i < n; i += 4096)
		c[i] = 0;
}

int main(int argc, char **argv)
{
	const char *prov = argc > 1 ? argv[1] : "dimmnet";
	int iters = argc > 2 ? atoi(argv[2]) : 100000;
	int size = argc > 3 ? atoi(argv[3]) : 8;
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		return 1;
	pid_t pid = fork();
	int server = pid == 0;
	if (getenv("PPSTAT_BIND")) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(server ? 1 : 0, &set);
		CK(sched_setaffinity(0, sizeof(set), &set));
	}
	int wfd = server ? c2p[1] : p2c[1], rfd = server ? p2c[0] : c2p[0];

	struct fi_info *hints = fi_allocinfo(), *info;
	hints->caps = FI_MSG;
	hints->mode = FI_CONTEXT;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup(prov);
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fab; struct fid_domain *dom; struct fid_av *av;
	struct fid_cq *txcq, *rxcq; struct fid_ep *ep;
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_NONE, .size = 1024};
	struct fi_av_attr ava = {.type = info->domain_attr->av_type};
	CK(fi_fabric(info->fabric_attr, &fab, NULL));
	CK(fi_domain(fab, info, &dom, NULL));
	CK(fi_cq_open(dom, &cqa, &txcq, NULL));
	CK(fi_cq_open(dom, &cqa, &rxcq, NULL));
	CK(fi_av_open(dom, &ava, &av, NULL));
	CK(fi_endpoint(dom, info, &ep, NULL));
	CK(fi_ep_bind(ep, &av->fid, 0));
	CK(fi_ep_bind(ep, &txcq->fid, FI_TRANSMIT));
	CK(fi_ep_bind(ep, &rxcq->fid, FI_RECV));
	CK(fi_enable(ep));
	size_t rxn = size > 32768 ? size : 32768, txn = size > 64 ? size : 64;
	int linkmem = getenv("PPSTAT_LINKMEM") != NULL;
	int sendmode = linkmem || getenv("PPSTAT_SEND") != NULL || size > 4096;
	struct fi_dimmnet_linkmem_ops *lm = NULL;
	char *buf, *tx;
	if (linkmem) {
		CK(fi_open_ops(&dom->fid, FI_DIMMNET_LINKMEM_OPS, 0, (void **)&lm, NULL));
		CK(lm->alloc(ep, rxn, 0, (void **)&buf));
		CK(lm->alloc(ep, txn, 0, (void **)&tx));
		memset(buf, 0, rxn);
		memset(tx, 0, txn);
	} else {
		buf = calloc(1, rxn);
		tx = calloc(1, txn);
	}
	struct fi_context rxctx, txctx;
	int txpending = 0;
	CK((int)fi_recv(ep, buf, rxn, NULL, 0, &rxctx));
	char name[64], peer[64];
	size_t nl = sizeof name;
	CK(fi_getname(&ep->fid, name, &nl));
	if (write(wfd, &nl, sizeof nl) != sizeof nl || write(wfd, name, nl) != (ssize_t)nl)
		return 1;
	size_t pl;
	if (read(rfd, &pl, sizeof pl) != sizeof pl || read(rfd, peer, pl) != (ssize_t)pl)
		return 1;
	fi_addr_t dst;
	if (fi_av_insert(av, peer, 1, &dst, 0, NULL) != 1)
		return 1;
	char c = 0;
	if (write(wfd, &c, 1) != 1 || read(rfd, &c, 1) != 1)
		return 1;
	double *rtt = calloc(iters, sizeof *rtt);
	int split = getenv("PPSTAT_SPLIT") != NULL;
	double *sp[3];
	for (int k = 0; k < 3; k++)
		sp[k] = calloc(iters, sizeof(double));
	int gaps = getenv("PPSTAT_GAPS") != NULL, ngap = 0;
	double *gap = calloc(100000, sizeof *gap);
	/* Touch every page of the arrays the loop writes: calloc's pages are
	 * mapped at their first write, and a first write here stalls 15-20 us,
	 * one round trip in every 512 (a page of rtt[]) for every provider.
	 * Through a volatile pointer: a compiler may drop a memset of memory
	 * calloc just zeroed. */
	touch(rtt, iters * sizeof *rtt);
	for (int k = 0; k < 3; k++)
		touch(sp[k], iters * sizeof(double));
	touch(gap, 100000 * sizeof *gap);
	FILE *sf = gaps && !server ? fopen("stalls.txt", "w") : NULL;
	long polls = 0;
	struct fi_cq_entry e;
	/* SEND: fi_inject, or fi_send after the previous send's completion */
#define SEND() (sendmode ? send_reaped(ep, txcq, tx, size, dst, &txctx, &txpending) : inject(ep, txcq, tx, size, dst))
	double t0 = now(), last = t0;
	for (int i = 0; i < iters; i++) {
		ssize_t r;
		if (server) {
			while ((r = fi_cq_read(rxcq, &e, 1)) == -FI_EAGAIN)
				polls++;
			if (r < 0) { fprintf(stderr, "cq %zd\n", r); return 1; }
			CK((int)fi_recv(ep, buf, rxn, NULL, 0, &rxctx));
			if ((r = SEND()) != 0) { fprintf(stderr, "send %zd\n", r); return 1; }
		} else if (split) {
			double a = now();
			if ((r = SEND()) != 0) { fprintf(stderr, "send %zd\n", r); return 1; }
			double b = now(), c;
			do {
				c = now();
				r = fi_cq_read(rxcq, &e, 1);
				polls++;
			} while (r == -FI_EAGAIN);
			double d = now();
			if (r < 0) { fprintf(stderr, "cq %zd\n", r); return 1; }
			CK((int)fi_recv(ep, buf, rxn, NULL, 0, &rxctx));
			double t = now();
			sp[0][i] = b - a; sp[1][i] = d - c; sp[2][i] = t - d;
			rtt[i] = t - last;
			last = t;
		} else {
			if ((r = SEND()) != 0) { fprintf(stderr, "send %zd\n", r); return 1; }
			while ((r = fi_cq_read(rxcq, &e, 1)) == -FI_EAGAIN)
				polls++;
			if (r < 0) { fprintf(stderr, "cq %zd\n", r); return 1; }
			CK((int)fi_recv(ep, buf, rxn, NULL, 0, &rxctx));
			double t = now();
			rtt[i] = t - last;
			if (gaps && rtt[i] > 20000 && ngap < 100000)
				gap[ngap++] = t - t0;
			if (gaps && rtt[i] > 20000 && sf)
				fprintf(sf, "%.9f %.9f\n", last / 1e9, t / 1e9);
			last = t;
		}
	}
	double el = now() - t0;
	if (getenv("PPSTAT_WINDOW")) fprintf(stderr, "window %s %.6f %.6f\n", server ? "server" : "client", t0 / 1e9, (t0 + el) / 1e9);
	if (!server) {
		qsort(rtt, iters, sizeof *rtt, cmpd);
		double stall = 0; int ns = 0;
		for (int i = 0; i < iters; i++)
			if (rtt[i] > 20000) { stall += rtt[i]; ns++; }
		printf("%s%s %dB one-way us: mean %.3f p50 %.3f p90 %.3f p99 %.3f max %.1f | stalls>20us %d, %.3f us of the mean; mean without %.3f | polls/iter %.1f\n",
		       prov, linkmem ? " linkmem" : sendmode ? " send" : "", size, el / iters / 2e3, rtt[iters / 2] / 2e3, rtt[iters * 9 / 10] / 2e3, rtt[iters * 99 / 100] / 2e3,
		       rtt[iters - 1] / 2e3, ns, stall / iters / 2e3, (el - stall) / (iters - ns) / 2e3, (double)polls / iters);
	}
	if (sf) fclose(sf);
	if (split && !server) {
		for (int k = 0; k < 3; k++)
			qsort(sp[k], iters, sizeof(double), cmpd);
		printf("client call medians (ns, clock reads included): fi_inject %.0f, the fi_cq_read that completes %.0f, fi_recv %.0f; an idle poll is the rest of polls/iter\n",
		       sp[0][iters / 2], sp[1][iters / 2], sp[2][iters / 2]);
	}
	if (gaps && !server) {
		int h[12] = {0};
		for (int i = 1; i < ngap; i++) {
			double d = (gap[i] - gap[i - 1]) / 1e3; /* us */
			int b = d < 50 ? 0 : d < 200 ? 1 : d < 500 ? 2 : d < 900 ? 3 : d < 1100 ? 4 : d < 1900 ? 5 : d < 2100 ? 6 : d < 5000 ? 7 : d < 9000 ? 8 : d < 11000 ? 9 : 10;
			h[b]++;
		}
		printf("gaps between stalls (us): <50 %d, <200 %d, <500 %d, <900 %d, 900-1100 %d, <1900 %d, 1900-2100 %d, <5000 %d, <9000 %d, 9-11ms %d, more %d\n",
		       h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10]);
		double sum[6] = {0}; int cnt[6] = {0};
		for (int i = 0; i < iters; i++) {
			double r = rtt[i] / 1e3;
			int b = r < 20 ? 0 : r < 50 ? 1 : r < 200 ? 2 : r < 1000 ? 3 : r < 5000 ? 4 : 5;
			sum[b] += r; cnt[b]++;
		}
		printf("round trips by size (us): <20 %d (%.0f ms), 20-50 %d (%.0f ms), 50-200 %d (%.0f ms), 200-1000 %d (%.0f ms), 1-5 ms %d (%.0f ms), more %d (%.0f ms)\n",
		       cnt[0], sum[0] / 1e3, cnt[1], sum[1] / 1e3, cnt[2], sum[2] / 1e3, cnt[3], sum[3] / 1e3, cnt[4], sum[4] / 1e3, cnt[5], sum[5] / 1e3);
	}
	if (!server && size >= 4096)
		printf("%s%s %dB ping-pong bandwidth (size / median one-way): %.0f MB/s\n", prov, linkmem ? " linkmem" : sendmode ? " send" : "",
		       size, size / (rtt[iters / 2] / 2e3));
	if (linkmem && !server) {
		struct fi_dimmnet_linkmem_stats st;
		CK(lm->stats(ep, &st));
		printf("linkmem counters (client): zc_sends %llu copied_sends %llu zc_pulls %llu copied_pulls %llu\n",
		       (unsigned long long)st.zc_sends, (unsigned long long)st.copied_sends,
		       (unsigned long long)st.zc_pulls, (unsigned long long)st.copied_pulls);
	}
	if (write(wfd, &c, 1) != 1 || read(rfd, &c, 1) != 1)
		return 1;
	if (linkmem) {
		CK(lm->free(ep, buf));
		CK(lm->free(ep, tx));
	}
	fi_close(&ep->fid);
	if (!server)
		waitpid(pid, NULL, 0);
	return 0;
}
