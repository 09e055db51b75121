/* linkmem: buffers allocated from link memory through the provider's own
 * operations (include/fi_dimmnet.h), between two processes (a forked
 * pair, each with its endpoint). Bad input first (the sender): an
 * unknown ops name, size 0, a bad alignment, more than link memory
 * holds (-FI_ENOMEM), freeing what alloc did not hand out, a double
 * free. Then messages of eager and rendezvous sizes, each with its
 * payload checked (an FNV-1a hash sent over a pipe) and, on both sides,
 * the provider's counters read before and after: a body from or into a
 * link-memory buffer must have moved with no copy (zc_sends, zc_pulls
 * moved, copied_* not), an ordinary buffer, an inject, an eager send
 * from inside a buffer and a range straddling a buffer's end must have
 * been copied. RMA: a region registered inside a link buffer gets the
 * provider's key and is written and read by the device (device_rma
 * moved, the local side bounced only from ordinary memory), a region in
 * ordinary memory is served by the target's provider as before (the
 * counters still), both checked byte for byte, and 3,000 writes to a
 * target that makes no call meanwhile complete. Last, fi_close of an
 * endpoint holding buffers is -FI_EBUSY until they are freed. Prints
 * "linkmem: ok" or exits 1. */
#define _GNU_SOURCE
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#define PROG "linkmem"
#include "side.h"
#include "../include/fi_dimmnet.h"

static struct side me;
static struct fi_dimmnet_linkmem_ops *lm;
static int server; /* the receiver */
static int wfd, rfd;
static fi_addr_t peer;

static uint64_t fnv(const unsigned char *p, size_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ULL;
	return h;
}

static void put(const void *p, size_t n)
{
	if (write(wfd, p, n) != (ssize_t)n)
		FAIL("pipe write");
}
static void get(void *p, size_t n)
{
	if (read(rfd, p, n) != (ssize_t)n)
		FAIL("pipe read (the other side failed?)");
}

static struct fi_dimmnet_linkmem_stats stats(void)
{
	struct fi_dimmnet_linkmem_stats st;
	OK(lm->stats(me.ep, &st));
	return st;
}

/* wait reads one completion (ctx checked) within 60 s, progressing. */
static void wait_cq(void *ctx, size_t want_len, int rx)
{
	struct fi_cq_tagged_entry c;
	time_t end = time(NULL) + 60;
	for (;;) {
		ssize_t n = fi_cq_read(me.cq, &c, 1);
		if (n == 1) {
			if (c.op_context != ctx)
				FAIL("completion ctx %p, want %p", c.op_context, ctx);
			if (rx && c.len != want_len)
				FAIL("received %zu bytes, want %zu", c.len, want_len);
			return;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry e = {0};
			fi_cq_readerr(me.cq, &e, 0);
			FAIL("error entry: %d %s", e.err, fi_strerror(e.err));
		}
		if (n != -FI_EAGAIN)
			FAIL("fi_cq_read: %zd", n);
		if (time(NULL) > end)
			FAIL("no completion within 60 s");
	}
}

#define MIB (1 << 20)
#define EAGER_SURE 4096  /* at most this is eager on every medium */
#define RNDV_SURE 32768  /* at least this is a rendezvous */

