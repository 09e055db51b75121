/* waitfd: a CQ's FI_WAIT_FD descriptor, used as libfabric's manual-progress
 * providers are: fi_trywait, then poll(2) on the descriptor, then read.
 * A forked peer process sends on command (a pipe), so every frame arrives
 * while the waiter sleeps in poll and calls nothing of the provider.
 * Checked:
 *   1. fi_control(FI_GETWAITOBJ) says FI_WAIT_FD and FI_GETWAIT gives a
 *      descriptor;
 *   2. nothing comes: fi_trywait succeeds and a 300 ms poll stays quiet;
 *   3. a peer's message: fi_trywait succeeds, the peer sends, the poll
 *      wakes (10 s bound), fi_cq_read gives the message, payload checked;
 *   4. the read drained the descriptor: trywait succeeds and the next
 *      300 ms poll stays quiet;
 *   5. a completion pending (the peer sent and saw its send complete
 *      while the waiter looked away): fi_trywait says -FI_EAGAIN, twice
 *      (the entry waits in the CQ), and the read finds it;
 *   6. the same for five messages in a row, each woken by its own poll;
 *   7. fi_cq_sread on the same CQ still blocks until a message comes, and
 *      fi_cq_signal ends one at once (-FI_EAGAIN);
 *   8. a receive counter opened with FI_WAIT_FD: trywait succeeds while
 *      it has not moved since it was read, a peer's message wakes its
 *      poll and the counter has moved by one, and trywait then says
 *      -FI_EAGAIN until it is read;
 *   9. an EQ opened with FI_WAIT_FD: fi_eq_sread times out on nothing,
 *      fi_eq_write makes its descriptor readable and fi_eq_sread reads it.
 * Prints "waitfd: ok" or exits 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_cm.h>
#define PROG "waitfd"
#include "side.h"

#define SIZE 64

static int p2c[2], c2p[2];

static void say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		FAIL("pipe write");
}
static char hear(int fd)
{
	char c;
	if (read(fd, &c, 1) != 1)
		FAIL("pipe read");
	return c;
}

static void fill(char *b, int seq)
{
	for (int i = 0; i < SIZE; i++)
		b[i] = (char)(seq * 31 + i);
}

/* pollfd waits up to ms for fd: 1 readable, 0 not. */
static int pollfd(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n;
	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		FAIL("poll: %s", strerror(errno));
	return n > 0 && (p.revents & POLLIN);
}

