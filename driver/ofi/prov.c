//go:build dimmnet_ofi

// The C side of the dimmnet libfabric provider: fi_prov_ini, getinfo and
// the function-pointer tables libfabric calls through. Nothing here keeps
// state of its own beyond the fid structures (C memory, as libfabric and
// its callers expect); every operation with state crosses into Go with the
// object's cgo.Handle. fi_prov_ini and getinfo never enter Go, so a process
// that only scans the provider directory (fi_info, every MPI rank) runs no
// Go code of ours beyond the runtime's start.

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/uio.h>
#include "prov.h"
#include "_cgo_export.h"

/* Stubs: every slot the provider does not implement. */
static ssize_t dn_nosys(void) { return -FI_ENOSYS; }
#define NOSYS ((void *)dn_nosys)

static int dn_nosys_tostr(const struct fid *fid, char *buf, size_t len) { return -FI_ENOSYS; }

/* ---------------------------------------------------------------- info */

static struct fi_provider dn_prov;

static const char dn_fabric_name[] = "dimmnet";
static const char dn_domain_name[] = "dimmnet0";

static size_t dn_max_msg(void);

static struct fi_info *dn_info(const struct fi_info *hints)
{
	struct fi_info *fi = fi_allocinfo();
	if (!fi)
		return NULL;
	uint64_t caps = DN_CAPS;
	if (hints && hints->caps)
		caps = hints->caps | (DN_CAPS & (FI_LOCAL_COMM | FI_REMOTE_COMM | FI_SOURCE));
	/* a secondary capability asked for in rx_attr alone is asked for */
	if (hints && hints->rx_attr)
		caps |= hints->rx_attr->caps & FI_MULTI_RECV;
	fi->caps = caps;
	fi->mode = 0;
	fi->addr_format = FI_FORMAT_UNSPEC;
	fi->src_addrlen = 0;
	fi->dest_addrlen = 0;
	if (hints && hints->dest_addr && hints->dest_addrlen == DN_ADDRLEN) {
		fi->dest_addr = malloc(DN_ADDRLEN);
		if (fi->dest_addr) {
			memcpy(fi->dest_addr, hints->dest_addr, DN_ADDRLEN);
			fi->dest_addrlen = DN_ADDRLEN;
		}
	}

	fi->tx_attr->caps = caps & (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_READ | FI_WRITE);
	fi->tx_attr->caps |= FI_SEND | (caps & (FI_RMA | FI_ATOMIC) ? FI_READ | FI_WRITE : 0);
	fi->tx_attr->mode = 0;
	fi->tx_attr->op_flags = FI_TRANSMIT_COMPLETE;
	if (hints && hints->tx_attr && hints->tx_attr->op_flags)
		fi->tx_attr->op_flags = hints->tx_attr->op_flags; /* e.g. FI_COMPLETION under selective completion */
	fi->tx_attr->msg_order = DN_MSG_ORDER;
	fi->tx_attr->comp_order = FI_ORDER_NONE;
	fi->tx_attr->inject_size = DN_INJECT;
	fi->tx_attr->size = 1024;
	fi->tx_attr->iov_limit = 1;
	fi->tx_attr->rma_iov_limit = 1;

	fi->rx_attr->caps = caps & (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV);
	fi->rx_attr->caps |= FI_RECV | (caps & (FI_RMA | FI_ATOMIC) ? FI_REMOTE_READ | FI_REMOTE_WRITE : 0);
	fi->rx_attr->mode = 0;
	fi->rx_attr->op_flags = 0;
	if (hints && hints->rx_attr && hints->rx_attr->op_flags)
		fi->rx_attr->op_flags = hints->rx_attr->op_flags;
	fi->rx_attr->msg_order = fi->tx_attr->msg_order;
	fi->rx_attr->comp_order = FI_ORDER_NONE;
	fi->rx_attr->total_buffered_recv = 0;
	fi->rx_attr->size = 1024;
	fi->rx_attr->iov_limit = 1;

	fi->ep_attr->type = FI_EP_RDM;
	fi->ep_attr->protocol = FI_PROTO_UNSPEC;
	fi->ep_attr->protocol_version = 1;
	fi->ep_attr->max_msg_size = dn_max_msg();
	fi->ep_attr->msg_prefix_size = 0;
	fi->ep_attr->max_order_raw_size = DN_MAX_MSG;
	fi->ep_attr->max_order_war_size = DN_MAX_MSG;
	fi->ep_attr->max_order_waw_size = DN_MAX_MSG;
	fi->ep_attr->mem_tag_format = 0xAAAAAAAAAAAAAAAAULL; /* every bit usable, bit 63 included */
	fi->ep_attr->tx_ctx_cnt = 1;
	fi->ep_attr->rx_ctx_cnt = 1;

	fi->domain_attr->name = strdup(dn_domain_name);
	fi->domain_attr->threading = FI_THREAD_SAFE;
	if (hints && hints->domain_attr && hints->domain_attr->threading != FI_THREAD_UNSPEC)
		fi->domain_attr->threading = hints->domain_attr->threading;
	fi->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	fi->domain_attr->resource_mgmt = FI_RM_ENABLED;
	fi->domain_attr->av_type = FI_AV_TABLE;
	if (hints && hints->domain_attr && hints->domain_attr->av_type != FI_AV_UNSPEC)
		fi->domain_attr->av_type = hints->domain_attr->av_type;
	fi->domain_attr->mr_mode = 0;
	/* Local descriptors are never needed; but Open MPI 4.1's btl ofi
	 * passes its compare-and-swap result's registration unchecked unless
	 * told to register, so a caller of one-sided operations that accepts
	 * FI_MR_LOCAL gets it. */
	if (hints && hints->domain_attr && (hints->domain_attr->mr_mode & FI_MR_LOCAL) && (hints->caps & (FI_RMA | FI_ATOMIC)))
		fi->domain_attr->mr_mode = FI_MR_LOCAL;
	fi->domain_attr->mr_key_size = 8;
	fi->domain_attr->cq_data_size = 8;
	fi->domain_attr->cq_cnt = 256;
	fi->domain_attr->ep_cnt = 1;
	fi->domain_attr->tx_ctx_cnt = 1;
	fi->domain_attr->rx_ctx_cnt = 1;
	fi->domain_attr->max_ep_tx_ctx = 1;
	fi->domain_attr->max_ep_rx_ctx = 1;
	fi->domain_attr->max_ep_stx_ctx = 0;
	fi->domain_attr->max_ep_srx_ctx = 0;
	fi->domain_attr->cntr_cnt = 256;
	fi->domain_attr->mr_iov_limit = 1;
	fi->domain_attr->caps = DN_DOMAIN_CAPS;
	fi->domain_attr->mode = 0;
	fi->domain_attr->mr_cnt = 65536;

