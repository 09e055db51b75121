//go:build dimmnet_ofi

/* Wait objects: the FI_WAIT_FD descriptors of completion queues and
 * counters (their eventfds live on the Go side, wait.go), fi_trywait, and
 * the event queue, which is all C: an endpoint never reports on it, so it
 * holds only what fi_eq_write puts there, and an eventfd says when it
 * holds something. */

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include "prov.h"
#include "_cgo_export.h"

/* fi_control on a CQ or counter: the descriptor and its kind. */
int dn_wait_control(struct fid *fid, int command, void *arg)
{
	if (command != FI_GETWAIT && command != FI_GETWAITOBJ)
		return -FI_ENOSYS;
	if (fid->fclass != FI_CLASS_CQ && fid->fclass != FI_CLASS_CNTR)
		return -FI_ENOSYS;
	if (!arg)
		return -FI_EINVAL;
	int fd = goWaitFD(dn_fid_handle(fid));
	if (fd < 0)
		return -FI_ENODATA; /* opened with FI_WAIT_NONE */
	if (command == FI_GETWAIT)
		*(int *)arg = fd;
	else
		*(enum fi_wait_obj *)arg = FI_WAIT_FD;
	return 0;
}

/* fi_cq_signal: a thread in fi_cq_sread returns -FI_EAGAIN. */
int dn_cq_signal(struct fid_cq *cq)
{
	return goCqSignal(dn_fid_handle(&cq->fid));
}

/* ---------------------------------------------------------------- EQ */

#define DN_EQ_DATA 256 /* the largest event fi_eq_write takes */

struct dn_eq_ent {
	uint32_t event;
	size_t len;
	unsigned char data[DN_EQ_DATA];
};

struct dn_eq {
	struct fid_eq eq;
	pthread_mutex_t mu;
	int fd;        /* eventfd: readable while entries wait */
	int wait_obj;  /* what fi_control answers: FI_WAIT_FD, or none */
	size_t size;   /* entries, a power of two */
	uint64_t head, tail;
	struct dn_eq_ent *ents;
};

static void dn_eq_drain(struct dn_eq *e)
{
	uint64_t v;
	while (read(e->fd, &v, sizeof v) == (ssize_t)sizeof v)
		;
}

static ssize_t dn_eq_read(struct fid_eq *eq, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
	struct dn_eq *e = (struct dn_eq *)eq;
	pthread_mutex_lock(&e->mu);
	if (e->head == e->tail) {
		pthread_mutex_unlock(&e->mu);
		return -FI_EAGAIN;
	}
	struct dn_eq_ent *x = &e->ents[e->head & (e->size - 1)];
	if (len < x->len) {
		pthread_mutex_unlock(&e->mu);
		return -FI_ETOOSMALL;
	}
	if (event)
		*event = x->event;
	if (buf)
		memcpy(buf, x->data, x->len);
	ssize_t n = (ssize_t)x->len;
	if (!(flags & FI_PEEK)) {
		e->head++;
		if (e->head == e->tail)
			dn_eq_drain(e); /* empty: the next poll blocks */
	}
	pthread_mutex_unlock(&e->mu);
	return n;
}

static ssize_t dn_eq_readerr(struct fid_eq *eq, struct fi_eq_err_entry *buf, uint64_t flags)
{
	return -FI_EAGAIN; /* no error is ever reported */
}

static ssize_t dn_eq_write(struct fid_eq *eq, uint32_t event, const void *buf, size_t len, uint64_t flags)
{
	struct dn_eq *e = (struct dn_eq *)eq;
	if (len > DN_EQ_DATA || (len && !buf))
		return -FI_EINVAL;
	pthread_mutex_lock(&e->mu);
	if (e->tail - e->head >= e->size) {
		pthread_mutex_unlock(&e->mu);
		return -FI_EAGAIN;
	}
	struct dn_eq_ent *x = &e->ents[e->tail & (e->size - 1)];
	x->event = event;
	x->len = len;
	if (len)
		memcpy(x->data, buf, len);
	e->tail++;
	uint64_t one = 1;
	if (write(e->fd, &one, sizeof one) < 0) {
		/* a full eventfd counter is readable already */
	}
	pthread_mutex_unlock(&e->mu);
	return (ssize_t)len;
}

static int64_t dn_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* sread waits on the queue's eventfd: fi_eq_write signals it. */
static ssize_t dn_eq_sread(struct fid_eq *eq, uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags)
{
	struct dn_eq *e = (struct dn_eq *)eq;
	int64_t end = timeout < 0 ? -1 : dn_now_ms() + timeout;
	for (;;) {
		ssize_t n = dn_eq_read(eq, event, buf, len, flags);
		if (n != -FI_EAGAIN)
			return n;
		int left = -1;
		if (end >= 0) {
			int64_t l = end - dn_now_ms();
			if (l <= 0)
				return -FI_EAGAIN;
			left = l > 1 << 30 ? 1 << 30 : (int)l;
		}
		struct pollfd p = {.fd = e->fd, .events = POLLIN};
		if (poll(&p, 1, left) < 0 && errno != EINTR)
			return -FI_EIO;
	}
}

