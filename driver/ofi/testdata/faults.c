/* faults: bad input and faults against the dimmnet provider, each
 * checked for the error the provider must name, then 1,000 endpoint
 * opens and closes with the process's goroutines, descriptors, mappings
 * and threads counted before and after. Prints "faults: ok" or exits 1. */
#include <dlfcn.h>
#include <dirent.h>
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

#define PROG "faults"
#include "side.h"

/* wait_err polls cq (and progresses the others) until an error entry
 * comes, or fails after 30 s: a hang is the failure this guards. */
static struct fi_cq_err_entry wait_err(struct fid_cq *cq, struct fid_cq *other)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	time_t end = time(NULL) + 30;
	while (time(NULL) < end) {
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == -FI_EAVAIL) {
			OK(fi_cq_readerr(cq, &err, 0) != 1);
			return err;
		}
		if (n > 0)
			FAIL("a completion (ctx %p, len %zu) where an error was due", e.op_context, e.len);
		if (other)
			fi_cq_read(other, &e, 0);
	}
	FAIL("no error entry within 30 s");
}

static struct fi_cq_tagged_entry wait_comp(struct fid_cq *cq, struct fid_cq *other, const char *what)
{
	struct fi_cq_tagged_entry e;
	time_t end = time(NULL) + 30;
	while (time(NULL) < end) {
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == 1)
			return e;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			FAIL("%s: error entry %d (%s) where a completion was due", what, err.err, fi_strerror(err.err));
		}
		if (other)
			fi_cq_read(other, &e, 0);
	}
	FAIL("%s: no completion within 30 s", what);
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	int n = 0;
	while (d && readdir(d))
		n++;
	if (d)
		closedir(d);
	return n;
}