enum { ORD, START, INSIDE, STRADDLE };
struct kase {
	const char *name;
	size_t size;
	int src, dst;  /* where the send leaves from, where it lands */
	int inject;
	int zc_send;   /* the sender must not copy */
	int zc_pull;   /* the receiver must not copy (rendezvous only) */
};
static const struct kase kases[] = {
	{"eager 8 B from a link buffer", 8, START, START, 0, 1, 0},
	{"eager 4 KiB from a link buffer", 4096, START, START, 0, 1, 0},
	{"eager 1000 B from inside a link buffer (no header room: copied)", 1000, INSIDE, START, 0, 0, 0},
	{"inject 8 B from a link buffer (copied: inject returns the buffer)", 8, START, START, 1, 0, 0},
	{"eager 8 B, ordinary memory", 8, ORD, ORD, 0, 0, 0},
	{"rendezvous 64 KiB, link buffers", 65536, START, START, 0, 1, 1},
	{"rendezvous 1 MiB, link buffers", MIB, START, START, 0, 1, 1},
	{"rendezvous 64 KiB, inside link buffers", 65536, INSIDE, INSIDE, 0, 1, 1},
	{"rendezvous 64 KiB, ordinary memory", 65536, ORD, ORD, 0, 0, 0},
	{"rendezvous 64 KiB, link buffer to ordinary", 65536, START, ORD, 0, 1, 0},
	{"rendezvous 64 KiB, ordinary to link buffer", 65536, ORD, START, 0, 0, 1},
	{"rendezvous 64 KiB straddling a link buffer's end (copied)", 65536, STRADDLE, START, 0, 0, 1},
};

static char *S, *T, *R, *ord;

/* progress_until_peer runs the endpoint (a target serves requests to
 * regions in ordinary memory when it progresses) until the other side
 * writes a byte on the pipe. */
static void progress_until_peer(void)
{
	int fl = fcntl(rfd, F_GETFL);
	fcntl(rfd, F_SETFL, fl | O_NONBLOCK);
	struct fi_cq_tagged_entry e;
	time_t end = time(NULL) + 60;
	for (;;) {
		char c;
		ssize_t n = read(rfd, &c, 1);
		if (n == 1)
			break;
		if (n == 0)
			FAIL("the other side is gone");
		fi_cq_read(me.cq, &e, 0);
		if (time(NULL) > end)
			FAIL("nothing from the other side within 60 s");
	}
	fcntl(rfd, F_SETFL, fl);
}

#define RSIZE 65536
#define IDLE_WRITES 3000
static char pat(size_t j, int seed) { return (char)(j * 7 + seed); }

/* rma: the receiver is the target of writes and reads, to a region in
 * its link memory and one in ordinary memory. */
