/* injerr [cq|cntr [send|rma]]: inject calls that fail in the device, against the
 * dimmnet provider. An inject call owes no completion when it succeeds,
 * but fi_cq(3) has a failed operation reported even when it asked for no
 * completion: each failure must come back as one error entry on the
 * transmit CQ, op_context NULL (the call took none), the flags naming the
 * operation, its length, err and prov_errno; with "cntr", counters bound
 * with FI_SEND and FI_WRITE must count each failure as an error and each
 * success as a completion.
 *
 * The failures are real ones of the devices: fi_inject, fi_tinject,
 * fi_injectdata and fi_tinjectdata to a peer whose endpoint closed (its
 * device is gone: UNREACHABLE); fi_inject_write and fi_inject_writedata
 * refused by a live target (beyond its region: FI_EACCES; a key it never
 * registered: FI_EKEYREJECTED), one refused by the target's device (a key
 * pointing into link memory the device does not expose: REMOTE_ADDR), and
 * writes to that target once it closed, through its provider and through
 * the device. "send" or "rma" runs only the sends' or only the writes'
 * part. Prints "injerr: ok" or exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_cm.h>
#include "../include/fi_dimmnet.h"

#define PROG "injerr"
#include "side.h"

/* The device's error numbers (uapi/errno.go) a failed command's
 * prov_errno carries. */
enum { DN_ENOK = 0, DN_EREMOTE_ADDR = 6, DN_EUNREACHABLE = 10 };

/* progress reads cq once and throws away what it got: the target's
 * provider serves requests when its caller reads. */
static void progress(struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	if (cq && fi_cq_read(cq, &e, 1) == -FI_EAVAIL)
		fi_cq_readerr(cq, &err, 0);
}

/* want_err waits (30 s at most, progressing other) for cq's next error
 * entry and checks every field fi_cq(3) defines for it. A completion
 * first is a failure: an inject call succeeds without one. */
static void want_err(const char *what, struct fid_cq *cq, struct fid_cq *other, uint64_t flags, size_t len, int err,
		     int prov)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry got = {0};
	time_t end = time(NULL) + 30;
	for (;;) {
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == -FI_EAVAIL)
			break;
		if (n > 0)
			FAIL("%s: a completion (ctx %p, flags %#llx) where an error entry was due", what, e.op_context,
			     (unsigned long long)e.flags);
		if (n != -FI_EAGAIN)
			FAIL("%s: fi_cq_read: %zd", what, n);
		if (time(NULL) > end)
			FAIL("%s: no error entry within 30 s (the failure was lost)", what);
		progress(other);
	}
	if (fi_cq_readerr(cq, &got, 0) != 1)
		FAIL("%s: fi_cq_read said -FI_EAVAIL, fi_cq_readerr found nothing", what);
	if (got.op_context != NULL || got.flags != flags || got.len != len || got.err != err || got.prov_errno != prov ||
	    got.buf != NULL || got.olen != 0)
		FAIL("%s: error entry ctx %p flags %#llx len %zu err %d (%s) prov_errno %d buf %p olen %zu; "
		     "want ctx NULL flags %#llx len %zu err %d (%s) prov_errno %d",
		     what, got.op_context, (unsigned long long)got.flags, got.len, got.err, fi_strerror(got.err),
		     got.prov_errno, got.buf, got.olen, (unsigned long long)flags, len, err, fi_strerror(err), prov);
	printf("injerr: %s: err %d (%s), prov_errno %d (%s), flags %#llx, len %zu\n", what, got.err, fi_strerror(got.err),
	       got.prov_errno, fi_cq_strerror(cq, got.prov_errno, NULL, NULL, 0), (unsigned long long)got.flags, got.len);
}

/* quiet checks that cq has nothing more for a while: one failure, one
 * entry. */
static void quiet(const char *what, struct fid_cq *cq)
{
	struct fi_cq_tagged_entry e;
	for (int i = 0; i < 2000; i++) {
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n != -FI_EAGAIN)
			FAIL("%s: fi_cq_read %zd where nothing more was due", what, n);
	}
}

/* want_cntr waits (30 s at most, progressing other) for counter c to
 * read val and err. */
static void want_cntr(const char *what, struct fid_cntr *c, struct fid_cq *other, uint64_t val, uint64_t err)
{
	time_t end = time(NULL) + 30;
	while (fi_cntr_read(c) != val || fi_cntr_readerr(c) != err) {
		if (time(NULL) > end)
			FAIL("%s: counter %llu, errors %llu; want %llu and %llu", what, (unsigned long long)fi_cntr_read(c),
			     (unsigned long long)fi_cntr_readerr(c), (unsigned long long)val, (unsigned long long)err);
		progress(other);
	}
}

