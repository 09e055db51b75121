/* threads: FI_THREAD_SAFE with a blocking read. The main thread blocks
 * in fi_cq_sread(-1) on the receiver's CQ while a second thread posts
 * the send on the sender's endpoint 200 ms later (the provider's lock is
 * not held while the reader sleeps); the message arrives intact and the
 * sender's completion then comes to the main thread. SIZE (argv[1])
 * picks eager (8) or rendezvous (65536). Prints "threads: ok" or exits 1. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_cm.h>
#define PROG "threads"
#include "side.h"

static struct side a, b;
static fi_addr_t ab;
static char sbuf[65536], rbuf[65536];
static int ctxs, ctxr;
static int size;
static void *sender(void *unused) {
	(void)unused;
	usleep(200000);
	OK(fi_tsend(a.ep, sbuf, size, NULL, ab, 11, &ctxs));
	return NULL;
}
int main(int argc, char **argv) {
	size = argc > 1 ? atoi(argv[1]) : 65536;
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_TAGGED | FI_MSG;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_SAFE;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	open_side(&a); open_side(&b);
	fi_addr_t aa;
	if (fi_av_insert(a.av, b.addr, 1, &ab, 0, NULL) != 1) FAIL("insert");
	if (fi_av_insert(b.av, a.addr, 1, &aa, 0, NULL) != 1) FAIL("insert");
	for (int i = 0; i < size; i++) sbuf[i] = (char)(i * 7);
	OK(fi_trecv(b.ep, rbuf, size, NULL, FI_ADDR_UNSPEC, 11, 0, &ctxr));
	pthread_t t;
	pthread_create(&t, NULL, sender, NULL);
	struct fi_cq_tagged_entry c;
	ssize_t sn = fi_cq_sread(b.cq, &c, 1, NULL, -1);
	if (sn != 1 || c.op_context != &ctxr || memcmp(rbuf, sbuf, size)) FAIL("sread %zd", sn);
	pthread_join(t, NULL);
	time_t end = time(NULL) + 30;
	for (;;) {
		ssize_t n = fi_cq_read(a.cq, &c, 1);
		if (n == 1) { if (c.op_context != &ctxs) FAIL("send completion ctx %p", c.op_context); close_side(&a); close_side(&b); fi_freeinfo(info); printf("threads: ok %d\n", size); return 0; }
		if (n == -FI_EAVAIL) FAIL("error entry");
		fi_cq_read(b.cq, &c, 0);
		if (time(NULL) > end) FAIL("no send completion within 30 s");
	}
}
