/* cdriver: a dimmnet driver in C11, built on uapi/dimmnet.h.
 *
 *     cdriver DIR/node0.sock DIR/node1.sock
 *     cdriver DIR            (or DIMMNET_DIR=DIR, as dimmnet conform sets)
 *     cdriver --bad protocol|short-map|garbage DIR
 *
 * Attaches to two nodes of a running `dimmnet serve --dir DIR` as an
 * ivshmem client, as QEMU does (the region and the eventfds arrive over the
 * socket with SCM_RIGHTS), checks MAGIC, ABI_VERSION, STATE and the
 * geometry, takes over each device where a previous driver left it, then:
 * PUSHes a pattern from the first node to the second; IPUSHes a message
 * into a ring it sets up on the second; PULLs the pattern back; FADD8 and
 * CAS8 on a word of the second node; posts a misaligned PUSH and checks its
 * named error; and blocks on the second node's interrupt eventfd until a
 * PUSH arrives. It prints "ok" last and exits 0, or exits 1 naming what
 * failed. With --bad it does one wrong thing on purpose and exits 0 when
 * it got the refusal or error the datasheet names (see README.md).
 *
 * Every section name in the comments is a heading of docs/datasheet.md.
 * Build: gcc -std=c11 -O2 -Wall -Wextra -I uapi -pthread \
 *            -o cdriver docs/examples/cdriver/cdriver.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dimmnet.h"

#define SLEEP_MS 10           /* longest block on the interrupt (Memory ordering, rule 5) */
#define STALE_NS 2000000000LL /* ALIVE unchanged this long: the device is gone (Liveness) */
#define WAIT_NS 10000000000LL /* give up on a status after 10 s */
#define SPIN_NS 200000LL      /* poll this long before sleeping on the interrupt */

/* One device, attached over the ivshmem socket (Transports). */
struct dev {
	const char *path;
	int sock, doorbell, irq;
	int64_t peer;
	uint8_t *mem;
	size_t size;
	struct dimmnet_regs *regs;
	uint64_t node, gpid, vectors;
	uint64_t cmdq, ncmd, statq, nstat, lm, lm_size, amt_off, namt;
	uint64_t next, first, head;
	uint64_t alive;
	int64_t alive_at;
	unsigned sleeps, woken;
};

static void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	printf("cdriver: FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	fflush(stdout);
	exit(1);
}

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Memory ordering: every register and ring word is one aligned 64-bit
 * atomic access; release stores hand things to the device, acquire loads
 * observe it (rules 1-3). */
#define LD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST) /* rule 4 */

static uint64_t *word(struct dev *d, uint64_t off) { return (uint64_t *)(d->mem + off); }

/* One ivshmem server message: a little-endian int64 and at most one fd.
 * Returns 0, or -1 when the server closed the socket. */
static int recv_msg(int sock, int64_t *v, int *fd)
{
	uint8_t buf[8];
	size_t got = 0;
	*fd = -1;
	while (got < sizeof buf) {
		union { /* aligned for the cmsghdr it holds */
			char buf[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} ctl;
		struct iovec iov = {buf + got, sizeof buf - got};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof ctl.buf};
		ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				memcpy(fd, CMSG_DATA(c), sizeof(int)); /* fds come with the first byte */
		got += (size_t)n;
	}
	uint64_t u = 0;
	for (int i = 7; i >= 0; i--)
		u = u << 8 | buf[i];
	*v = (int64_t)u;
	return 0;
}

static bool pow2(uint64_t n) { return n && !(n & (n - 1)); }

/* Starting up: the geometry must lie inside what we mapped. Returns NULL
 * or the rule broken. */