static void rma(void)
{
	char c = 'r';
	if (server) {
		struct fid_mr *lmr, *omr, *bad;
		char *lreg = R + MIB, *oreg = ord + MIB;
		memset(lreg, 0, RSIZE);
		memset(oreg, 0, RSIZE);
		OK(fi_mr_reg(me.dom, lreg, RSIZE, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 7, 0, &lmr, NULL));
		OK(fi_mr_reg(me.dom, oreg, RSIZE, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 8, 0, &omr, NULL));
		uint64_t k[2] = {fi_mr_key(lmr), fi_mr_key(omr)};
		if (!(k[0] >> 63) || k[1] != 8)
			FAIL("keys %#llx (link memory: bit 63 wanted) and %#llx (ordinary: 8 wanted)",
			     (unsigned long long)k[0], (unsigned long long)k[1]);
		if (fi_mr_reg(me.dom, oreg, 64, FI_REMOTE_READ, 0, 1ULL << 63 | 5, 0, &bad, NULL) != -FI_ENOKEY)
			FAIL("ordinary memory registered under a key with bit 63 set");
		put(k, sizeof k);
		progress_until_peer(); /* the sender's writes, reads and atomics */
		get(&c, 1);            /* idle: no call into the provider while the sender writes */
		uint64_t lw, ow, iw;
		memcpy(&iw, lreg + 128, 8);
		if (iw != IDLE_WRITES - 1)
			FAIL("rma to an idle target: the word is %llu, want %d", (unsigned long long)iw, IDLE_WRITES - 1);
		memcpy(&lw, lreg + 64, 8);
		memcpy(&ow, oreg + 64, 8);
		if (lw != 7 || ow != 7)
			FAIL("rma: the regions' atomic word is %llu / %llu, want 7", (unsigned long long)lw, (unsigned long long)ow);
		for (size_t j = 0; j < RSIZE; j++)
			if ((j < 64 || j >= 72) && ((lreg[j] != pat(j, 1 + 3) && (j < 128 || j >= 136)) || oreg[j] != pat(j, 1 + 4 + 3)))
				FAIL("rma: the regions' byte %zu is %d / %d, want %d / %d", j, lreg[j], oreg[j], pat(j, 4), pat(j, 8));
		OK(fi_close(&lmr->fid));
		OK(fi_close(&omr->fid));
		put(&c, 1);
		printf("linkmem: receiver: rma regions ok\n");
		return;
	}
	uint64_t k[2];
	get(k, sizeof k);
	for (int r = 0; r < 2; r++)
		for (int li = 0; li < 2; li++)
			for (int si = 0; si < 2; si++) {
				int seed = 1 + r * 4 + li * 2 + si;
				size_t size = si ? RSIZE : 8;
				char *local = li ? ord : S, *back = li ? ord + RSIZE : S + RSIZE;
				struct fi_context ctx;
				struct fi_dimmnet_linkmem_stats a = stats(), b;
				for (size_t j = 0; j < size; j++)
					local[j] = pat(j, seed);
				memset(back, 0, size);
				OK(fi_write(me.ep, local, size, NULL, peer, 0, k[r], &ctx));
				wait_cq(&ctx, 0, 0);
				OK(fi_read(me.ep, back, size, NULL, peer, 0, k[r], &ctx));
				wait_cq(&ctx, 0, 0);
				if (memcmp(local, back, size))
					FAIL("rma %s region, %s buffer, %zu B: read back differs", r ? "ordinary" : "link", li ? "ordinary" : "link", size);
				b = stats();
				uint64_t dev = b.device_rma - a.device_rma, cp = b.copied_rma - a.copied_rma;
				uint64_t wdev = r == 0 ? 2 : 0, wcp = r == 0 && li ? 2 : 0;
				if (dev != wdev || cp != wcp)
					FAIL("rma %s region, %s buffer, %zu B: %llu by the device, %llu bounced (want %llu, %llu)",
					     r ? "ordinary" : "link", li ? "ordinary" : "link", size,
					     (unsigned long long)dev, (unsigned long long)cp, (unsigned long long)wdev, (unsigned long long)wcp);
				printf("linkmem: sender: rma write and read, %s region, %s buffer, %zu B ok\n",
				       r ? "ordinary" : "link", li ? "ordinary" : "link", size);
			}
	/* 8-byte atomics on the word at offset 64: fetch-add, compare-swap,
	 * atomic read; by the device's FADD8 and CAS8 on the link region */
	for (int r = 0; r < 2; r++) {
		struct fi_context ctx;
		struct fi_dimmnet_linkmem_stats a = stats(), b;
		uint64_t v = 100, old = 0, cmp = 105, swap = 7, add = 5;
		memcpy(S, &v, 8);
		OK(fi_write(me.ep, S, 8, NULL, peer, 64, k[r], &ctx));
		wait_cq(&ctx, 0, 0);
		OK(fi_fetch_atomic(me.ep, &add, 1, NULL, &old, NULL, peer, 64, k[r], FI_UINT64, FI_SUM, &ctx));
		wait_cq(&ctx, 0, 0);
		if (old != 100)
			FAIL("fetch-add on the %s region: old %llu, want 100", r ? "ordinary" : "link", (unsigned long long)old);
		OK(fi_compare_atomic(me.ep, &swap, 1, NULL, &cmp, NULL, &old, NULL, peer, 64, k[r], FI_UINT64, FI_CSWAP, &ctx));
		wait_cq(&ctx, 0, 0);
		if (old != 105)
			FAIL("compare-swap on the %s region: old %llu, want 105", r ? "ordinary" : "link", (unsigned long long)old);
		OK(fi_fetch_atomic(me.ep, NULL, 1, NULL, &old, NULL, peer, 64, k[r], FI_UINT64, FI_ATOMIC_READ, &ctx));
		wait_cq(&ctx, 0, 0);
		if (old != 7)
			FAIL("atomic read on the %s region: %llu, want 7", r ? "ordinary" : "link", (unsigned long long)old);
		b = stats();
		if (b.device_rma - a.device_rma != (r == 0 ? 4u : 0u))
			FAIL("atomics on the %s region: %llu by the device (want %d)", r ? "ordinary" : "link",
			     (unsigned long long)(b.device_rma - a.device_rma), r == 0 ? 4 : 0);
		printf("linkmem: sender: atomics on the %s region ok\n", r ? "ordinary" : "link");
	}
	put(&c, 1); /* the target stops progressing */
	/* writes to a target that makes no call: more than its status ring
	 * (1024) holds, which untagged PUSHes would fill (HOLD_LIMIT) */
	struct fi_dimmnet_linkmem_stats a = stats();
	for (uint64_t i = 0; i < IDLE_WRITES; i++) {
		struct fi_context ctx;
		memcpy(S, &i, 8);
		OK(fi_write(me.ep, S, 8, NULL, peer, 128, k[0], &ctx));
		wait_cq(&ctx, 0, 0);
	}
	if (stats().device_rma - a.device_rma != IDLE_WRITES)
		FAIL("writes to an idle target: %llu by the device", (unsigned long long)(stats().device_rma - a.device_rma));
	printf("linkmem: sender: %d writes to an idle target ok\n", IDLE_WRITES);
	put(&c, 1);
	get(&c, 1);
}