	fi->fabric_attr->name = strdup(dn_fabric_name);
	fi->fabric_attr->prov_name = NULL; /* libfabric names the provider itself */
	fi->fabric_attr->prov_version = dn_prov.version;
	fi->fabric_attr->api_version = FI_VERSION(1, 17);
	return fi;
}

/* dn_max_msg is FI_DIMMNET_MAX_MSG if smaller than the provider's bound. */
static size_t dn_max_msg(void)
{
	size_t v = 0;
	if (fi_param_get_size_t(&dn_prov, "max_msg", &v) == 0 && v > 0 && v < DN_MAX_MSG)
		return v;
	return DN_MAX_MSG;
}

/* dn_hints_ok says whether the provider can meet what the caller asks. */
static int dn_hints_ok(const struct fi_info *h)
{
	if (!h)
		return 1;
	if (h->caps & ~DN_CAPS)
		return 0;
	if (h->mode & 0) /* the provider needs no mode bit: any is fine */
		return 0;
	if (h->addr_format != FI_FORMAT_UNSPEC)
		return 0;
	if (h->ep_attr) {
		if (h->ep_attr->type != FI_EP_UNSPEC && h->ep_attr->type != FI_EP_RDM)
			return 0;
		if (h->ep_attr->max_msg_size > DN_MAX_MSG)
			return 0;
		if (h->ep_attr->tx_ctx_cnt > 1 || h->ep_attr->rx_ctx_cnt > 1)
			return 0;
	}
	if (h->tx_attr && h->tx_attr->inject_size > DN_INJECT)
		return 0;
	/* an order or domain capability the provider lacks is no match, not
	 * an fi_info without it (fabtests' getinfo_test checks both) */
	if (h->tx_attr && (h->tx_attr->msg_order & ~DN_MSG_ORDER))
		return 0;
	if (h->rx_attr && (h->rx_attr->msg_order & ~DN_MSG_ORDER))
		return 0;
	if (h->domain_attr && (h->domain_attr->caps & ~DN_DOMAIN_CAPS))
		return 0;
	if (h->fabric_attr && h->fabric_attr->name && strcmp(h->fabric_attr->name, dn_fabric_name))
		return 0;
	if (h->domain_attr) {
		const struct fi_domain_attr *d = h->domain_attr;
		if (d->name && strcmp(d->name, dn_domain_name))
			return 0;
		if (d->data_progress == FI_PROGRESS_AUTO || d->control_progress == FI_PROGRESS_AUTO)
			return 0;
		if (d->mr_mode == FI_MR_BASIC)
			return 0; /* old-style basic registration: not offered */
		if (d->cq_data_size > 8)
			return 0;
	}
	return 1;
}

static int dn_getinfo(uint32_t version, const char *node, const char *service,
		      uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
	*info = NULL;
	if (getenv("FI_DIMMNET_DEBUG") && hints && hints->domain_attr)
		fprintf(stderr, "dimmnet-fi: getinfo caps %#llx mode %#llx mr_mode %#x\n", (unsigned long long)hints->caps,
			(unsigned long long)hints->mode, hints->domain_attr->mr_mode);
	if (!dn_hints_ok(hints))
		return -FI_ENODATA;
	*info = dn_info(hints);
	return *info ? 0 : -FI_ENOMEM;
}

/* ---------------------------------------------------------------- fids */

struct dn_fabric { struct fid_fabric f; };
struct dn_domain { struct fid_domain d; uint64_t mr_key; };
struct dn_av { struct fid_av av; uintptr_t h; };
struct dn_cq { struct fid_cq cq; uintptr_t h; int format; };
struct dn_cntr { struct fid_cntr c; uintptr_t h; };
struct dn_mr { struct fid_mr mr; };

static int dn_free_close(struct fid *fid) { free(fid); return 0; }

/* dn_fid_handle is the Go object a fid names (0: none). */
uintptr_t dn_fid_handle(struct fid *fid)
{
	switch (fid->fclass) {
	case FI_CLASS_AV: return ((struct dn_av *)fid)->h;
	case FI_CLASS_CQ: return ((struct dn_cq *)fid)->h;
	case FI_CLASS_CNTR: return ((struct dn_cntr *)fid)->h;
	case FI_CLASS_EP: return ((struct dn_ep *)fid)->h;
	}
	return 0;
}

/* fid close through Go: the Go object goes first, then the C memory. */
static int dn_go_close(struct fid *fid)
{
	int ret = goClose(dn_fid_handle(fid));
	if (ret)
		return ret;
	free(fid);
	return 0;
}

static struct fi_ops dn_free_ops = {
	.size = sizeof(struct fi_ops), .close = dn_free_close, .bind = NOSYS,
	.control = NOSYS, .ops_open = NOSYS, .tostr = dn_nosys_tostr, .ops_set = NOSYS,
};

/* a domain's fid: freed on close; fi_open_ops gives the link-memory
 * operations (linkmem.c) */
static struct fi_ops dn_domain_fi_ops = {
	.size = sizeof(struct fi_ops), .close = dn_free_close, .bind = NOSYS,
	.control = NOSYS, .ops_open = dn_lm_ops_open, .tostr = dn_nosys_tostr, .ops_set = NOSYS,
};