/* inject retries a call that answered -FI_EAGAIN (no room yet). */
#define INJECT(call)                                                    \
	do {                                                            \
		ssize_t _r;                                             \
		while ((_r = (call)) == -FI_EAGAIN)                     \
			progress(a.cq);                                 \
		if (_r)                                                 \
			FAIL("%s: %zd %s", #call, _r, fi_strerror((int)-_r)); \
	} while (0)

int main(int argc, char **argv)
{
	int cntrs = argc > 1 && !strcmp(argv[1], "cntr");
	int sends = argc < 3 || !strcmp(argv[2], "send"), writes = argc < 3 || !strcmp(argv[2], "rma");
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_WRITE | FI_REMOTE_WRITE;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));

	const uint64_t cflags[2] = {FI_SEND, FI_WRITE};
	struct side a = {0}, b = {0}, c = {0};
	open_side_cntrs(&a, cntrs ? cflags : NULL);
	fi_addr_t ab, ba, ac, ca;
	static char buf[4096], rbuf[64];
	for (int i = 0; i < (int)sizeof buf; i++)
		buf[i] = (char)i;
	struct fi_cq_tagged_entry e;
	if (!sends)
		goto rma;

	open_side(&b);
	if (fi_av_insert(a.av, b.addr, 1, &ab, 0, NULL) != 1 || fi_av_insert(b.av, a.addr, 1, &ba, 0, NULL) != 1)
		FAIL("insert a and b");

	/* a live peer first: an inject arrives and leaves no entry behind */
	int rctx;
	OK(fi_trecv(b.ep, rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 1, 0, &rctx));
	INJECT(fi_tinject(a.ep, buf, 8, ab, 1));
	for (time_t end = time(NULL) + 30; fi_cq_read(b.cq, &e, 1) != 1; progress(a.cq))
		if (time(NULL) > end)
			FAIL("the inject to a live peer never arrived");
	if (e.op_context != &rctx || e.len != 8 || memcmp(rbuf, buf, 8))
		FAIL("the inject to a live peer: ctx %p len %zu", e.op_context, e.len);
	/* and a send with a completion after it: the device completes a
	 * peer's commands in order, so its completion says b acknowledged
	 * the inject too (one b received but had not acknowledged when it
	 * closed would fail in a's device like the ones below) */
	int sctx;
	OK(fi_trecv(b.ep, rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, 2, 0, &rctx));
	OK(fi_tsend(a.ep, buf, 8, NULL, ab, 2, &sctx));
	for (time_t end = time(NULL) + 30; fi_cq_read(a.cq, &e, 1) != 1; progress(b.cq))
		if (time(NULL) > end)
			FAIL("the send to a live peer never completed");
	if (e.op_context != &sctx)
		FAIL("the send to a live peer: completion ctx %p", e.op_context);
	quiet("a successful inject", a.cq);
	if (cntrs)
		want_cntr("a successful inject and send", a.cntr[0], NULL, 2, 0);

	/* b's endpoint closes: its device is gone, and every inject to it
	 * fails in a's device (UNREACHABLE), one error entry each, in order */
	OK(fi_close(&b.ep->fid));
	b.ep = NULL;
	INJECT(fi_inject(a.ep, buf, 8, ab));
	INJECT(fi_tinject(a.ep, buf, 100, ab, 7));
	INJECT(fi_injectdata(a.ep, buf, 16, 0xdada, ab));
	INJECT(fi_tinjectdata(a.ep, buf, sizeof buf, 0xdada, ab, 9));
	want_err("fi_inject to a closed peer", a.cq, NULL, FI_SEND | FI_MSG, 8, FI_EHOSTUNREACH, DN_EUNREACHABLE);
	want_err("fi_tinject to a closed peer", a.cq, NULL, FI_SEND | FI_TAGGED, 100, FI_EHOSTUNREACH, DN_EUNREACHABLE);
	want_err("fi_injectdata to a closed peer", a.cq, NULL, FI_SEND | FI_MSG, 16, FI_EHOSTUNREACH, DN_EUNREACHABLE);
	want_err("fi_tinjectdata to a closed peer", a.cq, NULL, FI_SEND | FI_TAGGED, sizeof buf, FI_EHOSTUNREACH,
		 DN_EUNREACHABLE);
	quiet("the injects to a closed peer", a.cq);
	if (cntrs)
		want_cntr("the injects to a closed peer", a.cntr[0], NULL, 2, 4);
	close_side(&b);