static char *where(int w, size_t size)
{
	char *b = server ? R : S;
	switch (w) {
	case ORD: return ord;
	case START: return b;
	case INSIDE: return b + 4096;
	case STRADDLE: return S + MIB - size / 2; /* half in S, the rest in T's room and T */
	}
	return NULL;
}

static void bad_input(void)
{
	void *p, *q;
	struct fi_dimmnet_linkmem_ops *x;
	if (fi_open_ops(&me.dom->fid, "dimmnet_no_such_ops", 0, (void **)&x, NULL) != -FI_ENOSYS)
		FAIL("an unknown ops name was not -FI_ENOSYS");
	if (lm->alloc(me.ep, 0, 0, &p) != -FI_EINVAL)
		FAIL("alloc of 0 bytes was not -FI_EINVAL");
	if (lm->alloc(me.ep, 64, 48, &p) != -FI_EINVAL)
		FAIL("alloc aligned to 48 was not -FI_EINVAL");
	if (lm->alloc(me.ep, (size_t)1 << 40, 0, &p) != -FI_ENOMEM)
		FAIL("alloc of 1 TiB was not -FI_ENOMEM");
	struct fi_dimmnet_linkmem_stats st = stats();
	if (st.avail < 4 * MIB || st.allocated != 0)
		FAIL("a fresh endpoint offers %llu bytes, holds %llu", (unsigned long long)st.avail, (unsigned long long)st.allocated);
	/* all it offers, then more than it offers */
	OK(lm->alloc(me.ep, st.avail, 0, &p));
	if (stats().avail != 0)
		FAIL("after taking all, %llu more offered", (unsigned long long)stats().avail);
	if (lm->alloc(me.ep, 64, 0, &q) != -FI_ENOMEM)
		FAIL("alloc beyond what link memory holds was not -FI_ENOMEM");
	OK(lm->free(me.ep, p));
	if (lm->alloc(me.ep, st.avail + 65536, 0, &p) != -FI_ENOMEM)
		FAIL("alloc of avail + 64 KiB was not -FI_ENOMEM");
	/* what alloc did not hand out */
	OK(lm->alloc(me.ep, 8192, 4096, &p));
	if ((uintptr_t)p % 4096)
		FAIL("alloc aligned to 4096 gave %p", p);
	char ordinary[64];
	if (lm->free(me.ep, ordinary) != -FI_EINVAL)
		FAIL("freeing ordinary memory was not -FI_EINVAL");
	if (lm->free(me.ep, (char *)p + 64) != -FI_EINVAL)
		FAIL("freeing a pointer inside a buffer was not -FI_EINVAL");
	OK(lm->free(me.ep, p));
	if (lm->free(me.ep, p) != -FI_EINVAL)
		FAIL("a double free was not -FI_EINVAL");
	if (lm->alloc(NULL, 64, 0, &p) != -FI_EINVAL)
		FAIL("alloc on no endpoint was not -FI_EINVAL");
	if (stats().allocated != 0)
		FAIL("%llu bytes still held", (unsigned long long)stats().allocated);
}