static int dn_av_bind(struct fid *fid, struct fid *bfid, uint64_t flags) { return -FI_ENOSYS; }
static struct fi_ops dn_go_ops = {
	.size = sizeof(struct fi_ops), .close = dn_go_close, .bind = dn_av_bind,
	.control = dn_wait_control, /* wait.c: FI_GETWAIT, FI_GETWAITOBJ */
	.ops_open = NOSYS, .tostr = dn_nosys_tostr, .ops_set = NOSYS,
};

/* ---- memory registration: the device needs none (mr_mode 0) but callers
 * may register anyway; the key is the requested one. */
static int dn_mr_close(struct fid *fid)
{
	goMrClose(((struct fid_mr *)fid)->key);
	free(fid);
	return 0;
}

static struct fi_ops dn_mr_fi_ops = {
	.size = sizeof(struct fi_ops), .close = dn_mr_close, .bind = NOSYS,
	.control = NOSYS, .ops_open = NOSYS, .tostr = dn_nosys_tostr, .ops_set = NOSYS,
};

static int dn_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access,
		     uint64_t offset, uint64_t requested_key, uint64_t flags,
		     struct fid_mr **mr, void *context)
{
	struct dn_mr *m = calloc(1, sizeof(*m));
	if (!m)
		return -FI_ENOMEM;
	m->mr.fid.fclass = FI_CLASS_MR;
	m->mr.fid.context = context;
	m->mr.fid.ops = &dn_mr_fi_ops;
	m->mr.mem_desc = NULL;
	uint64_t key = requested_key; /* a region in link memory gets the provider's (linkmem.go) */
	int ret = goMrReg(requested_key, (void *)buf, len, &key);
	m->mr.key = key;
	if (ret) {
		free(m);
		return ret;
	}
	*mr = &m->mr;
	return 0;
}

static int dn_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
		      uint64_t offset, uint64_t requested_key, uint64_t flags,
		      struct fid_mr **mr, void *context)
{
	if (count > 1)
		return -FI_EINVAL;
	return dn_mr_reg(fid, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0,
			 access, offset, requested_key, flags, mr, context);
}

static int dn_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **mr)
{
	return dn_mr_regv(fid, attr->mr_iov, attr->iov_count, attr->access, attr->offset,
			  attr->requested_key, flags, mr, attr->context);
}

static struct fi_ops_mr dn_mr_ops = {
	.size = sizeof(struct fi_ops_mr), .reg = dn_mr_reg, .regv = dn_mr_regv, .regattr = dn_mr_regattr,
};

/* ---- event queue: wait.c */

/* ---- address vector */
static int dn_av_insert(struct fid_av *av, const void *addr, size_t count, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	return goAvInsert(((struct dn_av *)av)->h, (void *)addr, count, fi_addr, flags);
}
static int dn_av_remove(struct fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	return goAvRemove(((struct dn_av *)av)->h, fi_addr, count);
}
static int dn_av_lookup(struct fid_av *av, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
	return goAvLookup(((struct dn_av *)av)->h, fi_addr, addr, addrlen);
}
static const char *dn_av_straddr(struct fid_av *av, const void *addr, char *buf, size_t *len)
{
	const unsigned char *a = addr;
	char s[3 * DN_ADDRLEN + 16];
	int n = snprintf(s, sizeof s, "dimmnet://");
	for (int i = 0; i < DN_ADDRLEN; i++)
		n += snprintf(s + n, sizeof s - n, "%02x", a[i]);
	if (buf && *len)
		snprintf(buf, *len, "%s", s);
	*len = n + 1;
	return buf;
}
static struct fi_ops_av dn_av_ops = {
	.size = sizeof(struct fi_ops_av), .insert = dn_av_insert, .insertsvc = NOSYS,
	.insertsym = NOSYS, .remove = dn_av_remove, .lookup = dn_av_lookup,
	.straddr = dn_av_straddr, .av_set = NOSYS,
};

static int dn_av_open(struct fid_domain *domain, struct fi_av_attr *attr, struct fid_av **av, void *context)
{
	if (attr && attr->flags & (FI_EVENT | FI_READ))
		return -FI_ENOSYS; /* asynchronous inserts and shared AVs are not offered */
	if (attr && attr->rx_ctx_bits)
		return -FI_ENOSYS;
	struct dn_av *a = calloc(1, sizeof(*a));
	if (!a)
		return -FI_ENOMEM;
	a->av.fid.fclass = FI_CLASS_AV;
	a->av.fid.context = context;
	a->av.fid.ops = &dn_go_ops;
	a->av.ops = &dn_av_ops;
	a->h = goAvOpen(attr ? attr->type : FI_AV_UNSPEC);
	*av = &a->av;
	return 0;
}

/* ---- completion queues: Go keeps the entries as fi_cq_tagged_entry and
 * this side narrows them to the queue's format. */
static size_t dn_cq_entry_size(int format)
{
	switch (format) {
	case FI_CQ_FORMAT_CONTEXT: return sizeof(struct fi_cq_entry);
	case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
	default: return sizeof(struct fi_cq_tagged_entry);
	}
}

static void dn_cq_narrow(int format, void *buf, const struct fi_cq_tagged_entry *e, ssize_t n)
{
	for (ssize_t i = 0; i < n; i++) {
		char *p = (char *)buf + i * dn_cq_entry_size(format);
		switch (format) {
		case FI_CQ_FORMAT_CONTEXT:
			((struct fi_cq_entry *)p)->op_context = e[i].op_context;
			break;
		case FI_CQ_FORMAT_MSG: {
			struct fi_cq_msg_entry *m = (void *)p;
			m->op_context = e[i].op_context; m->flags = e[i].flags; m->len = e[i].len;
			break;
		}
		case FI_CQ_FORMAT_DATA: {
			struct fi_cq_data_entry *d = (void *)p;
			d->op_context = e[i].op_context; d->flags = e[i].flags; d->len = e[i].len;
			d->buf = e[i].buf; d->data = e[i].data;
			break;
		}
		default:
			*(struct fi_cq_tagged_entry *)p = e[i];
		}
	}
}

#define DN_CQ_BATCH 64

