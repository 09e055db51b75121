/* multirecv: FI_MULTI_RECV receive buffers against the dimmnet provider,
 * two endpoints of one process (a sends, b receives), as fi_msg(3),
 * fi_cq(3) and fi_endpoint(3) of libfabric 1.17 define them:
 *
 *  - fi_getinfo offers FI_MULTI_RECV (caps and rx_attr) to hints asking
 *    for it, and not to hints that do not;
 *  - FI_OPT_MIN_MULTI_RECV reads its default, is set and read back, and
 *    a wrong length or another option is refused;
 *  - a buffer posted with fi_recvmsg(FI_MULTI_RECV) takes three messages
 *    that came before it (unexpected: 100 bytes, 40,000 bytes by
 *    rendezvous, 1 byte) and two after it (3,000 eager, 20,000 rendezvous),
 *    each whole, packed back to back, its own completion with buf and len,
 *    every byte checked; the last leaves less than the minimum, so its
 *    completion carries FI_MULTI_RECV;
 *  - buffers posted with fi_recv under the endpoint's default op_flags
 *    (FI_MULTI_RECV from the hints): a rendezvous message longer than
 *    what is left in the first is not split: the first is released by an
 *    entry of its own (flags FI_MULTI_RECV alone, len 0) and the message
 *    goes whole to the second, and the next message after it;
 *  - fi_trecv under those defaults is an ordinary tagged receive, and
 *    fi_trecvmsg with FI_MULTI_RECV is refused;
 *  - fi_cancel of a multi-receive buffer: an FI_ECANCELED error entry
 *    with FI_MULTI_RECV (the buffer is released), a second -FI_ENOENT;
 *  - a message longer than a fresh buffer: FI_ETRUNC, then the release.
 * Prints "multirecv: ok" or exits 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_cm.h>

#define PROG "multirecv"
#include "side.h"

static struct side a, b;
static fi_addr_t ab;
static int sends_done;

/* fill writes message id's pattern; check compares it. */
static void fill(unsigned char *p, size_t n, int id)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + id * 31 + (i >> 8));
}
static void check(const char *what, const unsigned char *p, size_t n, int id)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 7 + id * 31 + (i >> 8)))
			FAIL("%s: byte %zu of %zu is %#x, want %#x", what, i, n, p[i],
			     (unsigned char)(i * 7 + id * 31 + (i >> 8)));
}

/* drain_a reads the sender's completions (each send's). */
static void drain_a(void)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err = {0};
	ssize_t n = fi_cq_read(a.cq, &e, 1);
	if (n == 1)
		sends_done++;
	else if (n == -FI_EAVAIL) {
		fi_cq_readerr(a.cq, &err, 0);
		FAIL("a send failed: %d %s", err.err, fi_strerror(err.err));
	}
}

static unsigned char *sbuf[16];

/* send_msg sends message id of n bytes from a to b (tagged with tag when
 * tagged). */
static void send_msg(int id, size_t n, int tagged, uint64_t tag)
{
	sbuf[id] = malloc(n ? n : 1);
	fill(sbuf[id], n, id);
	ssize_t r;
	for (;;) {
		r = tagged ? fi_tsend(a.ep, sbuf[id], n, NULL, ab, tag, NULL) : fi_send(a.ep, sbuf[id], n, NULL, ab, NULL);
		if (r != -FI_EAGAIN)
			break;
		drain_a();
	}
	if (r)
		FAIL("send of message %d: %zd %s", id, r, fi_strerror((int)-r));
}

/* next waits (30 s at most) for b's next entry, an error entry's fields
 * in *err (err->err set) or a completion's in *e. */