static const char *check_geometry(struct dev *d, char *why, size_t len)
{
	struct dimmnet_regs *r = d->regs;
	uint64_t n = d->size;
	struct {
		const char *name;
		uint64_t off, size;
	} parts[] = {
	    {"command queue", LD(&r->cmdq_off), LD(&r->cmdq_entries) * DIMMNET_DESC_SIZE},
	    {"status ring", LD(&r->statq_off), LD(&r->statq_entries) * DIMMNET_STATUS_SIZE},
	    {"AMT", LD(&r->amt_off), LD(&r->amt_entries) * DIMMNET_AMT_SIZE},
	    {"LLCM", LD(&r->llcm_off), LD(&r->llcm_size)},
	    {"scratch", LD(&r->scratch_off), LD(&r->scratch_size)},
	    {"link memory", LD(&r->linkmem_off), LD(&r->linkmem_size)},
	    {"AMT Address Table mirror", LD(&r->amtat_mirror_off), LD(&r->amtat_entries) * 4},
	};
	if (LD(&r->region_size) != n) {
		snprintf(why, len, "geometry: REGION_SIZE %llu but mapped %llu bytes",
		         (unsigned long long)LD(&r->region_size), (unsigned long long)n);
		return why;
	}
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
		if (parts[i].off > n || parts[i].size > n - parts[i].off || parts[i].off % 64) {
			snprintf(why, len, "geometry: %s [%#llx,+%#llx) outside region of %#llx bytes or misaligned", parts[i].name,
			         (unsigned long long)parts[i].off, (unsigned long long)parts[i].size, (unsigned long long)n);
			return why;
		}
	}
	if (!pow2(LD(&r->cmdq_entries)) || !pow2(LD(&r->statq_entries)) || LD(&r->mtu) < 64) {
		snprintf(why, len, "geometry: CMDQ_ENTRIES %llu or STATQ_ENTRIES %llu not a power of two, or MTU %llu",
		         (unsigned long long)LD(&r->cmdq_entries), (unsigned long long)LD(&r->statq_entries),
		         (unsigned long long)LD(&r->mtu));
		return why;
	}
	return NULL;
}

enum bad { BAD_NONE, BAD_PROTOCOL, BAD_SHORT_MAP, BAD_GARBAGE };

/* Transports: attach as an ivshmem client. The server sends, in order:
 * version 0, our peer id, -1 with the region's fd, every other peer's id
 * once per vector (the device, peer 0, first), and last our own id once per
 * vector. The region is usable once -1 arrived; the set-up is over when our
 * own id has come VECTORS times (VECTORS is a register of that region). */