static ssize_t dn_cq_readfrom(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src_addr)
{
	struct dn_cq *c = (struct dn_cq *)cq;
	struct fi_cq_tagged_entry e[DN_CQ_BATCH];
	if (count > DN_CQ_BATCH)
		count = DN_CQ_BATCH;
	ssize_t n = goCqRead(c->h, e, count, src_addr, -1);
	if (n > 0)
		dn_cq_narrow(c->format, buf, e, n);
	return n;
}
static ssize_t dn_cq_read(struct fid_cq *cq, void *buf, size_t count)
{
	return dn_cq_readfrom(cq, buf, count, NULL);
}
static ssize_t dn_cq_sreadfrom(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src_addr,
			       const void *cond, int timeout)
{
	struct dn_cq *c = (struct dn_cq *)cq;
	struct fi_cq_tagged_entry e[DN_CQ_BATCH];
	if (count > DN_CQ_BATCH)
		count = DN_CQ_BATCH;
	ssize_t n = goCqRead(c->h, e, count, src_addr, timeout < 0 ? 1LL << 62 : (long long)timeout);
	if (n > 0)
		dn_cq_narrow(c->format, buf, e, n);
	return n;
}
static ssize_t dn_cq_sread(struct fid_cq *cq, void *buf, size_t count, const void *cond, int timeout)
{
	return dn_cq_sreadfrom(cq, buf, count, NULL, cond, timeout);
}
static ssize_t dn_cq_readerr(struct fid_cq *cq, struct fi_cq_err_entry *buf, uint64_t flags)
{
	return goCqReadErr(((struct dn_cq *)cq)->h, buf);
}
static const char *dn_cq_strerror(struct fid_cq *cq, int prov_errno, const void *err_data, char *buf, size_t len)
{
	const char *s = prov_errno ? goStrErr(prov_errno) : "success";
	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}
static struct fi_ops_cq dn_cq_ops = {
	.size = sizeof(struct fi_ops_cq), .read = dn_cq_read, .readfrom = dn_cq_readfrom,
	.readerr = dn_cq_readerr, .sread = dn_cq_sread, .sreadfrom = dn_cq_sreadfrom,
	.signal = dn_cq_signal, /* wait.c */ .strerror = dn_cq_strerror,
};

static int dn_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq, void *context)
{
	int format = attr ? attr->format : FI_CQ_FORMAT_UNSPEC;
	if (format == FI_CQ_FORMAT_UNSPEC)
		format = FI_CQ_FORMAT_TAGGED;
	if (format > FI_CQ_FORMAT_TAGGED)
		return -FI_ENOSYS;
	struct dn_cq *c = calloc(1, sizeof(*c));
	if (!c)
		return -FI_ENOMEM;
	/* a wait object (FI_WAIT_FD, FI_WAIT_UNSPEC) is an eventfd: wait.go */
	int ret = goCqOpen(attr ? attr->wait_obj : FI_WAIT_NONE, &c->h);
	if (ret) {
		free(c);
		return ret;
	}
	c->cq.fid.fclass = FI_CLASS_CQ;
	c->cq.fid.context = context;
	c->cq.fid.ops = &dn_go_ops;
	c->cq.ops = &dn_cq_ops;
	c->format = format;
	*cq = &c->cq;
	return 0;
}

/* ---- counters */
static uint64_t dn_cntr_read(struct fid_cntr *c) { return goCntrRead(((struct dn_cntr *)c)->h, 0); }
static uint64_t dn_cntr_readerr(struct fid_cntr *c) { return goCntrRead(((struct dn_cntr *)c)->h, 1); }
static int dn_cntr_add(struct fid_cntr *c, uint64_t v) { return goCntrSet(((struct dn_cntr *)c)->h, 0, v, 1); }
static int dn_cntr_set(struct fid_cntr *c, uint64_t v) { return goCntrSet(((struct dn_cntr *)c)->h, 0, v, 0); }
static int dn_cntr_adderr(struct fid_cntr *c, uint64_t v) { return goCntrSet(((struct dn_cntr *)c)->h, 1, v, 1); }
static int dn_cntr_seterr(struct fid_cntr *c, uint64_t v) { return goCntrSet(((struct dn_cntr *)c)->h, 1, v, 0); }
static int dn_cntr_wait(struct fid_cntr *c, uint64_t threshold, int timeout)
{
	return goCntrWait(((struct dn_cntr *)c)->h, threshold, timeout);
}
static struct fi_ops_cntr dn_cntr_ops = {
	.size = sizeof(struct fi_ops_cntr), .read = dn_cntr_read, .readerr = dn_cntr_readerr,
	.add = dn_cntr_add, .set = dn_cntr_set, .wait = dn_cntr_wait, .adderr = dn_cntr_adderr,
	.seterr = dn_cntr_seterr,
};
static int dn_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr, void *context)
{
	struct dn_cntr *c = calloc(1, sizeof(*c));
	if (!c)
		return -FI_ENOMEM;
	int ret = goCntrOpen(attr ? attr->wait_obj : FI_WAIT_NONE, &c->h);
	if (ret) {
		free(c);
		return ret;
	}
	c->c.fid.fclass = FI_CLASS_CNTR;
	c->c.fid.context = context;
	c->c.fid.ops = &dn_go_ops;
	c->c.ops = &dn_cntr_ops;
	*cntr = &c->c;
	return 0;
}

/* ---- endpoint */
#define EPH(ep) (((struct dn_ep *)(ep))->h)

static int dn_ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	uintptr_t h = 0;
	switch (bfid->fclass) {
	case FI_CLASS_CQ: h = ((struct dn_cq *)bfid)->h; break;
	case FI_CLASS_AV: h = ((struct dn_av *)bfid)->h; break;
	case FI_CLASS_CNTR: h = ((struct dn_cntr *)bfid)->h; break;
	case FI_CLASS_EQ: return 0; /* nothing is ever reported on it */
	default: return -FI_EINVAL;
	}
	return goEpBind(EPH(fid), h, flags);
}
static int dn_ep_control(struct fid *fid, int command, void *arg)
{
	switch (command) {
	case FI_ENABLE: return goEpEnable(EPH(fid));
	case FI_GETOPSFLAG: return goEpOpsFlags(EPH(fid), 0, arg);
	case FI_SETOPSFLAG: return goEpOpsFlags(EPH(fid), 1, arg);
	default: return -FI_ENOSYS;
	}
}
static struct fi_ops dn_ep_fi_ops = {
	.size = sizeof(struct fi_ops), .close = dn_go_close, .bind = dn_ep_bind,
	.control = dn_ep_control, .ops_open = dn_lm_ops_open, .tostr = dn_nosys_tostr, .ops_set = NOSYS,
};