static void next(struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err)
{
	time_t end = time(NULL) + 30;
	memset(err, 0, sizeof *err);
	for (;;) {
		ssize_t n = fi_cq_read(b.cq, e, 1);
		if (n == 1)
			return;
		if (n == -FI_EAVAIL) {
			if (fi_cq_readerr(b.cq, err, 0) != 1)
				FAIL("fi_cq_read said -FI_EAVAIL, fi_cq_readerr found nothing");
			return;
		}
		if (n != -FI_EAGAIN)
			FAIL("fi_cq_read: %zd", n);
		if (time(NULL) > end)
			FAIL("no completion within 30 s");
		drain_a();
	}
}

/* quiet checks b has nothing more for a while. */
static void quiet(const char *what)
{
	struct fi_cq_tagged_entry e;
	for (int i = 0; i < 2000; i++) {
		ssize_t n = fi_cq_read(b.cq, &e, 1);
		if (n != -FI_EAGAIN)
			FAIL("%s: fi_cq_read %zd (ctx %p flags %#llx) where nothing was due", what, n,
			     n == 1 ? e.op_context : NULL, n == 1 ? (unsigned long long)e.flags : 0ULL);
		drain_a();
	}
}

/* A message expected in a multi-receive buffer: its id, length, offset
 * from the buffer's start, and whether its completion releases it. */
struct want {
	int id;
	size_t len, off;
	int release;
	int seen;
};

/* expect reads n completions of messages in the buffer at base (context
 * ctx), in any order, and checks each one's flags, buf, len and bytes
 * against ws. */
static void expect(const char *what, void *ctx, unsigned char *base, struct want *ws, int n)
{
	for (int k = 0; k < n; k++) {
		struct fi_cq_tagged_entry e;
		struct fi_cq_err_entry err;
		next(&e, &err);
		if (err.err)
			FAIL("%s: error entry %d %s (ctx %p, flags %#llx, len %zu, olen %zu)", what, err.err,
			     fi_strerror(err.err), err.op_context, (unsigned long long)err.flags, err.len, err.olen);
		if (e.op_context != ctx)
			FAIL("%s: completion of context %p, want %p", what, e.op_context, ctx);
		struct want *w = NULL;
		for (int i = 0; i < n; i++)
			if ((unsigned char *)e.buf == base + ws[i].off)
				w = &ws[i];
		if (!w || w->seen)
			FAIL("%s: completion buf %p (offset %td, len %zu, flags %#llx) is no message's place", what, e.buf,
			     (unsigned char *)e.buf - base, e.len, (unsigned long long)e.flags);
		w->seen = 1;
		uint64_t flags = FI_RECV | FI_MSG | (w->release ? FI_MULTI_RECV : 0);
		if (e.flags != flags || e.len != w->len)
			FAIL("%s: message %d at offset %zu: flags %#llx len %zu, want flags %#llx len %zu", what, w->id,
			     w->off, (unsigned long long)e.flags, e.len, (unsigned long long)flags, w->len);
		check(what, e.buf, e.len, w->id);
		printf("multirecv: %s: message %d, %zu bytes at offset %zu%s\n", what, w->id, e.len, w->off,
		       w->release ? ", FI_MULTI_RECV" : "");
	}
}

/* expect_release reads the entry that releases buffer ctx by itself. */
static void expect_release(const char *what, void *ctx)
{
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	next(&e, &err);
	if (err.err)
		FAIL("%s: error entry %d %s where the release was due", what, err.err, fi_strerror(err.err));
	if (e.op_context != ctx || e.flags != FI_MULTI_RECV || e.len != 0)
		FAIL("%s: entry ctx %p flags %#llx len %zu, want the release: ctx %p flags FI_MULTI_RECV len 0", what,
		     e.op_context, (unsigned long long)e.flags, e.len, ctx);
	printf("multirecv: %s: released by an entry of its own\n", what);
}