static void attach(struct dev *d, const char *path, enum bad bad)
{
	memset(d, 0, sizeof *d);
	d->path = path;
	d->doorbell = d->irq = -1;
	d->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		fail("%s: socket path too long", path);
	strcpy(sa.sun_path, path);
	if (d->sock < 0 || connect(d->sock, (struct sockaddr *)&sa, sizeof sa) < 0)
		fail("%s: connect: %s", path, strerror(errno));
	int64_t v;
	int fd;
	if (recv_msg(d->sock, &v, &fd) < 0)
		fail("%s: the server closed the socket", path);
	if (v != 0)
		fail("%s: server refused us (version %lld)", path, (long long)v);
	if (recv_msg(d->sock, &d->peer, &fd) < 0)
		fail("%s: the server closed the socket", path);
	if (bad == BAD_PROTOCOL) {
		/* The protocol is one-way: a client that sends anything is leaving. */
		int64_t junk = 0;
		if (write(d->sock, &junk, sizeof junk) != sizeof junk)
			fail("%s: write: %s", path, strerror(errno));
		int n = 0;
		while (recv_msg(d->sock, &v, &fd) == 0) {
			if (fd >= 0)
				close(fd);
			n++;
		}
		printf("cdriver: bad input: sent 8 bytes to the server during set-up: it closed the socket after %d "
		       "more messages (the protocol is one-way; its log names the refusal)\n", n);
		exit(0);
	}
	int shm = -1;
	uint64_t own = 0;
	while (shm < 0 || own < d->vectors) {
		if (recv_msg(d->sock, &v, &fd) < 0)
			fail("%s: the server closed the socket during set-up", path);
		if (v == -1 && fd >= 0 && shm < 0) {
			shm = fd;
			struct stat st;
			if (fstat(shm, &st) < 0)
				fail("%s: fstat: %s", path, strerror(errno));
			d->size = (size_t)st.st_size;
			if (bad == BAD_SHORT_MAP)
				d->size /= 2; /* wrong on purpose: map half the region */
			if (d->size < DIMMNET_REGS_SIZE)
				fail("%s: region of %zu bytes", path, d->size);
			d->mem = mmap(NULL, d->size, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
			if (d->mem == MAP_FAILED)
				fail("%s: mmap: %s", path, strerror(errno));
			close(shm);
			d->regs = (struct dimmnet_regs *)d->mem;
			d->vectors = LD(&d->regs->vectors);
			if (d->vectors == 0)
				d->vectors = 1;
		} else if (v == 0 && fd >= 0 && d->doorbell < 0) {
			d->doorbell = fd; /* peer 0's vector 0: the device's doorbell */
		} else if (v == d->peer && fd >= 0) {
			if (d->irq < 0)
				d->irq = fd; /* our vector 0: the interrupt */
			else
				close(fd);
			own++;
		} else if (fd >= 0) {
			close(fd); /* other peers' vectors, or the device's further ones */
		}
	}
	if (d->doorbell < 0)
		fail("%s: no device eventfd (peer 0)", path);

	/* Starting up: identity, state, geometry. */
	struct dimmnet_regs *r = d->regs;
	if (LD(&r->magic) != DIMMNET_MAGIC)
		fail("%s: MAGIC %#llx: not a dimmnet device", path, (unsigned long long)LD(&r->magic));
	if (LD(&r->abi_version) != DIMMNET_ABI_VERSION)
		fail("%s: ABI_VERSION %llu, this driver speaks %llu", path, (unsigned long long)LD(&r->abi_version),
		     (unsigned long long)DIMMNET_ABI_VERSION);
	if (LD(&r->state) != DIMMNET_STATE_RUNNING)
		fail("%s: STATE %llu", path, (unsigned long long)LD(&r->state));
	char why[200];
	if (check_geometry(d, why, sizeof why)) {
		if (bad == BAD_SHORT_MAP) {
			printf("cdriver: bad input: mapped half the region: refused it: %s\n", why);
			exit(0);
		}
		fail("%s: %s", path, why);
	}
	if (bad == BAD_SHORT_MAP)
		fail("%s: a region mapped short passed the geometry check", path);
	d->node = LD(&r->node_id);
	d->gpid = d->node * LD(&r->procs_per_node); /* process 0 of this node */
	d->cmdq = LD(&r->cmdq_off), d->ncmd = LD(&r->cmdq_entries);
	d->statq = LD(&r->statq_off), d->nstat = LD(&r->statq_entries);
	d->lm = LD(&r->linkmem_off), d->lm_size = LD(&r->linkmem_size);
	d->amt_off = LD(&r->amt_off), d->namt = LD(&r->amt_entries);
	/* Our first command index: the first at or above CMDQ_HEAD whose slot is not published. */
	uint64_t idx = LD(&r->cmdq_head);
	while (LD(word(d, d->cmdq + (idx & (d->ncmd - 1)) * DIMMNET_DESC_SIZE + DIMMNET_DESC_SEQ_OFF)) == idx + 1)
		idx++;
	d->first = d->next = idx;
	/* Discard the previous driver's statuses. */
	d->head = LD(&r->statq_tail);
	ST(&r->statq_head, d->head);
	d->alive = LD(&r->alive), d->alive_at = now_ns();
}

/* The doorbell: peer 0's eventfd. DOORBELL in the page is only a count. */
static void ring_doorbell(struct dev *d)
{
	uint64_t one = 1;
	ST(&d->regs->doorbell, LD(&d->regs->doorbell) + 1);
	if (write(d->doorbell, &one, sizeof one) != sizeof one)
		fail("%s: doorbell: %s", d->path, strerror(errno));
}

/* Publishing a command; returns its index (END of its completion). */
static uint64_t post(struct dev *d, struct dimmnet_desc c)
{
	uint64_t idx = d->next;
	if (idx - LD(&d->regs->cmdq_head) >= d->ncmd)
		fail("%s: command queue full", d->path);
	struct dimmnet_desc *slot = (struct dimmnet_desc *)(d->mem + d->cmdq + (idx & (d->ncmd - 1)) * DIMMNET_DESC_SIZE);
	if (c.src_proc == 0)
		c.src_proc = (uint32_t)d->gpid;
	memcpy(slot, &c, DIMMNET_DESC_SEQ_OFF); /* words 0 to 6: plain stores */
	ST(&slot->seq, idx + 1);                /* SEQ last: published */
	d->next = idx + 1;
	ST(&d->regs->cmdq_tail, idx + 1); /* for inspectors */
	FENCE();                          /* SEQ store, then DEV_SLEEP load */
	if (LD(&d->regs->dev_sleep))
		ring_doorbell(d);
	return idx;
}

/* Liveness: STATE and ALIVE. */
static void liveness(struct dev *d)
{
	uint64_t state = LD(&d->regs->state), a = LD(&d->regs->alive);
	if (state != DIMMNET_STATE_RUNNING)
		fail("%s: device STATE %llu", d->path, (unsigned long long)state);
	if (a != d->alive)
		d->alive = a, d->alive_at = now_ns();
	else if (now_ns() - d->alive_at > STALE_NS)
		fail("%s: ALIVE stale", d->path);
}

/* A message after set-up: a new peer's vector (an fd), or a peer leaving. */
static void server_message(struct dev *d)
{
	int64_t v;
	int fd;
	if (recv_msg(d->sock, &v, &fd) < 0)
		fail("%s: the server closed the socket", d->path);
	if (fd >= 0)
		close(fd);
	else if (v == 0)
		fail("%s: peer 0 (the device) left", d->path);
}

/* Consuming statuses: the next entry into *s, or false. */
static bool poll_status(struct dev *d, struct dimmnet_status *s)
{
	if (LD(&d->regs->statq_tail) == d->head) /* acquire: then the entry */
		return false;
	memcpy(s, d->mem + d->statq + (d->head & (d->nstat - 1)) * DIMMNET_STATUS_SIZE, sizeof *s);
	d->head++;
	ST(&d->regs->statq_head, d->head); /* after reading the entry */
	return true;
}

/* Block on the interrupt eventfd (and the socket) for at most ms. */
static void block(struct dev *d, int ms)
{
	struct pollfd p[2] = {{.fd = d->irq, .events = POLLIN}, {.fd = d->sock, .events = POLLIN}};
	d->sleeps++;
	if (poll(p, 2, ms) < 0 && errno != EINTR)
		fail("%s: poll: %s", d->path, strerror(errno));
	if (p[0].revents & POLLIN) {
		uint64_t n;
		if (read(d->irq, &n, sizeof n) == sizeof n)
			d->woken++;
	}
	if (p[1].revents & (POLLIN | POLLHUP))
		server_message(d);
}

/* Waiting for statuses: poll a while, then sleep on the interrupt. */
static void wait_status(struct dev *d, struct dimmnet_status *s, int64_t spin_ns, int sleep_ms)
{
	int64_t start = now_ns();
	while (!poll_status(d, s)) {
		int64_t t = now_ns() - start;
		if (t > WAIT_NS)
			fail("%s: no status in %lld s", d->path, WAIT_NS / 1000000000LL);
		if (t < spin_ns)
			continue;
		ST(&d->regs->drv_wait, 1); /* STATQ_HEAD is already published (poll_status stores it) */
		FENCE();                   /* DRV_WAIT store, then STATQ_TAIL load */
		if (LD(&d->regs->statq_tail) == d->head)
			block(d, sleep_ms);
		ST(&d->regs->drv_wait, 0);
		liveness(d);
	}
}

/* The completion of command idx; other statuses are counted in *kept. */
static struct dimmnet_status wait_completion(struct dev *d, uint64_t idx, unsigned *kept)
{
	struct dimmnet_status s;
	for (;;) {
		wait_status(d, &s, SPIN_NS, SLEEP_MS);
		if ((s.type == DIMMNET_ST_DONE || s.type == DIMMNET_ST_ERROR || s.type == DIMMNET_ST_PULL_DONE) && s.end == idx)
			return s;
		(*kept)++;
	}
}

static uint8_t *linkmem(struct dev *d, uint64_t addr) { return d->mem + d->lm + addr; }

static const char *st_name(const struct dimmnet_status *s)
{
	static char b[160];
	snprintf(b, sizeof b, "%s (opcode %s, err %s, end %llu, len %u)", dimmnet_status_name(s->type),
	         dimmnet_opcode_name(s->opcode), dimmnet_errno_name(s->err), (unsigned long long)s->end, s->length);
	return b;
}

/* A thread that sleeps on node b's interrupt until a status arrives. */
struct sleeper {
	struct dev *b;
	struct dimmnet_status s;
	int armed; /* DRV_WAIT is 1 and the tail was checked: post now */
	unsigned woken;
};

static void *sleep_on_interrupt(void *arg)
{
	struct sleeper *w = arg;
	struct dev *b = w->b;
	int64_t start = now_ns();
	while (!poll_status(b, &w->s)) {
		if (now_ns() - start > WAIT_NS)
			fail("%s: no status while sleeping on the interrupt", b->path);
		ST(&b->regs->drv_wait, 1);
		FENCE();
		if (LD(&b->regs->statq_tail) == b->head) {
			__atomic_store_n(&w->armed, 1, __ATOMIC_SEQ_CST);
			unsigned before = b->woken;
			block(b, 1000); /* bounded (rule 5), long enough to be woken rather than time out */
			w->woken += b->woken - before;
		}
		ST(&b->regs->drv_wait, 0);
		liveness(b);
	}
	__atomic_store_n(&w->armed, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static void sockets(int argc, char **argv, const char **s0, const char **s1)
{
	static char p0[4096], p1[4096];
	const char *dir = getenv("DIMMNET_DIR");
	if (argc == 2) {
		*s0 = argv[0], *s1 = argv[1];
		return;
	}
	if (argc == 1)
		dir = argv[0];
	if (argc > 2 || !dir) {
		fprintf(stderr, "usage: cdriver [--bad protocol|short-map|garbage] DIR | SOCK0 SOCK1\n");
		exit(2);
	}
	snprintf(p0, sizeof p0, "%s/node0.sock", dir);
	snprintf(p1, sizeof p1, "%s/node1.sock", dir);
	*s0 = p0, *s1 = p1;
}

/* --bad garbage: descriptors no driver should post; each completes with
 * its named error, and the device goes on. */
static void garbage(struct dev *a, struct dev *b)
{
	unsigned kept = 0;
	struct {
		struct dimmnet_desc c;
		unsigned want;
	} bad[] = {
	    {{.opcode = 0xEE, .flags = 0xFF, .dst_node = 0xBEEF, .length = 0xDEADBEEF, .local_addr = ~0ULL}, DIMMNET_E_BAD_OPCODE},
	    {{.opcode = DIMMNET_OP_PUSH, .flags = 0x80, .dst_node = (uint16_t)b->node, .length = 8}, DIMMNET_E_BAD_FLAGS},
	    {{.opcode = DIMMNET_OP_PUSH, .dst_node = (uint16_t)b->node, .length = 0}, DIMMNET_E_BAD_LENGTH},
	    {{.opcode = DIMMNET_OP_PUSH, .dst_node = (uint16_t)b->node, .length = 8, .local_addr = a->lm_size}, DIMMNET_E_BAD_ADDR},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		bad[i].c.cookie = 0xBAD0 + i;
		uint64_t idx = post(a, bad[i].c);
		struct dimmnet_status s = wait_completion(a, idx, &kept);
		if (s.type != DIMMNET_ST_ERROR || s.err != bad[i].want || s.cookie != 0xBAD0 + i)
			fail("garbage descriptor %zu: %s, want ERROR %s", i, st_name(&s), dimmnet_errno_name(bad[i].want));
		printf("cdriver: bad input: garbage descriptor %zu (opcode %u): ERROR %s\n", i, bad[i].c.opcode,
		       dimmnet_errno_name(s.err));
	}
	/* and the device still works */
	uint64_t idx = post(a, (struct dimmnet_desc){.opcode = DIMMNET_OP_NOP, .flags = DIMMNET_FLAG_SIGNAL, .cookie = 7});
	struct dimmnet_status s = wait_completion(a, idx, &kept);
	if (s.type != DIMMNET_ST_DONE)
		fail("NOP after the garbage: %s", st_name(&s));
	printf("cdriver: a NOP after the garbage: DONE\n");
	exit(0);
}

int main(int argc, char **argv)
{
	enum bad bad = BAD_NONE;
	argc--, argv++;
	if (argc >= 2 && strcmp(argv[0], "--bad") == 0) {
		if (strcmp(argv[1], "protocol") == 0)
			bad = BAD_PROTOCOL;
		else if (strcmp(argv[1], "short-map") == 0)
			bad = BAD_SHORT_MAP;
		else if (strcmp(argv[1], "garbage") == 0)
			bad = BAD_GARBAGE;
		else
			argc = 99; /* usage */
		argc -= 2, argv += 2;
	}
	const char *s0, *s1;
	sockets(argc, argv, &s0, &s1);
	setvbuf(stdout, NULL, _IOLBF, 0);
	static struct dev a, b;
	attach(&a, s0, bad);
	attach(&b, s1, BAD_NONE);
	printf("cdriver: node %llu (peer %lld, first command index %llu) -> node %llu (peer %lld), %llu vectors\n",
	       (unsigned long long)a.node, (long long)a.peer, (unsigned long long)a.first, (unsigned long long)b.node,
	       (long long)b.peer, (unsigned long long)a.vectors);
	if (bad == BAD_GARBAGE)
		garbage(&a, &b);

	unsigned kept = 0;
	struct dimmnet_status s, got;
	const uint32_t n = 10000;
	const uint64_t remote = 1 << 20, cookie = 0xC0FFEE;
	uint64_t wb = LD(&b.regs->win_base), ws = LD(&b.regs->win_size);
	if (!(wb <= remote && remote + 3 * n <= wb + ws) || b.lm_size < (8 << 20))
		fail("node %llu's window or link memory does not cover the targets", (unsigned long long)b.node);

	/* PUSH: the data is in link memory before the command is published. */
	for (uint32_t i = 0; i < n; i++)
		linkmem(&a, 0)[i] = (uint8_t)(i * 7 + 3);
	uint64_t idx = post(&a, (struct dimmnet_desc){.opcode = DIMMNET_OP_PUSH, .flags = DIMMNET_FLAG_SIGNAL,
	                                              .dst_node = (uint16_t)b.node, .length = n, .local_addr = 0,
	                                              .remote_addr = remote, .cookie = cookie});
	s = wait_completion(&a, idx, &kept);
	if (s.type != DIMMNET_ST_DONE || s.cookie != cookie || s.opcode != DIMMNET_OP_PUSH || s.length != n || s.end != idx)
		fail("PUSH: sender got %s", st_name(&s));
	wait_status(&b, &got, SPIN_NS, SLEEP_MS);
	if (got.type != DIMMNET_ST_PUSH || got.addr != remote || got.length != n || got.src_node != a.node ||
	    got.src_proc != a.gpid)
		fail("PUSH: receiver got %s", st_name(&got));
	if (memcmp(linkmem(&b, remote), linkmem(&a, 0), n) != 0)
		fail("PUSH: the receiver's link memory differs from what was sent");
	printf("cdriver: PUSH %u B: DONE for command %llu on node %llu, PUSH status at %#llx on node %llu, bytes equal\n",
	       n, (unsigned long long)s.end, (unsigned long long)a.node, (unsigned long long)got.addr,
	       (unsigned long long)b.node);

	/* IPUSH rings: set up AMT entry 1 on b (SIZE|FLAGS = 0, BASE, HEAD,
	 * TAIL, then SIZE|FLAGS last), IPUSH into it naming the entry
	 * (DIRECT_AMT), read the message where its status says, free it. */
	const uint64_t amt = 1, ring = 4 << 20, ring_size = 64 << 10, lmsg = 64 << 10;
	const uint32_t m = 3000;
	if (b.namt <= amt)
		fail("no AMT entry 1");
	struct dimmnet_amt *e = (struct dimmnet_amt *)(b.mem + b.amt_off + amt * DIMMNET_AMT_SIZE);
	uint64_t *cfg = word(&b, b.amt_off + amt * DIMMNET_AMT_SIZE + DIMMNET_AMT_CFG);
	ST(cfg, 0); /* not VALID while it changes */
	ST(&e->base, ring);
	ST(&e->head, 0);
	ST(&e->tail, 0);
	ST(cfg, ring_size | (uint64_t)DIMMNET_AMT_FLAG_VALID << 32);
	for (uint32_t i = 0; i < m; i++)
		linkmem(&a, lmsg)[i] = (uint8_t)(i * 13 + 1);
	idx = post(&a, (struct dimmnet_desc){.opcode = DIMMNET_OP_IPUSH,
	                                     .flags = DIMMNET_FLAG_SIGNAL | DIMMNET_FLAG_DIRECT_AMT,
	                                     .dst_node = (uint16_t)b.node, .length = m, .local_addr = lmsg,
	                                     .remote_addr = amt, .cookie = cookie + 2});
	s = wait_completion(&a, idx, &kept);
	if (s.type != DIMMNET_ST_DONE || s.cookie != cookie + 2)
		fail("IPUSH: sender got %s", st_name(&s));
	wait_status(&b, &got, SPIN_NS, SLEEP_MS);
	if (got.type != DIMMNET_ST_IPUSH_MSG || got.amt != amt || got.length != m)
		fail("IPUSH: receiver got %s", st_name(&got));
	if (memcmp(linkmem(&b, got.addr), linkmem(&a, lmsg), m) != 0) /* ADDR is a link address */
		fail("IPUSH: the message differs from what was sent");
	ST(&e->head, got.end); /* the ring is free again up to END */
	printf("cdriver: IPUSH %u B into AMT entry %llu: message at %#llx, END %llu, bytes equal\n", m,
	       (unsigned long long)amt, (unsigned long long)got.addr, (unsigned long long)got.end);

	/* PULL: read the pattern back from b into a's link memory at 128 KiB.
	 * b's driver takes no part and gets no status. */
	const uint64_t lpull = 128 << 10;
	memset(linkmem(&a, lpull), 0, n);
	idx = post(&a, (struct dimmnet_desc){.opcode = DIMMNET_OP_PULL, .dst_node = (uint16_t)b.node, .length = n,
	                                     .local_addr = lpull, .remote_addr = remote, .cookie = cookie + 3});
	s = wait_completion(&a, idx, &kept);
	if (s.type != DIMMNET_ST_PULL_DONE || s.opcode != DIMMNET_OP_PULL || s.addr != lpull || s.length != n ||
	    s.src_node != b.node || s.cookie != cookie + 3)
		fail("PULL: got %s", st_name(&s));
	if (memcmp(linkmem(&a, lpull), linkmem(&b, remote), n) != 0)
		fail("PULL: the bytes read differ from node %llu's", (unsigned long long)b.node);
	printf("cdriver: PULL %u B from node %llu: PULL_DONE for command %llu, bytes equal\n", n,
	       (unsigned long long)b.node, (unsigned long long)s.end);

	/* FADD8 and CAS8 on b's word at 2 MiB; the old value lands at a's
	 * 256 KiB and in PULL_DONE's IMM, whose OPCODE is the atomic's. */
	const uint64_t wremote = 2 << 20, wlocal = 256 << 10;
	uint64_t *bw = (uint64_t *)linkmem(&b, wremote), *aw = (uint64_t *)linkmem(&a, wlocal);
	__atomic_store_n(bw, 40, __ATOMIC_SEQ_CST);
	idx = post(&a, (struct dimmnet_desc){.opcode = DIMMNET_OP_FADD8, .dst_node = (uint16_t)b.node, .length = 8,
	                                     .local_addr = wlocal, .remote_addr = wremote, .operand = 2,
	                                     .cookie = cookie + 4});
	s = wait_completion(&a, idx, &kept);
	if (s.type != DIMMNET_ST_PULL_DONE || s.opcode != DIMMNET_OP_FADD8 || s.imm != 40 || LD(aw) != 40 ||
	    LD(bw) != 42)
		fail("FADD8: got %s, imm %llu, word now %llu", st_name(&s), (unsigned long long)s.imm,
		     (unsigned long long)LD(bw));
	idx = post(&a, (struct dimmnet_desc){.opcode = DIMMNET_OP_CAS8, .dst_node = (uint16_t)b.node, .length = 8,
	                                     .local_addr = wlocal, .remote_addr = wremote, .operand = 42, .imm = 100,
	                                     .cookie = cookie + 5});
	s = wait_completion(&a, idx, &kept);
	if (s.type != DIMMNET_ST_PULL_DONE || s.opcode != DIMMNET_OP_CAS8 || s.imm != 42 || LD(bw) != 100)
		fail("CAS8 (equal): got %s, imm %llu, word now %llu", st_name(&s), (unsigned long long)s.imm,
		     (unsigned long long)LD(bw));
	idx = post(&a, (struct dimmnet_desc){.opcode = DIMMNET_OP_CAS8, .dst_node = (uint16_t)b.node, .length = 8,
	                                     .local_addr = wlocal, .remote_addr = wremote, .operand = 42, .imm = 7,
	                                     .cookie = cookie + 6});
	s = wait_completion(&a, idx, &kept);
	if (s.type != DIMMNET_ST_PULL_DONE || s.imm != 100 || LD(bw) != 100)
		fail("CAS8 (differing): got %s, imm %llu, word now %llu", st_name(&s), (unsigned long long)s.imm,
		     (unsigned long long)LD(bw));
	printf("cdriver: FADD8 40+2: old 40, now 42; CAS8 42->100: old 42, swapped; CAS8 42->7: old 100, kept\n");

	/* A misaligned PUSH fails, SIGNAL or not: ERROR names it by END. */
	uint64_t bad_idx = post(&a, (struct dimmnet_desc){.opcode = DIMMNET_OP_PUSH, .dst_node = (uint16_t)b.node,
	                                                  .length = 8, .local_addr = 4, .remote_addr = remote,
	                                                  .cookie = cookie + 1});
	s = wait_completion(&a, bad_idx, &kept);
	uint64_t reg = LD(&a.regs->error);
	if (s.type != DIMMNET_ST_ERROR || s.err != DIMMNET_E_BAD_ALIGN || s.opcode != DIMMNET_OP_PUSH ||
	    s.cookie != cookie + 1 || (reg & 0xFFFF) != DIMMNET_E_BAD_ALIGN || reg >> 32 != (bad_idx & 0xFFFFFFFF))
		fail("misaligned PUSH: %s, ERROR register %#llx", st_name(&s), (unsigned long long)reg);
	printf("cdriver: misaligned PUSH: ERROR %s for command %llu\n", dimmnet_errno_name(s.err),
	       (unsigned long long)s.end);

	/* Waiting for statuses, the sleeping way: a thread stores DRV_WAIT = 1
	 * on b and blocks on b's interrupt eventfd; only then does this thread
	 * PUSH to b, so the status finds DRV_WAIT set and the device signals. */
	struct sleeper w = {.b = &b};
	pthread_t th;
	if (pthread_create(&th, NULL, sleep_on_interrupt, &w) != 0)
		fail("pthread_create");
	while (!__atomic_load_n(&w.armed, __ATOMIC_SEQ_CST))
		usleep(100);
	uint64_t irqs = LD(&b.regs->interrupts);
	idx = post(&a, (struct dimmnet_desc){.opcode = DIMMNET_OP_PUSH, .flags = DIMMNET_FLAG_SIGNAL,
	                                     .dst_node = (uint16_t)b.node, .length = 64, .local_addr = 0,
	                                     .remote_addr = remote, .imm = 0x5EED, .cookie = cookie + 7});
	s = wait_completion(&a, idx, &kept);
	pthread_join(th, NULL);
	if (s.type != DIMMNET_ST_DONE)
		fail("PUSH to the sleeper: sender got %s", st_name(&s));
	if (w.s.type != DIMMNET_ST_PUSH || w.s.imm != 0x5EED)
		fail("the sleeper got %s", st_name(&w.s));
	if (w.woken == 0)
		fail("the sleeper's status came without an interrupt (INTERRUPTS %llu -> %llu)", (unsigned long long)irqs,
		     (unsigned long long)LD(&b.regs->interrupts));
	printf("cdriver: slept on node %llu's interrupt eventfd: woken %u times, INTERRUPTS %llu -> %llu, PUSH status "
	       "with IMM %#llx\n",
	       (unsigned long long)b.node, w.woken, (unsigned long long)irqs, (unsigned long long)LD(&b.regs->interrupts),
	       (unsigned long long)w.s.imm);

	printf("cdriver: %u sleeps on the interrupt, %u other statuses\n", a.sleeps + b.sleeps, kept);
	munmap(a.mem, a.size);
	munmap(b.mem, b.size);
	printf("ok\n");
	return 0;
}