static ssize_t dn_cancel(fid_t fid, void *context) { return goEpCancel(EPH(fid), context); }
/* FI_OPT_MIN_MULTI_RECV (a size_t) is the only option: the space below
 * which a multi-receive buffer posted afterwards is released
 * (multirecv.go). */
static int dn_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen)
		return -FI_EINVAL;
	if (*optlen < sizeof(size_t)) {
		*optlen = sizeof(size_t);
		return -FI_ETOOSMALL;
	}
	*optlen = sizeof(size_t);
	return goEpMinMultiRecv(EPH(fid), 0, optval);
}
static int dn_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	return goEpMinMultiRecv(EPH(fid), 1, (void *)optval);
}
static ssize_t dn_size_left(struct fid_ep *ep) { return 1024; }
static struct fi_ops_ep dn_ep_ops = {
	.size = sizeof(struct fi_ops_ep), .cancel = dn_cancel, .getopt = dn_getopt,
	.setopt = dn_setopt, .tx_ctx = NOSYS, .rx_ctx = NOSYS,
	.rx_size_left = dn_size_left, .tx_size_left = dn_size_left,
};

static int dn_getname(fid_t fid, void *addr, size_t *addrlen)
{
	return goEpGetname(EPH(fid), addr, addrlen);
}
static struct fi_ops_cm dn_cm_ops = {
	.size = sizeof(struct fi_ops_cm), .setname = NOSYS, .getname = dn_getname,
	.getpeer = NOSYS, .connect = NOSYS, .listen = NOSYS, .accept = NOSYS,
	.reject = NOSYS, .shutdown = NOSYS, .join = NOSYS,
};

/* iov helpers: one element at most (iov_limit 1). */
static int dn_iov1(const struct iovec *iov, size_t count, void **buf, size_t *len)
{
	if (count > 1)
		return -FI_EINVAL;
	*buf = count ? iov[0].iov_base : NULL;
	*len = count ? iov[0].iov_len : 0;
	return 0;
}

/* dn_post_recv queues a receive for the Go side (struct dn_ep in
 * prov.h), or hands it to Go now when the queue cannot take it: an
 * endpoint not enabled or closed (Go names the error), a NULL buffer, a
 * full queue. */
static ssize_t dn_post_recv(struct fid_ep *ep, void *buf, size_t len, fi_addr_t src,
			    uint64_t tag, uint64_t ignore, void *ctx, uint64_t flags)
{
	struct dn_ep *e = (struct dn_ep *)ep;
	if (!__atomic_load_n(&e->ready, __ATOMIC_ACQUIRE) || (len && !buf))
		return goRecv(e->h, buf, len, src, tag, ignore, ctx, flags);
	while (__atomic_test_and_set(&e->lock, __ATOMIC_ACQUIRE))
		;
	uint64_t t = e->rxq_tail;
	if (t - __atomic_load_n(&e->rxq_head, __ATOMIC_ACQUIRE) >= DN_RXQ) {
		__atomic_clear(&e->lock, __ATOMIC_RELEASE);
		return goRecv(e->h, buf, len, src, tag, ignore, ctx, flags);
	}
	e->rxq[t & (DN_RXQ - 1)] = (struct dn_rxq_ent){.buf = buf, .len = len, .src = src,
						       .tag = tag, .ignore = ignore, .flags = flags, .ctx = ctx};
	__atomic_store_n(&e->rxq_tail, t + 1, __ATOMIC_RELEASE);
	__atomic_clear(&e->lock, __ATOMIC_RELEASE);
	return 0;
}

/* messages */
static ssize_t dn_recv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src, void *ctx)
{
	return dn_post_recv(ep, buf, len, src, 0, 0, ctx, DN_DEFAULT);
}
static ssize_t dn_recvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count, fi_addr_t src, void *ctx)
{
	void *b; size_t l;
	if (dn_iov1(iov, count, &b, &l))
		return -FI_EINVAL;
	return goRecv(EPH(ep), b, l, src, 0, 0, ctx, DN_DEFAULT);
}
static ssize_t dn_recvmsg(struct fid_ep *ep, const struct fi_msg *m, uint64_t flags)
{
	void *b; size_t l;
	if (dn_iov1(m->msg_iov, m->iov_count, &b, &l))
		return -FI_EINVAL;
	return goRecv(EPH(ep), b, l, m->addr, 0, 0, m->context, flags & ~DN_PRIVATE_FLAGS);
}
static ssize_t dn_send(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dst, void *ctx)
{
	return goSend(EPH(ep), (void *)buf, len, dst, 0, 0, ctx, DN_DEFAULT);
}
static ssize_t dn_sendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count, fi_addr_t dst, void *ctx)
{
	void *b; size_t l;
	if (dn_iov1(iov, count, &b, &l))
		return -FI_EINVAL;
	return goSend(EPH(ep), b, l, dst, 0, 0, ctx, DN_DEFAULT);
}
static ssize_t dn_sendmsg(struct fid_ep *ep, const struct fi_msg *m, uint64_t flags)
{
	void *b; size_t l;
	if (dn_iov1(m->msg_iov, m->iov_count, &b, &l))
		return -FI_EINVAL;
	return goSend(EPH(ep), b, l, m->addr, 0, m->data, m->context, flags & ~DN_PRIVATE_FLAGS);
}
static ssize_t dn_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dst)
{
	return goSend(EPH(ep), (void *)buf, len, dst, 0, 0, NULL, FI_INJECT | DN_INJECT_CALL);
}
static ssize_t dn_senddata(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dst, void *ctx)
{
	return goSend(EPH(ep), (void *)buf, len, dst, 0, data, ctx, FI_REMOTE_CQ_DATA | DN_DEFAULT);
}
static ssize_t dn_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data, fi_addr_t dst)
{
	return goSend(EPH(ep), (void *)buf, len, dst, 0, data, NULL, FI_INJECT | DN_INJECT_CALL | FI_REMOTE_CQ_DATA);
}
static struct fi_ops_msg dn_msg_ops = {
	.size = sizeof(struct fi_ops_msg), .recv = dn_recv, .recvv = dn_recvv, .recvmsg = dn_recvmsg,
	.send = dn_send, .sendv = dn_sendv, .sendmsg = dn_sendmsg, .inject = dn_inject,
	.senddata = dn_senddata, .injectdata = dn_injectdata,
};