rma:
	if (!writes)
		goto done;
	/* a live target with a region in ordinary memory (served by its
	 * provider) and one in its link memory (written by a's device) */
	open_side(&c);
	if (fi_av_insert(a.av, c.addr, 1, &ac, 0, NULL) != 1 || fi_av_insert(c.av, a.addr, 1, &ca, 0, NULL) != 1)
		FAIL("insert a and c");
	struct fi_dimmnet_linkmem_ops *lm;
	OK(fi_open_ops(&c.dom->fid, FI_DIMMNET_LINKMEM_OPS, 0, (void **)&lm, NULL));
	static char oreg[4096];
	char *lreg;
	OK(lm->alloc(c.ep, 4096, 0, (void **)&lreg));
	memset(lreg, 0, 4096);
	struct fid_mr *omr, *lmr;
	OK(fi_mr_reg(c.dom, oreg, sizeof oreg, FI_REMOTE_WRITE, 0, 0x77, 0, &omr, NULL));
	OK(fi_mr_reg(c.dom, lreg, 4096, FI_REMOTE_WRITE, 0, 0x78, 0, &lmr, NULL));
	uint64_t okey = fi_mr_key(omr), lkey = fi_mr_key(lmr);
	if (!(lkey >> 63))
		FAIL("the link-memory region's key %#llx is not the provider's", (unsigned long long)lkey);

	/* writes that succeed: no entry, the bytes land, the counter counts */
	INJECT(fi_inject_write(a.ep, buf, 64, ac, 128, okey));
	INJECT(fi_inject_write(a.ep, buf, 64, ac, 256, lkey));
	for (time_t end = time(NULL) + 30; memcmp(oreg + 128, buf, 64) || memcmp(lreg + 256, buf, 64); progress(a.cq)) {
		progress(c.cq);
		if (time(NULL) > end)
			FAIL("the injected writes never landed");
	}
	if (cntrs)
		want_cntr("two successful writes", a.cntr[1], c.cq, 2, 0);
	quiet("successful injected writes", a.cq);

	/* refused by the target's provider: beyond the region, an unknown key */
	INJECT(fi_inject_write(a.ep, buf, 64, ac, sizeof oreg - 32, okey));
	want_err("fi_inject_write beyond the region", a.cq, c.cq, FI_RMA | FI_WRITE, 64, FI_EACCES, DN_ENOK);
	INJECT(fi_inject_writedata(a.ep, buf, 8, 0x5, ac, 0, 0x99));
	want_err("fi_inject_writedata with an unknown key", a.cq, c.cq, FI_RMA | FI_WRITE, 8, FI_EKEYREJECTED, DN_ENOK);

	/* refused by the target's device: a key whose offset (its low 28
	 * bits, in 8-byte units) is moved to link address 0, the receive
	 * ring, which the device does not expose to writes */
	uint64_t forged = lkey & ~(((uint64_t)1 << 28) - 1);
	INJECT(fi_inject_write(a.ep, buf, 8, ac, 0, forged));
	want_err("fi_inject_write outside the exposed link memory", a.cq, c.cq, FI_RMA | FI_WRITE, 8, FI_EREMOTEIO,
		 DN_EREMOTE_ADDR);
	quiet("the refused writes", a.cq);
	if (cntrs)
		want_cntr("the refused writes", a.cntr[1], c.cq, 2, 3);

	/* c closes: writes to it fail in a's device, through its provider's
	 * request and through the device's own write */
	OK(fi_close(&omr->fid));
	OK(fi_close(&lmr->fid));
	OK(lm->free(c.ep, lreg));
	close_side(&c);
	INJECT(fi_inject_write(a.ep, buf, 64, ac, 128, okey));
	INJECT(fi_inject_write(a.ep, buf, 64, ac, 256, lkey));
	want_err("fi_inject_write to a closed target", a.cq, NULL, FI_RMA | FI_WRITE, 64, FI_EHOSTUNREACH, DN_EUNREACHABLE);
	want_err("fi_inject_write by the device to a closed target", a.cq, NULL, FI_RMA | FI_WRITE, 64, FI_EHOSTUNREACH,
		 DN_EUNREACHABLE);
	quiet("the writes to a closed target", a.cq);
	if (cntrs)
		want_cntr("the writes to a closed target", a.cntr[1], NULL, 2, 5);
done:
	if (cntrs) /* each counter counted its own operations only */
		want_cntr("the sends, at the end", a.cntr[0], NULL, sends ? 2 : 0, sends ? 4 : 0);
	if (cntrs && !writes)
		want_cntr("the writes, at the end", a.cntr[1], NULL, 0, 0);
	close_side(&a);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	printf("injerr: ok\n");
	return 0;
}