int main(void)
{
	/* getinfo: offered when asked for, not otherwise */
	struct fi_info *hints = fi_allocinfo(), *plain = NULL;
	hints->caps = FI_MSG | FI_TAGGED;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &plain));
	if (plain->caps & FI_MULTI_RECV)
		FAIL("caps %#llx offer FI_MULTI_RECV to hints without it", (unsigned long long)plain->caps);
	fi_freeinfo(plain);
	hints->caps = FI_MSG | FI_TAGGED | FI_MULTI_RECV;
	hints->rx_attr->op_flags = FI_MULTI_RECV;
	int ret = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info);
	if (ret)
		FAIL("fi_getinfo with FI_MULTI_RECV: %d %s", ret, fi_strerror(-ret));
	if (!(info->caps & FI_MULTI_RECV) || !(info->rx_attr->caps & FI_MULTI_RECV) ||
	    (info->tx_attr->caps & FI_MULTI_RECV) || info->rx_attr->op_flags != FI_MULTI_RECV)
		FAIL("caps %#llx rx caps %#llx tx caps %#llx rx op_flags %#llx", (unsigned long long)info->caps,
		     (unsigned long long)info->rx_attr->caps, (unsigned long long)info->tx_attr->caps,
		     (unsigned long long)info->rx_attr->op_flags);

	open_side(&a);
	open_side(&b);
	OK(fi_av_insert(a.av, b.addr, 1, &ab, 0, NULL) != 1);

	/* FI_OPT_MIN_MULTI_RECV */
	size_t min = 0, len = sizeof min;
	OK(fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &len));
	if (len != sizeof(size_t) || min != 16384)
		FAIL("FI_OPT_MIN_MULTI_RECV default %zu (length %zu), want 16384", min, len);
	min = 4096;
	if (fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, 4) != -FI_EINVAL)
		FAIL("fi_setopt of a 4-byte FI_OPT_MIN_MULTI_RECV accepted");
	if (fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &min, sizeof min) != -FI_ENOPROTOOPT)
		FAIL("fi_setopt of FI_OPT_CM_DATA_SIZE not -FI_ENOPROTOOPT");
	OK(fi_setopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min));
	min = 0;
	OK(fi_getopt(&b.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, &len));
	if (min != 4096)
		FAIL("FI_OPT_MIN_MULTI_RECV reads %zu after setting 4096", min);

	/* 1: three messages before the buffer (unexpected), two after */
	send_msg(0, 100, 0, 0);
	send_msg(1, 40000, 0, 0); /* rendezvous: completes only once pulled */
	send_msg(2, 1, 0, 0);
	time_t end = time(NULL) + 30;
	while (sends_done < 2) { /* the device acknowledged 0 and 2, so 1 is in b's ring too */
		if (time(NULL) > end)
			FAIL("the eager sends did not complete");
		drain_a();
	}
	quiet("before the buffer is posted"); /* b's provider takes them as unexpected */

	static unsigned char b1[65536], b2[32768], b3[65536], b4[64], tb[100];
	static struct fi_context c1, c2, c3, c4, ct;
	struct iovec iov = {.iov_base = b1, .iov_len = sizeof b1};
	struct fi_msg msg = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &c1};
	OK(fi_recvmsg(b.ep, &msg, FI_MULTI_RECV));
	struct want w1[] = {{0, 100, 0, 0, 0}, {1, 40000, 100, 0, 0}, {2, 1, 40100, 0, 0}};
	expect("buffer 1, unexpected", &c1, b1, w1, 3);
	send_msg(3, 3000, 0, 0);
	expect("buffer 1, eager", &c1, b1, (struct want[]){{3, 3000, 40101, 0, 0}}, 1);
	send_msg(4, 20000, 0, 0); /* leaves 2,435 bytes: under 4,096 */
	expect("buffer 1, rendezvous", &c1, b1, (struct want[]){{4, 20000, 43101, 1, 0}}, 1);
	quiet("buffer 1 released");

	/* 2: the endpoint's default op_flags (FI_MULTI_RECV): fi_recv */
	OK(fi_recv(b.ep, b2, sizeof b2, NULL, FI_ADDR_UNSPEC, &c2));
	OK(fi_recv(b.ep, b3, sizeof b3, NULL, FI_ADDR_UNSPEC, &c3));
	send_msg(5, 10000, 0, 0);
	expect("buffer 2", &c2, b2, (struct want[]){{5, 10000, 0, 0, 0}}, 1);
	send_msg(6, 30000, 0, 0); /* more than buffer 2's 22,768 left: not split */
	expect_release("buffer 2, too short for 30,000 bytes", &c2);
	send_msg(7, 500, 0, 0);
	struct want w3[] = {{6, 30000, 0, 0, 0}, {7, 500, 30000, 0, 0}};
	expect("buffer 3", &c3, b3, w3, 2);

	/* 3: tagged receives stay single under those defaults */
	struct iovec tiov = {.iov_base = tb, .iov_len = sizeof tb};
	struct fi_msg_tagged tmsg = {.msg_iov = &tiov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 7, .context = &ct};
	if ((ret = (int)fi_trecvmsg(b.ep, &tmsg, FI_MULTI_RECV)) != -FI_EINVAL)
		FAIL("fi_trecvmsg with FI_MULTI_RECV: %d, want -FI_EINVAL", ret);
	OK(fi_trecv(b.ep, tb, sizeof tb, NULL, FI_ADDR_UNSPEC, 7, 0, &ct));
	send_msg(8, 50, 1, 7);
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	next(&e, &err);
	if (err.err || e.op_context != &ct || e.flags != (FI_RECV | FI_TAGGED) || e.len != 50 || e.tag != 7)
		FAIL("tagged receive: err %d ctx %p flags %#llx len %zu tag %llu", err.err, e.op_context,
		     (unsigned long long)e.flags, e.len, (unsigned long long)e.tag);
	check("tagged receive", tb, 50, 8);

	/* 4: cancel buffer 3 (34,500 bytes left): it took a message, so the
	 * release comes as an entry of its own behind the data completions
	 * (the error entry is read first) */
	OK(fi_cancel(&b.ep->fid, &c3));
	next(&e, &err);
	if (err.err != FI_ECANCELED || err.op_context != &c3 || (err.flags & FI_MULTI_RECV) || !(err.flags & FI_RECV))
		FAIL("cancel: err %d (%s) ctx %p flags %#llx; want FI_ECANCELED, ctx %p, FI_RECV without FI_MULTI_RECV",
		     err.err, fi_strerror(err.err), err.op_context, (unsigned long long)err.flags, (void *)&c3);
	expect_release("buffer 3, cancelled", &c3);
	if (fi_cancel(&b.ep->fid, &c3) != -FI_ENOENT)
		FAIL("a second fi_cancel of buffer 3 found it");
	printf("multirecv: buffer 3 cancelled: FI_ECANCELED, then its release\n");

	/* 5: a fresh buffer shorter than the message: truncated, released */
	OK(fi_recv(b.ep, b4, sizeof b4, NULL, FI_ADDR_UNSPEC, &c4));
	send_msg(9, 100, 0, 0);
	next(&e, &err);
	if (err.err != FI_ETRUNC || err.op_context != &c4 || err.len != 64 || err.olen != 36 || err.buf != b4)
		FAIL("truncation: err %d ctx %p len %zu olen %zu buf %p", err.err, err.op_context, err.len, err.olen,
		     err.buf);
	check("truncated message", b4, 64, 9);
	expect_release("buffer 4, truncated", &c4);
	quiet("the end");

	end = time(NULL) + 30;
	while (sends_done < 10) {
		if (time(NULL) > end)
			FAIL("%d of 10 sends completed", sends_done);
		drain_a();
	}
	close_side(&b);
	close_side(&a);
	fi_freeinfo(info);
	fi_freeinfo(hints);
	for (int i = 0; i < 16; i++)
		free(sbuf[i]);
	printf("multirecv: ok\n");
	return 0;
}