/* tagged */
static ssize_t dn_trecv(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
			uint64_t tag, uint64_t ignore, void *ctx)
{
	return dn_post_recv(ep, buf, len, src, tag, ignore, ctx, FI_TAGGED | DN_DEFAULT);
}
static ssize_t dn_trecvv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t src, uint64_t tag, uint64_t ignore, void *ctx)
{
	void *b; size_t l;
	if (dn_iov1(iov, count, &b, &l))
		return -FI_EINVAL;
	return goRecv(EPH(ep), b, l, src, tag, ignore, ctx, FI_TAGGED | DN_DEFAULT);
}
static ssize_t dn_trecvmsg(struct fid_ep *ep, const struct fi_msg_tagged *m, uint64_t flags)
{
	void *b; size_t l;
	if (dn_iov1(m->msg_iov, m->iov_count, &b, &l))
		return -FI_EINVAL;
	return goRecv(EPH(ep), b, l, m->addr, m->tag, m->ignore, m->context, (flags & ~DN_PRIVATE_FLAGS) | FI_TAGGED);
}
static ssize_t dn_tsend(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dst,
			uint64_t tag, void *ctx)
{
	return goSend(EPH(ep), (void *)buf, len, dst, tag, 0, ctx, FI_TAGGED | DN_DEFAULT);
}
static ssize_t dn_tsendv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t dst, uint64_t tag, void *ctx)
{
	void *b; size_t l;
	if (dn_iov1(iov, count, &b, &l))
		return -FI_EINVAL;
	return goSend(EPH(ep), b, l, dst, tag, 0, ctx, FI_TAGGED | DN_DEFAULT);
}
static ssize_t dn_tsendmsg(struct fid_ep *ep, const struct fi_msg_tagged *m, uint64_t flags)
{
	void *b; size_t l;
	if (dn_iov1(m->msg_iov, m->iov_count, &b, &l))
		return -FI_EINVAL;
	return goSend(EPH(ep), b, l, m->addr, m->tag, m->data, m->context, (flags & ~DN_PRIVATE_FLAGS) | FI_TAGGED);
}
static ssize_t dn_tinject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dst, uint64_t tag)
{
	return goSend(EPH(ep), (void *)buf, len, dst, tag, 0, NULL, FI_TAGGED | FI_INJECT | DN_INJECT_CALL);
}
static ssize_t dn_tsenddata(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
			    fi_addr_t dst, uint64_t tag, void *ctx)
{
	return goSend(EPH(ep), (void *)buf, len, dst, tag, data, ctx, FI_TAGGED | FI_REMOTE_CQ_DATA | DN_DEFAULT);
}
static ssize_t dn_tinjectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
			      fi_addr_t dst, uint64_t tag)
{
	return goSend(EPH(ep), (void *)buf, len, dst, tag, data, NULL, FI_TAGGED | FI_INJECT | DN_INJECT_CALL | FI_REMOTE_CQ_DATA);
}
static struct fi_ops_tagged dn_tagged_ops = {
	.size = sizeof(struct fi_ops_tagged), .recv = dn_trecv, .recvv = dn_trecvv, .recvmsg = dn_trecvmsg,
	.send = dn_tsend, .sendv = dn_tsendv, .sendmsg = dn_tsendmsg, .inject = dn_tinject,
	.senddata = dn_tsenddata, .injectdata = dn_tinjectdata,
};

/* RMA */
static ssize_t dn_read(struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src,
		       uint64_t addr, uint64_t key, void *ctx)
{
	return goRMA(EPH(ep), 0, buf, len, src, addr, key, 0, ctx, DN_DEFAULT);
}
static ssize_t dn_readv(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			fi_addr_t src, uint64_t addr, uint64_t key, void *ctx)
{
	void *b; size_t l;
	if (dn_iov1(iov, count, &b, &l))
		return -FI_EINVAL;
	return goRMA(EPH(ep), 0, b, l, src, addr, key, 0, ctx, DN_DEFAULT);
}
static ssize_t dn_readmsg(struct fid_ep *ep, const struct fi_msg_rma *m, uint64_t flags)
{
	void *b; size_t l;
	if (dn_iov1(m->msg_iov, m->iov_count, &b, &l) || m->rma_iov_count != 1)
		return -FI_EINVAL;
	return goRMA(EPH(ep), 0, b, l, m->addr, m->rma_iov[0].addr, m->rma_iov[0].key, m->data, m->context, flags & ~DN_PRIVATE_FLAGS);
}
static ssize_t dn_write(struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dst,
			uint64_t addr, uint64_t key, void *ctx)
{
	return goRMA(EPH(ep), 1, (void *)buf, len, dst, addr, key, 0, ctx, DN_DEFAULT);
}
static ssize_t dn_writev(struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
			 fi_addr_t dst, uint64_t addr, uint64_t key, void *ctx)
{
	void *b; size_t l;
	if (dn_iov1(iov, count, &b, &l))
		return -FI_EINVAL;
	return goRMA(EPH(ep), 1, b, l, dst, addr, key, 0, ctx, DN_DEFAULT);
}
static ssize_t dn_writemsg(struct fid_ep *ep, const struct fi_msg_rma *m, uint64_t flags)
{
	void *b; size_t l;
	if (dn_iov1(m->msg_iov, m->iov_count, &b, &l) || m->rma_iov_count != 1)
		return -FI_EINVAL;
	return goRMA(EPH(ep), 1, b, l, m->addr, m->rma_iov[0].addr, m->rma_iov[0].key, m->data, m->context, flags & ~DN_PRIVATE_FLAGS);
}
static ssize_t dn_rma_inject(struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dst, uint64_t addr, uint64_t key)
{
	return goRMA(EPH(ep), 1, (void *)buf, len, dst, addr, key, 0, NULL, FI_INJECT | DN_INJECT_CALL);
}
static ssize_t dn_writedata(struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
			    fi_addr_t dst, uint64_t addr, uint64_t key, void *ctx)
{
	return goRMA(EPH(ep), 1, (void *)buf, len, dst, addr, key, data, ctx, FI_REMOTE_CQ_DATA | DN_DEFAULT);
}
static ssize_t dn_rma_injectdata(struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				 fi_addr_t dst, uint64_t addr, uint64_t key)
{
	return goRMA(EPH(ep), 1, (void *)buf, len, dst, addr, key, data, NULL, FI_INJECT | DN_INJECT_CALL | FI_REMOTE_CQ_DATA);
}
static struct fi_ops_rma dn_rma_ops = {
	.size = sizeof(struct fi_ops_rma), .read = dn_read, .readv = dn_readv, .readmsg = dn_readmsg,
	.write = dn_write, .writev = dn_writev, .writemsg = dn_writemsg, .inject = dn_rma_inject,
	.writedata = dn_writedata, .injectdata = dn_rma_injectdata,
};

