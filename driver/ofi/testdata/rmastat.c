/* rmastat [ITERS [ROUNDS]]: RMA write and read latency over the dimmnet
 * provider between a forked pair, to a region in the target's link
 * memory (allocated through ../include/fi_dimmnet.h: the initiator's
 * device PUSHes and PULLs it, the target's provider does nothing) against
 * a region in ordinary memory (a request the target's provider serves as
 * it progresses; the target here spins on fi_cq_read, the best case for
 * it). Local buffers are link memory for the first and ordinary memory
 * for the second. Each op is posted and its completion awaited; per
 * round and kind the median of ITERS ops, the kinds interleaved in
 * every round; prints the median of the rounds' medians. RMASTAT_IDLE=1:
 * the target makes no call at all after registering (blocked in a pipe
 * read, its device left to the device's engine), and only the device
 * path is timed: a request to ordinary memory would wait for the target
 * to call in. Not a test: a
 * tool for docs/ofi.md's figures (gcc -O2 rmastat.c -o rmastat -lfabric). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>
#include "../include/fi_dimmnet.h"
#include "measure.h"

#define REG (1 << 20)

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 2000, rounds = argc > 2 ? atoi(argv[2]) : 5;
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		return 1;
	pid_t pid = fork();
	int target = pid == 0, idle = getenv("RMASTAT_IDLE") != NULL;
	int wfd = target ? c2p[1] : p2c[1], rfd = target ? p2c[0] : c2p[0];
	close(target ? c2p[0] : p2c[0]);
	close(target ? p2c[1] : c2p[1]);

	struct fi_info *hints = fi_allocinfo(), *info;
	hints->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	CK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fid_fabric *fab; struct fid_domain *dom; struct fid_av *av;
	struct fid_cq *cq; struct fid_ep *ep;
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	CK(fi_fabric(info->fabric_attr, &fab, NULL));
	CK(fi_domain(fab, info, &dom, NULL));
	CK(fi_cq_open(dom, &cqa, &cq, NULL));
	CK(fi_av_open(dom, &ava, &av, NULL));
	CK(fi_endpoint(dom, info, &ep, NULL));
	CK(fi_ep_bind(ep, &av->fid, 0));
	CK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CK(fi_enable(ep));
	struct fi_dimmnet_linkmem_ops *lm;
	CK(fi_open_ops(&dom->fid, FI_DIMMNET_LINKMEM_OPS, 0, (void **)&lm, NULL));
	char *link, *ord = calloc(1, REG);
	CK(lm->alloc(ep, REG, 0, (void **)&link));
	memset(link, 0, REG);

	char name[64], peer[64];
	size_t nl = sizeof name, pl;
	CK(fi_getname(&ep->fid, name, &nl));
	if (write(wfd, &nl, sizeof nl) != sizeof nl || write(wfd, name, nl) != (ssize_t)nl)
		return 1;
	if (read(rfd, &pl, sizeof pl) != sizeof pl || read(rfd, peer, pl) != (ssize_t)pl)
		return 1;
	fi_addr_t dst;
	if (fi_av_insert(av, peer, 1, &dst, 0, NULL) != 1)
		return 1;
	struct fi_cq_entry e;
	if (target) {
		struct fid_mr *lmr, *omr;
		CK(fi_mr_reg(dom, link, REG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &lmr, NULL));
		CK(fi_mr_reg(dom, ord, REG, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 9, 0, &omr, NULL));
		uint64_t k[2] = {fi_mr_key(lmr), fi_mr_key(omr)};
		if (write(wfd, k, sizeof k) != sizeof k)
			return 1;
		char c;
		if (!idle)
			fcntl(rfd, F_SETFL, O_NONBLOCK);
		if (getenv("RMASTAT_POKE"))
			fi_cq_read(cq, &e, 0);
		for (;;) {
			ssize_t n = read(rfd, &c, 1);
			if (n == 1)
				break;
			if (n == 0)
				return 1; /* the initiator is gone */
			fi_cq_read(cq, &e, 0); /* serve the requests to ordinary memory */
		}
		fi_close(&lmr->fid);
		fi_close(&omr->fid);
	} else {
		uint64_t k[2];
		if (read(rfd, k, sizeof k) != sizeof k)
			return 1;
		static const char *kind[2] = {"link region, link buffer (device)", "ordinary region and buffer (request)"};
		static const char *op[2] = {"write", "read"};
		int sizes[2] = {8, 65536};
		double *t = calloc(iters, sizeof *t), *med = calloc(rounds * 8, sizeof *med);
		struct fi_context ctx;
		for (int r = 0; r < rounds; r++)
			for (int s = 0; s < 2; s++)
				for (int o = 0; o < 2; o++)
					for (int kk = 0; kk < 2 - idle; kk++) {
						char *local = kk ? ord : link;
						for (int i = 0; i < iters; i++) {
							double a = now();
							ssize_t ret;
							if (o == 0)
								while ((ret = fi_write(ep, local, sizes[s], NULL, dst, 0, k[kk], &ctx)) == -FI_EAGAIN)
									fi_cq_read(cq, &e, 0);
							else
								while ((ret = fi_read(ep, local, sizes[s], NULL, dst, 0, k[kk], &ctx)) == -FI_EAGAIN)
									fi_cq_read(cq, &e, 0);
							CK(ret);
							while ((ret = fi_cq_read(cq, &e, 1)) == -FI_EAGAIN)
								;
							if (ret == -FI_EAVAIL) {
								struct fi_cq_err_entry ee = {0};
								fi_cq_readerr(cq, &ee, 0);
								fprintf(stderr, "%s %s: error %d %s (device %d)\n", op[o], kind[kk], ee.err, fi_strerror(ee.err), ee.prov_errno);
								return 1;
							}
							if (ret != 1) { fprintf(stderr, "cq %zd\n", ret); return 1; }
							t[i] = now() - a;
						}
						qsort(t, iters, sizeof *t, cmpd);
						med[((s * 2 + o) * 2 + kk) * rounds + r] = t[iters / 2];
					}
		for (int s = 0; s < 2; s++)
			for (int o = 0; o < 2; o++) {
				double m[2];
				for (int kk = 0; kk < 2 - idle; kk++) {
					double *v = med + ((s * 2 + o) * 2 + kk) * rounds;
					qsort(v, rounds, sizeof *v, cmpd);
					m[kk] = v[rounds / 2];
					printf("rma %s %d B, %s%s: median %.2f us\n", op[o], sizes[s], kind[kk], idle ? ", target idle" : "", m[kk] / 1e3);
				}
				if (!idle)
					printf("rma %s %d B: device / request %.2fx\n", op[o], sizes[s], m[0] / m[1]);
			}
		struct fi_dimmnet_linkmem_stats st;
		CK(lm->stats(ep, &st));
		printf("initiator counters: device_rma %llu copied_rma %llu\n", (unsigned long long)st.device_rma, (unsigned long long)st.copied_rma);
		char c = 'q';
		if (write(wfd, &c, 1) != 1)
			return 1;
		waitpid(pid, NULL, 0);
	}
	CK(lm->free(ep, link));
	fi_close(&ep->fid);
	return 0;
}