int main(void)
{
	int p2c[2], c2p[2];
	if (pipe(p2c) || pipe(c2p))
		return 1;
	pid_t pid = fork(); /* before libfabric loads the provider: a process each */
	if (pid < 0)
		return 1;
	server = pid == 0;
	wfd = server ? c2p[1] : p2c[1];
	rfd = server ? p2c[0] : c2p[0];
	/* only the other side holds the ends this one reads: a side that
	 * fails ends the other's pipe read, and the receiver dies with the
	 * sender */
	close(server ? c2p[0] : p2c[0]);
	close(server ? p2c[1] : c2p[1]);
	if (server)
		prctl(PR_SET_PDEATHSIG, SIGKILL);

	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_TAGGED | FI_MSG | FI_RMA | FI_ATOMIC | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	open_side(&me);
	/* the ops come from the domain; the endpoint's fid gives the same */
	OK(fi_open_ops(&me.dom->fid, FI_DIMMNET_LINKMEM_OPS, 0, (void **)&lm, NULL));
	struct fi_dimmnet_linkmem_ops *lm2;
	OK(fi_open_ops(&me.ep->fid, FI_DIMMNET_LINKMEM_OPS, 0, (void **)&lm2, NULL));
	if (lm2 != lm || lm->size != sizeof *lm)
		FAIL("ops from the endpoint differ, or size %zu", lm->size);

	put(&me.addrlen, sizeof me.addrlen);
	put(me.addr, me.addrlen);
	size_t pl;
	char pa[64];
	get(&pl, sizeof pl);
	if (pl > sizeof pa)
		FAIL("address of %zu bytes", pl);
	get(pa, pl);
	if (fi_av_insert(me.av, pa, 1, &peer, 0, NULL) != 1)
		FAIL("fi_av_insert");

	if (!server)
		bad_input();
	ord = malloc(2 * MIB);
	if (server) {
		OK(lm->alloc(me.ep, 2 * MIB, 0, (void **)&R));
	} else {
		OK(lm->alloc(me.ep, MIB, 0, (void **)&S));
		OK(lm->alloc(me.ep, MIB, 0, (void **)&T));
		if (T != S + MIB + 64)
			FAIL("T at %p is not right after S %p and its room: the straddle case needs them adjacent", T, S);
	}

	int nk = sizeof kases / sizeof kases[0];
	for (int i = 0; i < nk; i++) {
		const struct kase *k = &kases[i];
		struct fi_context ctx;
		struct fi_dimmnet_linkmem_stats a = stats(), b;
		char c = 'r';
		if (server) {
			char *buf = where(k->dst, k->size);
			memset(buf, 0xee, k->size);
			OK(fi_trecv(me.ep, buf, k->size, NULL, FI_ADDR_UNSPEC, (uint64_t)i, 0, &ctx));
			put(&c, 1);
			uint64_t h;
			get(&h, sizeof h);
			wait_cq(&ctx, k->size, 1);
			if (fnv((unsigned char *)buf, k->size) != h)
				FAIL("%s: payload differs", k->name);
			b = stats();
			uint64_t zc = b.zc_pulls - a.zc_pulls, cp = b.copied_pulls - a.copied_pulls;
			if (k->size >= RNDV_SURE && k->zc_pull && (zc != 1 || cp != 0))
				FAIL("%s: receiver pulled %llu with no copy, %llu through a bounce (want 1, 0)", k->name,
				     (unsigned long long)zc, (unsigned long long)cp);
			if (k->size >= RNDV_SURE && !k->zc_pull && (zc != 0 || cp != 1))
				FAIL("%s: receiver pulled %llu with no copy, %llu through a bounce (want 0, 1)", k->name,
				     (unsigned long long)zc, (unsigned long long)cp);
			if (k->size <= EAGER_SURE && (zc || cp))
				FAIL("%s: an eager message pulled", k->name);
			put(&c, 1);
		} else {
			char *buf = where(k->src, k->size);
			for (size_t j = 0; j < k->size; j++) {
				char *q = buf + j;
				if (q >= S + MIB && q < T)
					continue; /* T's room: the provider's */
				*q = (char)(j * 13 + i);
			}
			get(&c, 1);
			uint64_t h = fnv((unsigned char *)buf, k->size);
			if (k->inject)
				OK(fi_tinject(me.ep, buf, k->size, peer, (uint64_t)i));
			else
				OK(fi_tsend(me.ep, buf, k->size, NULL, peer, (uint64_t)i, &ctx));
			put(&h, sizeof h);
			if (!k->inject)
				wait_cq(&ctx, 0, 0);
			get(&c, 1); /* the receiver has it */
			b = stats();
			uint64_t zc = b.zc_sends - a.zc_sends, cp = b.copied_sends - a.copied_sends;
			if (k->zc_send ? zc != 1 || cp != 0 : zc != 0 || cp != 1)
				FAIL("%s: %llu sent with no copy, %llu copied (want %d, %d)", k->name,
				     (unsigned long long)zc, (unsigned long long)cp, k->zc_send, !k->zc_send);
		}
		printf("linkmem: %s: %s ok\n", server ? "receiver" : "sender", k->name);
	}

	rma();

	/* two eager sends from one buffer's start, the first in flight: the
	 * second finds the header room taken and is copied; both arrive */
	{
		struct fi_context c1, c2;
		char c = 'r';
		if (server) {
			OK(fi_trecv(me.ep, R, 64, NULL, FI_ADDR_UNSPEC, 100, 0, &c1));
			OK(fi_trecv(me.ep, R + 4096, 64, NULL, FI_ADDR_UNSPEC, 101, 0, &c2));
			put(&c, 1);
			wait_cq(&c1, 64, 1);
			wait_cq(&c2, 64, 1);
			if (memcmp(R, R + 4096, 64) || R[5] != 'x')
				FAIL("two sends from one buffer: payloads differ");
			put(&c, 1);
		} else {
			struct fi_dimmnet_linkmem_stats a = stats(), b;
			memset(S, 'x', 64);
			get(&c, 1);
			OK(fi_tsend(me.ep, S, 64, NULL, peer, 100, &c1));
			OK(fi_tsend(me.ep, S, 64, NULL, peer, 101, &c2));
			wait_cq(&c1, 0, 0);
			wait_cq(&c2, 0, 0);
			get(&c, 1);
			b = stats();
			if (b.zc_sends - a.zc_sends != 1 || b.copied_sends - a.copied_sends != 1)
				FAIL("two sends from one start: %llu with no copy, %llu copied (want 1, 1)",
				     (unsigned long long)(b.zc_sends - a.zc_sends), (unsigned long long)(b.copied_sends - a.copied_sends));
		}
	}

	/* an endpoint holding buffers does not close under them */
	if (fi_close(&me.ep->fid) != -FI_EBUSY)
		FAIL("fi_close of an endpoint holding link buffers was not -FI_EBUSY");
	if (server) {
		OK(lm->free(me.ep, R));
	} else {
		OK(lm->free(me.ep, S));
		OK(lm->free(me.ep, T));
	}
	char c = 'q';
	put(&c, 1); /* neither closes while the other may still need its acknowledgements */
	get(&c, 1);
	close_side(&me);
	fi_freeinfo(info);
	free(ord);
	if (!server) {
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			FAIL("the receiver failed");
		printf("linkmem: ok\n");
	}
	return 0;
}