/* atomics: 8-byte integers; sum (FADD8), compare-swap (CAS8), and what the
 * two give exactly (read as a sum of 0, write as a swap loop is not offered). */
static int dn_atomic_ok(enum fi_datatype dt, enum fi_op op, size_t count)
{
	if (dt != FI_INT64 && dt != FI_UINT64)
		return 0;
	if (count != 1)
		return 0;
	return op == FI_SUM || op == FI_CSWAP || op == FI_ATOMIC_READ;
}
static ssize_t dn_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc, fi_addr_t dst,
			       uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *ctx)
{
	if (!dn_atomic_ok(dt, op, count) || op != FI_SUM)
		return -FI_EOPNOTSUPP;
	return goAtomic(EPH(ep), op, *(const uint64_t *)buf, 0, NULL, dst, addr, key, ctx);
}
static ssize_t dn_atomic_fetch(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
			       void *result_desc, fi_addr_t dst, uint64_t addr, uint64_t key,
			       enum fi_datatype dt, enum fi_op op, void *ctx)
{
	if (!dn_atomic_ok(dt, op, count) || op == FI_CSWAP)
		return -FI_EOPNOTSUPP;
	return goAtomic(EPH(ep), op, op == FI_ATOMIC_READ ? 0 : *(const uint64_t *)buf, 0, result, dst, addr, key, ctx);
}
static ssize_t dn_atomic_fetchmsg(struct fid_ep *ep, const struct fi_msg_atomic *m, struct fi_ioc *resultv,
				  void **result_desc, size_t result_count, uint64_t flags)
{
	if (m->iov_count != 1 || m->rma_iov_count != 1 || result_count != 1)
		return -FI_EINVAL;
	return dn_atomic_fetch(ep, m->msg_iov[0].addr, m->msg_iov[0].count, NULL, resultv[0].addr, NULL,
			       m->addr, m->rma_iov[0].addr, m->rma_iov[0].key, m->datatype, m->op, m->context);
}
static ssize_t dn_atomic_cswap(struct fid_ep *ep, const void *buf, size_t count, void *desc,
			       const void *compare, void *compare_desc, void *result, void *result_desc,
			       fi_addr_t dst, uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *ctx)
{
	if (!dn_atomic_ok(dt, op, count) || op != FI_CSWAP)
		return -FI_EOPNOTSUPP;
	return goAtomic(EPH(ep), op, *(const uint64_t *)buf, *(const uint64_t *)compare, result, dst, addr, key, ctx);
}
static ssize_t dn_atomic_cswapmsg(struct fid_ep *ep, const struct fi_msg_atomic *m,
				  const struct fi_ioc *comparev, void **compare_desc, size_t compare_count,
				  struct fi_ioc *resultv, void **result_desc, size_t result_count, uint64_t flags)
{
	if (m->iov_count != 1 || m->rma_iov_count != 1 || result_count != 1 || compare_count != 1)
		return -FI_EINVAL;
	return dn_atomic_cswap(ep, m->msg_iov[0].addr, m->msg_iov[0].count, NULL, comparev[0].addr, NULL,
			       resultv[0].addr, NULL, m->addr, m->rma_iov[0].addr, m->rma_iov[0].key,
			       m->datatype, m->op, m->context);
}
static int dn_writevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	if (!dn_atomic_ok(dt, op, 1) || op != FI_SUM)
		return -FI_EOPNOTSUPP;
	*count = 1;
	return 0;
}
static int dn_readwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	if (!dn_atomic_ok(dt, op, 1) || op == FI_CSWAP)
		return -FI_EOPNOTSUPP;
	*count = 1;
	return 0;
}
static int dn_compwritevalid(struct fid_ep *ep, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	if (!dn_atomic_ok(dt, op, 1) || op != FI_CSWAP)
		return -FI_EOPNOTSUPP;
	*count = 1;
	return 0;
}
static struct fi_ops_atomic dn_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic), .write = dn_atomic_write, .writev = NOSYS,
	.writemsg = NOSYS, .inject = NOSYS, .readwrite = dn_atomic_fetch, .readwritev = NOSYS,
	.readwritemsg = dn_atomic_fetchmsg, .compwrite = dn_atomic_cswap, .compwritev = NOSYS,
	.compwritemsg = dn_atomic_cswapmsg, .writevalid = dn_writevalid,
	.readwritevalid = dn_readwritevalid, .compwritevalid = dn_compwritevalid,
};