static const char *dn_eq_strerror(struct fid_eq *eq, int prov_errno, const void *err_data, char *buf, size_t len)
{
	const char *s = fi_strerror(prov_errno);
	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

static struct fi_ops_eq dn_eq_ops = {
	.size = sizeof(struct fi_ops_eq), .read = dn_eq_read, .readerr = dn_eq_readerr,
	.write = dn_eq_write, .sread = dn_eq_sread, .strerror = dn_eq_strerror,
};

static int dn_eq_close(struct fid *fid)
{
	struct dn_eq *e = (struct dn_eq *)fid;
	close(e->fd);
	pthread_mutex_destroy(&e->mu);
	free(e->ents);
	free(e);
	return 0;
}

static int dn_eq_control(struct fid *fid, int command, void *arg)
{
	struct dn_eq *e = (struct dn_eq *)fid;
	if (command != FI_GETWAIT && command != FI_GETWAITOBJ)
		return -FI_ENOSYS;
	if (!arg)
		return -FI_EINVAL;
	if (e->wait_obj != FI_WAIT_FD)
		return -FI_ENODATA;
	if (command == FI_GETWAIT)
		*(int *)arg = e->fd;
	else
		*(enum fi_wait_obj *)arg = FI_WAIT_FD;
	return 0;
}

static int dn_nosys_bind(struct fid *fid, struct fid *bfid, uint64_t flags) { return -FI_ENOSYS; }
static int dn_nosys_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	return -FI_ENOSYS;
}
static int dn_nosys_tostr2(const struct fid *fid, char *buf, size_t len) { return -FI_ENOSYS; }
static int dn_nosys_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops, void *context)
{
	return -FI_ENOSYS;
}

static struct fi_ops dn_eq_fi_ops = {
	.size = sizeof(struct fi_ops), .close = dn_eq_close, .bind = dn_nosys_bind,
	.control = dn_eq_control, .ops_open = dn_nosys_ops_open, .tostr = dn_nosys_tostr2,
	.ops_set = dn_nosys_ops_set,
};

int dn_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq, void *context)
{
	int wait = attr ? attr->wait_obj : FI_WAIT_NONE;
	if (wait != FI_WAIT_NONE && wait != FI_WAIT_UNSPEC && wait != FI_WAIT_FD)
		return -FI_ENOSYS; /* wait sets, mutex/cond, yield: not offered */
	struct dn_eq *e = calloc(1, sizeof(*e));
	if (!e)
		return -FI_ENOMEM;
	size_t want = attr && attr->size ? attr->size : 64;
	if (want > 4096)
		want = 4096;
	e->size = 1;
	while (e->size < want)
		e->size <<= 1;
	e->ents = calloc(e->size, sizeof(*e->ents));
	e->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!e->ents || e->fd < 0) {
		int ret = e->fd < 0 ? -FI_EMFILE : -FI_ENOMEM;
		if (e->fd >= 0)
			close(e->fd);
		free(e->ents);
		free(e);
		return ret;
	}
	pthread_mutex_init(&e->mu, NULL);
	e->wait_obj = wait == FI_WAIT_NONE ? FI_WAIT_NONE : FI_WAIT_FD;
	e->eq.fid.fclass = FI_CLASS_EQ;
	e->eq.fid.context = context;
	e->eq.fid.ops = &dn_eq_fi_ops;
	e->eq.ops = &dn_eq_ops;
	*eq = &e->eq;
	return 0;
}

/* ---------------------------------------------------------------- trywait */

/* dn_trywait is fi_trywait: -FI_EAGAIN when one of fids has something to
 * read (the caller reads instead of sleeping), else the descriptors are
 * armed (wait.go) and the caller may poll them. */
int dn_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
	if (count < 0 || (count && !fids) || count > 1024)
		return -FI_EINVAL;
	uintptr_t hs[count ? count : 1];
	int n = 0;
	for (int i = 0; i < count; i++) {
		struct fid *f = fids[i];
		switch (f->fclass) {
		case FI_CLASS_EQ: {
			struct dn_eq *e = (struct dn_eq *)f;
			if (e->wait_obj != FI_WAIT_FD)
				return -FI_EINVAL;
			pthread_mutex_lock(&e->mu);
			int ready = e->head != e->tail;
			pthread_mutex_unlock(&e->mu);
			if (ready)
				return -FI_EAGAIN;
			break;
		}
		case FI_CLASS_CQ:
		case FI_CLASS_CNTR:
			hs[n++] = dn_fid_handle(f);
			break;
		default:
			return -FI_EINVAL; /* no wait sets or poll sets */
		}
	}
	return n ? goTryWait(hs, n) : 0;
}