static double ms_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The peer: sends message SEQ on 'S', waiting for its send completion
 * (the waiter's device acknowledged it) before it answers 'D'. */
static int peer(void)
{
	struct side s;
	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_TAGGED | FI_MSG;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	open_side(&s);
	if (write(c2p[1], &s.addrlen, sizeof s.addrlen) != sizeof s.addrlen ||
	    write(c2p[1], s.addr, s.addrlen) != (ssize_t)s.addrlen)
		FAIL("pipe");
	size_t pl;
	char pa[64];
	if (read(p2c[0], &pl, sizeof pl) != sizeof pl || pl > sizeof pa || read(p2c[0], pa, pl) != (ssize_t)pl)
		FAIL("pipe");
	fi_addr_t dst;
	if (fi_av_insert(s.av, pa, 1, &dst, 0, NULL) != 1)
		FAIL("insert");
	char buf[SIZE];
	int seq = 0, ctx;
	for (;;) {
		char c = hear(p2c[0]);
		if (c == 'Q')
			break;
		fill(buf, ++seq);
		OK(fi_tsend(s.ep, buf, SIZE, NULL, dst, 7, &ctx));
		struct fi_cq_tagged_entry e;
		double end = ms_now() + 30000;
		for (;;) {
			ssize_t n = fi_cq_read(s.cq, &e, 1);
			if (n == 1)
				break;
			if (n != -FI_EAGAIN)
				FAIL("peer: send completion %zd", n);
			if (ms_now() > end)
				FAIL("peer: no send completion in 30 s");
		}
		say(c2p[1], 'D');
	}
	close_side(&s);
	return 0;
}

static struct side w;
static struct fid_cntr *rcntr;
static char rbuf[SIZE];
static int rctx;

static void post(void)
{
	OK(fi_trecv(w.ep, rbuf, SIZE, NULL, FI_ADDR_UNSPEC, 7, 0, &rctx));
}

static void check(struct fi_cq_tagged_entry *e, int seq)
{
	char want[SIZE];
	fill(want, seq);
	if (e->op_context != &rctx || e->len != SIZE || e->tag != 7 || memcmp(rbuf, want, SIZE))
		FAIL("message %d: ctx %p len %zu tag %lu or payload wrong", seq, e->op_context, e->len,
		     (unsigned long)e->tag);
}

/* waitone: trywait, the peer sends, poll wakes, the read finds it. */
static void waitone(int fd, int seq)
{
	struct fi_cq_tagged_entry e;
	post();
	struct fid *fids[1] = {&w.cq->fid};
	int r = fi_trywait(w.fab, fids, 1);
	if (r != FI_SUCCESS)
		FAIL("message %d: fi_trywait before the send: %d %s", seq, r, fi_strerror(-r));
	say(p2c[1], 'S');
	for (int spurious = 0;; spurious++) {
		if (!pollfd(fd, 10000))
			FAIL("message %d: the descriptor did not wake within 10 s", seq);
		ssize_t n = fi_cq_read(w.cq, &e, 1);
		if (n == 1)
			break;
		if (n != -FI_EAGAIN)
			FAIL("message %d: fi_cq_read %zd", seq, n);
		/* a wake-up for a status that is no completion (an ACK's): wait again */
		if (spurious > 100)
			FAIL("message %d: 100 wake-ups without the message", seq);
		r = fi_trywait(w.fab, fids, 1);
		if (r == -FI_EAGAIN)
			continue;
		if (r != FI_SUCCESS)
			FAIL("fi_trywait %d", r);
	}
	check(&e, seq);
	if (hear(c2p[0]) != 'D')
		FAIL("peer");
}

int main(void)
{
	if (pipe(p2c) || pipe(c2p))
		FAIL("pipe");
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		FAIL("fork");
	if (pid == 0)
		return peer();

	struct fi_info *hints = fi_allocinfo();
	hints->caps = FI_TAGGED | FI_MSG;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	OK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	OK(fi_fabric(info->fabric_attr, &w.fab, NULL));
	OK(fi_domain(w.fab, info, &w.dom, NULL));
	OK(fi_av_open(w.dom, &ava, &w.av, NULL));
	OK(fi_cq_open(w.dom, &cqa, &w.cq, NULL));
	OK(fi_endpoint(w.dom, info, &w.ep, NULL));
	OK(fi_ep_bind(w.ep, &w.av->fid, 0));
	OK(fi_ep_bind(w.ep, &w.cq->fid, FI_TRANSMIT | FI_RECV));
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD};
	OK(fi_cntr_open(w.dom, &ca, &rcntr, NULL));
	OK(fi_ep_bind(w.ep, &rcntr->fid, FI_RECV));
	OK(fi_enable(w.ep));
	w.addrlen = sizeof w.addr;
	OK(fi_getname(&w.ep->fid, w.addr, &w.addrlen));

	/* 1. the descriptor */
	enum fi_wait_obj kind = FI_WAIT_NONE;
	OK(fi_control(&w.cq->fid, FI_GETWAITOBJ, &kind));
	if (kind != FI_WAIT_FD)
		FAIL("FI_GETWAITOBJ: %d, want FI_WAIT_FD", kind);
	int fd = -1;
	OK(fi_control(&w.cq->fid, FI_GETWAIT, &fd));
	if (fd < 0)
		FAIL("FI_GETWAIT: descriptor %d", fd);

	size_t pl;
	char pa[64];
	if (read(c2p[0], &pl, sizeof pl) != sizeof pl || pl > sizeof pa || read(c2p[0], pa, pl) != (ssize_t)pl)
		FAIL("pipe");
	if (write(p2c[1], &w.addrlen, sizeof w.addrlen) != sizeof w.addrlen ||
	    write(p2c[1], w.addr, w.addrlen) != (ssize_t)w.addrlen)
		FAIL("pipe");
	fi_addr_t src;
	if (fi_av_insert(w.av, pa, 1, &src, 0, NULL) != 1)
		FAIL("insert");

	struct fid *fids[1] = {&w.cq->fid};
	struct fi_cq_tagged_entry e;
	int r;

	/* 2. nothing comes: the poll stays quiet */
	r = fi_trywait(w.fab, fids, 1);
	if (r != FI_SUCCESS)
		FAIL("fi_trywait on an idle CQ: %d %s", r, fi_strerror(-r));
	if (pollfd(fd, 300))
		FAIL("the descriptor is readable with nothing sent");

	/* 3, 4. a peer's message wakes the poll; the read drains it */
	waitone(fd, 1);
	r = fi_trywait(w.fab, fids, 1);
	if (r != FI_SUCCESS)
		FAIL("fi_trywait after the read: %d %s", r, fi_strerror(-r));
	if (pollfd(fd, 300))
		FAIL("the descriptor stays readable after the read drained the CQ");

	/* 5. a completion pending: trywait says so */
	post();
	say(p2c[1], 'S');
	if (hear(c2p[0]) != 'D') /* the peer's send completed: the message is here */
		FAIL("peer");
	r = fi_trywait(w.fab, fids, 1);
	if (r != -FI_EAGAIN)
		FAIL("fi_trywait with a message pending: %d, want -FI_EAGAIN", r);
	r = fi_trywait(w.fab, fids, 1);
	if (r != -FI_EAGAIN)
		FAIL("fi_trywait with a completion in the CQ: %d, want -FI_EAGAIN", r);
	if (fi_cq_read(w.cq, &e, 1) != 1)
		FAIL("the pending message");
	check(&e, 2);

	/* 6. five more, each woken by its own poll */
	for (int i = 3; i <= 7; i++)
		waitone(fd, i);

	/* 7. fi_cq_sread on the same CQ */
	post();
	say(p2c[1], 'S');
	ssize_t n = fi_cq_sread(w.cq, &e, 1, NULL, 10000);
	if (n != 1)
		FAIL("fi_cq_sread: %zd", n);
	check(&e, 8);
	if (hear(c2p[0]) != 'D')
		FAIL("peer");

	/* fi_cq_signal ends a blocking read at once */
	OK(fi_cq_signal(w.cq));
	double ts = ms_now();
	n = fi_cq_sread(w.cq, &e, 1, NULL, 5000);
	if (n != -FI_EAGAIN || ms_now() - ts > 2500)
		FAIL("fi_cq_sread after fi_cq_signal: %zd after %.0f ms, want -FI_EAGAIN at once", n, ms_now() - ts);

	/* 8. the counter's descriptor */
	int cfd = -1;
	OK(fi_control(&rcntr->fid, FI_GETWAIT, &cfd));
	uint64_t c0 = fi_cntr_read(rcntr);
	if (c0 != 8)
		FAIL("receive counter %lu after 8 messages", (unsigned long)c0);
	struct fid *cfids[1] = {&rcntr->fid};
	post();
	r = fi_trywait(w.fab, cfids, 1);
	if (r != FI_SUCCESS)
		FAIL("fi_trywait on a counter read since it moved: %d %s", r, fi_strerror(-r));
	say(p2c[1], 'S');
	if (!pollfd(cfd, 10000))
		FAIL("the counter's descriptor did not wake within 10 s");
	if (hear(c2p[0]) != 'D')
		FAIL("peer");
	if (fi_trywait(w.fab, cfids, 1) != -FI_EAGAIN)
		FAIL("fi_trywait on a counter that moved since it was read");
	uint64_t c1 = fi_cntr_read(rcntr);
	if (c1 != c0 + 1)
		FAIL("receive counter %lu, want %lu", (unsigned long)c1, (unsigned long)c0 + 1);
	if (fi_cq_read(w.cq, &e, 1) != 1)
		FAIL("the counted message's completion");
	check(&e, 9);
	r = fi_trywait(w.fab, cfids, 1);
	if (r != FI_SUCCESS || pollfd(cfd, 200))
		FAIL("the counter's descriptor after its read: trywait %d, or readable", r);

	say(p2c[1], 'Q');
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		FAIL("the peer failed");

	/* 9. the event queue's descriptor */
	struct fi_eq_attr eqa = {.size = 8, .wait_obj = FI_WAIT_FD};
	struct fid_eq *eq;
	OK(fi_eq_open(w.fab, &eqa, &eq, NULL));
	int efd = -1;
	OK(fi_control(&eq->fid, FI_GETWAIT, &efd));
	uint32_t ev;
	struct fi_eq_entry ent = {.data = 42}, got;
	double t0 = ms_now();
	n = fi_eq_sread(eq, &ev, &got, sizeof got, 200, 0);
	if (n != -FI_EAGAIN || ms_now() - t0 < 150)
		FAIL("fi_eq_sread on an empty EQ: %zd after %.0f ms, want -FI_EAGAIN after 200", n, ms_now() - t0);
	struct fid *efids[1] = {&eq->fid};
	OK(fi_trywait(w.fab, efids, 1));
	if (pollfd(efd, 100))
		FAIL("the EQ's descriptor is readable while it is empty");
	if (fi_eq_write(eq, FI_NOTIFY, &ent, sizeof ent, 0) != sizeof ent)
		FAIL("fi_eq_write");
	if (!pollfd(efd, 1000))
		FAIL("fi_eq_write did not make the EQ's descriptor readable");
	if (fi_trywait(w.fab, efids, 1) != -FI_EAGAIN)
		FAIL("fi_trywait on an EQ holding an event");
	n = fi_eq_sread(eq, &ev, &got, sizeof got, 1000, 0);
	if (n != sizeof got || ev != FI_NOTIFY || got.data != 42)
		FAIL("fi_eq_sread: %zd event %u data %lu", n, ev, (unsigned long)got.data);
	if (pollfd(efd, 100))
		FAIL("the EQ's descriptor stays readable once it is empty");
	OK(fi_close(&eq->fid));

	OK(fi_close(&w.ep->fid));
	w.ep = NULL;
	OK(fi_close(&rcntr->fid));
	close_side(&w);
	fi_freeinfo(info);
	printf("waitfd: ok\n");
	return 0;
}