static struct fi_ops_collective dn_coll_ops = {
	.size = sizeof(struct fi_ops_collective), .barrier = NOSYS, .broadcast = NOSYS,
	.alltoall = NOSYS, .allreduce = NOSYS, .allgather = NOSYS, .reduce_scatter = NOSYS,
	.reduce = NOSYS, .scatter = NOSYS, .gather = NOSYS, .msg = NOSYS, .barrier2 = NOSYS,
};

static int dn_endpoint(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep, void *context)
{
	if (info && info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	struct dn_ep *e = calloc(1, sizeof(*e));
	if (!e)
		return -FI_ENOMEM;
	uint64_t caps = info && info->caps ? info->caps : DN_CAPS;
	uintptr_t h;
	int ret = goEpOpen(e, &h, caps, info && info->tx_attr ? info->tx_attr->op_flags : 0,
			   info && info->rx_attr ? info->rx_attr->op_flags : 0);
	if (ret) {
		free(e);
		return ret;
	}
	e->h = h;
	e->ep.fid.fclass = FI_CLASS_EP;
	e->ep.fid.context = context;
	e->ep.fid.ops = &dn_ep_fi_ops;
	e->ep.ops = &dn_ep_ops;
	e->ep.cm = &dn_cm_ops;
	e->ep.msg = &dn_msg_ops;
	e->ep.rma = &dn_rma_ops;
	e->ep.tagged = &dn_tagged_ops;
	e->ep.atomic = &dn_atomic_ops;
	e->ep.collective = &dn_coll_ops;
	*ep = &e->ep;
	return 0;
}

static int dn_query_atomic(struct fid_domain *domain, enum fi_datatype dt, enum fi_op op,
			   struct fi_atomic_attr *attr, uint64_t flags)
{
	if (!dn_atomic_ok(dt, op, 1))
		return -FI_EOPNOTSUPP;
	if ((flags & FI_COMPARE_ATOMIC) && op != FI_CSWAP)
		return -FI_EOPNOTSUPP;
	if (!(flags & FI_COMPARE_ATOMIC) && op == FI_CSWAP)
		return -FI_EOPNOTSUPP;
	attr->size = 8;
	attr->count = 1;
	return 0;
}

static struct fi_ops_domain dn_domain_ops = {
	.size = sizeof(struct fi_ops_domain), .av_open = dn_av_open, .cq_open = dn_cq_open,
	.endpoint = dn_endpoint, .scalable_ep = NOSYS, .cntr_open = dn_cntr_open,
	.poll_open = NOSYS, .stx_ctx = NOSYS, .srx_ctx = NOSYS, .query_atomic = dn_query_atomic,
	.query_collective = NOSYS, .endpoint2 = NOSYS,
};

static int dn_domain(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom, void *context)
{
	if (info && info->domain_attr && info->domain_attr->name && strcmp(info->domain_attr->name, dn_domain_name))
		return -FI_EINVAL;
	struct dn_domain *d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	d->d.fid.fclass = FI_CLASS_DOMAIN;
	d->d.fid.context = context;
	d->d.fid.ops = &dn_domain_fi_ops;
	d->d.ops = &dn_domain_ops;
	d->d.mr = &dn_mr_ops;
	*dom = &d->d;
	return 0;
}

static struct fi_ops_fabric dn_fabric_ops = {
	.size = sizeof(struct fi_ops_fabric), .domain = dn_domain, .passive_ep = NOSYS,
	.eq_open = dn_eq_open, .wait_open = NOSYS, .trywait = dn_trywait, .domain2 = NOSYS,
};

static int dn_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
	if (attr && attr->name && strcmp(attr->name, dn_fabric_name))
		return -FI_EINVAL;
	struct dn_fabric *f = calloc(1, sizeof(*f));
	if (!f)
		return -FI_ENOMEM;
	f->f.fid.fclass = FI_CLASS_FABRIC;
	f->f.fid.context = context;
	f->f.fid.ops = &dn_free_ops;
	f->f.ops = &dn_fabric_ops;
	f->f.api_version = FI_VERSION(1, 17);
	*fabric = &f->f;
	return 0;
}

static void dn_cleanup(void) {}

static struct fi_provider dn_prov = {
	.version = FI_VERSION(0, 1),
	.fi_version = FI_VERSION(1, 17),
	.name = "dimmnet",
	.getinfo = dn_getinfo,
	.fabric = dn_fabric,
	.cleanup = dn_cleanup,
};

/* dn_param_str reads one of the provider's variables for Go (NULL: unset). */
const char *dn_param_str(const char *name)
{
	char *v = NULL;
	if (fi_param_get_str(&dn_prov, name, &v) != 0)
		return NULL;
	return v;
}

__attribute__((visibility("default"))) struct fi_provider *fi_prov_ini(void)
{
	fi_param_define(&dn_prov, "link", FI_PARAM_STRING,
			"Medium between devices: shm (processes of one host and network namespace), udp (across hosts or namespaces) or pci (the dimmnet PCI device of a lab guest, whose daemon links it). Default: shm");
	fi_param_define(&dn_prov, "dir", FI_PARAM_STRING,
			"shm rendezvous directory (default: dimmnet-ofi-<uid>-<netns> in $TMPDIR or /tmp)");
	fi_param_define(&dn_prov, "udp_addr", FI_PARAM_STRING,
			"udp: the IPv4 address to bind and advertise (default: the address of the default route's interface)");
	fi_param_define(&dn_prov, "node", FI_PARAM_INT,
			"Node id to claim (default: the first free one on shm; on udp one derived from the address and port)");
	fi_param_define(&dn_prov, "max_msg", FI_PARAM_SIZE_T,
			"Largest message getinfo offers (default and bound: 16 MiB)");
	fi_param_define(&dn_prov, "region_mb", FI_PARAM_INT,
			"Size of each endpoint's device region in MiB (default 64)");
	fi_param_define(&dn_prov, "ring_kb", FI_PARAM_INT,
			"Size of each endpoint's receive ring in KiB, 64 to 65536 and at most a quarter of the region (default 256: a small ring's pages stay hot)");
	return &dn_prov;
}