static int count_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0, c;
	while (f && (c = fgetc(f)) != EOF)
		n += c == '\n';
	if (f)
		fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	int loops = argc > 1 ? atoi(argv[1]) : 1000;
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_TAGGED | FI_MSG;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));

	/* an order or a domain capability the provider lacks: no match (an
	 * fi_info without it would be taken as a promise); one it has: kept */
	{
		struct fi_info *h = fi_dupinfo(hints), *got = NULL;
		h->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_DATA;
		int r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &got);
		if (r != -FI_ENODATA)
			FAIL("getinfo tx msg_order FI_ORDER_DATA: %d, want -FI_ENODATA", r);
		h->tx_attr->msg_order = 0;
		h->rx_attr->msg_order = FI_ORDER_RAS;
		r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &got);
		if (r != -FI_ENODATA)
			FAIL("getinfo rx msg_order FI_ORDER_RAS: %d, want -FI_ENODATA", r);
		h->rx_attr->msg_order = 0;
		h->domain_attr->caps = FI_SHARED_AV;
		r = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &got);
		if (r != -FI_ENODATA)
			FAIL("getinfo domain caps FI_SHARED_AV: %d, want -FI_ENODATA", r);
		h->domain_attr->caps = FI_LOCAL_COMM;
		h->tx_attr->msg_order = FI_ORDER_SAS | FI_ORDER_RAW;
		h->rx_attr->msg_order = FI_ORDER_SAS;
		OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &got));
		if ((got->tx_attr->msg_order & (FI_ORDER_SAS | FI_ORDER_RAW)) != (FI_ORDER_SAS | FI_ORDER_RAW) ||
		    !(got->rx_attr->msg_order & FI_ORDER_SAS) || !(got->domain_attr->caps & FI_LOCAL_COMM))
			FAIL("getinfo: asked orders or domain caps missing from the answer");
		fi_freeinfo(got);
		fi_freeinfo(h);
	}

	struct side a = {0}, b = {0};
	open_side(&a);
	open_side(&b);
	fi_addr_t ab, aa, bogus;
	char buf[256], small[16];

	/* an address that is not one: nothing inserted, FI_ADDR_NOTAVAIL */
	char junk[16] = "not an address!";
	bogus = 0;
	if (fi_av_insert(a.av, junk, 1, &bogus, 0, NULL) != 0 || bogus != FI_ADDR_NOTAVAIL)
		FAIL("a junk address was inserted (%#llx)", (unsigned long long)bogus);
	if (fi_av_insert(a.av, b.addr, 1, &ab, 0, NULL) != 1)
		FAIL("insert b");
	if (fi_av_insert(b.av, a.addr, 1, &aa, 0, NULL) != 1)
		FAIL("insert a");

	/* a send to an address never inserted: an error entry naming it */
	int ctx1;
	OK(fi_tsend(a.ep, buf, 8, NULL, 12345, 1, &ctx1));
	struct fi_cq_err_entry err = wait_err(a.cq, NULL);
	if (err.err != FI_EADDRNOTAVAIL || err.op_context != &ctx1)
		FAIL("send to a never-inserted address: error %d (%s), ctx %p", err.err, fi_strerror(err.err), err.op_context);

	/* a receive that nothing matches, peeked: FI_ENOMSG */
	int ctx2;
	struct iovec iov = {buf, sizeof buf};
	struct fi_msg_tagged m = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 77, .context = &ctx2};
	OK(fi_trecvmsg(b.ep, &m, FI_PEEK));
	err = wait_err(b.cq, a.cq);
	if (err.err != FI_ENOMSG)
		FAIL("peek with nothing there: error %d (%s)", err.err, fi_strerror(err.err));

	/* a truncated receive: FI_ETRUNC with the tag, the data and the overrun */
	for (int i = 0; i < 100; i++)
		buf[i] = (char)i;
	int ctx3, ctx4;
	OK(fi_trecv(b.ep, small, sizeof small, NULL, FI_ADDR_UNSPEC, 5, 0, &ctx3));
	OK(fi_tsenddata(a.ep, buf, 100, NULL, 0xabcd, ab, 5, &ctx4));
	err = wait_err(b.cq, a.cq);
	if (err.err != FI_ETRUNC || err.olen != 100 - sizeof small || err.tag != 5 || err.data != 0xabcd || err.len != sizeof small)
		FAIL("truncation: err %d olen %zu tag %llu data %#llx len %zu", err.err, err.olen, (unsigned long long)err.tag,
		     (unsigned long long)err.data, err.len);
	for (int i = 0; i < (int)sizeof small; i++)
		if (small[i] != (char)i)
			FAIL("truncated receive byte %d: %d", i, small[i]);
	struct fi_cq_tagged_entry c = wait_comp(a.cq, b.cq, "the truncated send");
	if (c.op_context != &ctx4)
		FAIL("send completion ctx %p", c.op_context);

	/* fi_cq_sread with timeout -1 blocks until the completion comes
	 * (fabtests' cq_data and rdm_tagged_peek wait so), not -FI_EAGAIN: a
	 * 64 KiB message goes by rendezvous, so the receive completes only
	 * after the PULL that the read's first look at the device starts */
	static char big[64 << 10], bigin[64 << 10];
	for (int i = 0; i < (int)sizeof big; i++)
		big[i] = (char)(i * 7);
	int ctx10, ctx11;
	OK(fi_trecv(b.ep, bigin, sizeof bigin, NULL, FI_ADDR_UNSPEC, 11, 0, &ctx10));
	OK(fi_tsend(a.ep, big, sizeof big, NULL, ab, 11, &ctx11));
	ssize_t sn = fi_cq_sread(b.cq, &c, 1, NULL, -1);
	if (sn != 1 || c.op_context != &ctx10 || c.len != sizeof big || memcmp(big, bigin, sizeof big))
		FAIL("fi_cq_sread(-1): %zd (%s), ctx %p, len %zu", sn, sn < 0 ? fi_strerror((int)-sn) : "", c.op_context, c.len);
	c = wait_comp(a.cq, b.cq, "the rendezvous send read by sread");
	if (c.op_context != &ctx11)
		FAIL("sread's send completion ctx %p", c.op_context);

	/* fi_cancel: the receive completes with FI_ECANCELED */
	int ctx5;
	OK(fi_trecv(b.ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 9, 0, &ctx5));
	OK(fi_cancel(&b.ep->fid, &ctx5));
	err = wait_err(b.cq, a.cq);
	if (err.err != FI_ECANCELED || err.op_context != &ctx5)
		FAIL("cancel: error %d ctx %p", err.err, err.op_context);

	/* a receive posted on an endpoint that is then closed: FI_ECANCELED */
	int ctx6;
	OK(fi_trecv(b.ep, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, 10, 0, &ctx6));
	OK(fi_close(&b.ep->fid));
	b.ep = NULL;
	err = wait_err(b.cq, NULL);
	if (err.err != FI_ECANCELED || err.op_context != &ctx6)
		FAIL("receive on a closed endpoint: error %d ctx %p", err.err, err.op_context);

	/* a message to a peer that died (b's endpoint is gone): an error, no hang */
	int ctx7;
	OK(fi_tsend(a.ep, buf, 64, NULL, ab, 1, &ctx7));
	err = wait_err(a.cq, NULL);
	if (err.op_context != &ctx7 || (err.err != FI_EHOSTUNREACH && err.err != FI_EREMOTEIO))
		FAIL("send to a dead peer: error %d (%s) ctx %p", err.err, fi_strerror(err.err), err.op_context);
	close_side(&b);

	/* a keeps working with its other peers: a new one */
	open_side(&b);
	if (fi_av_insert(a.av, b.addr, 1, &ab, 0, NULL) != 1 || fi_av_insert(b.av, a.addr, 1, &aa, 0, NULL) != 1)
		FAIL("insert the new peer");
	int ctx8, ctx9;
	memset(small, 0, sizeof small);
	OK(fi_trecv(b.ep, small, sizeof small, NULL, FI_ADDR_UNSPEC, 3, 0, &ctx8));
	OK(fi_tsend(a.ep, "after a death", 14, NULL, ab, 3, &ctx9));
	c = wait_comp(b.cq, a.cq, "the message to the new peer");
	if (c.op_context != &ctx8 || c.len != 14 || strcmp(small, "after a death"))
		FAIL("message to the new peer: ctx %p len %zu \"%s\"", c.op_context, c.len, small);
	close_side(&b);
	close_side(&a);

	/* 1,000 opens and closes: nothing left behind */
	void *lib = dlopen(getenv("DIMMNET_FI_LIB"), RTLD_NOW | RTLD_NOLOAD);
	int (*goroutines)(void) = lib ? (int (*)(void))dlsym(lib, "dimmnet_goroutines") : NULL;
	if (!goroutines)
		FAIL("no dimmnet_goroutines in %s: %s", getenv("DIMMNET_FI_LIB"), dlerror());
	/* the first half warms up (the Go heap and the runtime's threads grow
	 * to what the loop needs); the second must add nothing */
	for (int i = 0; i < loops / 2; i++) {
		open_side(&a);
		close_side(&a);
	}
	usleep(200000);
	int fd0 = count_dir("/proc/self/fd"), map0 = count_lines("/proc/self/maps"), th0 = count_dir("/proc/self/task"), g0 = goroutines();
	for (int i = 0; i < loops - loops / 2; i++) {
		open_side(&a);
		close_side(&a);
	}
	usleep(200000);
	int fd1 = count_dir("/proc/self/fd"), map1 = count_lines("/proc/self/maps"), th1 = count_dir("/proc/self/task"), g1 = goroutines();
	printf("faults: %d opens, the second half: fds %d -> %d, mappings %d -> %d, threads %d -> %d, goroutines %d -> %d\n", loops, fd0, fd1,
	       map0, map1, th0, th1, g0, g1);
	/* A leak is per open: 500 opens would leave hundreds of fds, mappings
	 * (each device maps its region) or goroutines. The Go runtime's own
	 * heap and threads still move by a few (an arena split in two maps,
	 * an M started for a blocked syscall): bounded, not per open. */
	if (fd1 > fd0 || map1 > map0 + 16 || th1 > th0 + 4 || g1 > g0 + 2)
		FAIL("resources left behind");
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("faults: ok\n");
	return 0;
}
