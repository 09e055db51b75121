//go:build dimmnet_ofi

// The dimmnet provider's own operations (include/fi_dimmnet.h), opened
// with fi_open_ops on an endpoint or its domain: allocation from the
// endpoint's link memory, where the device reaches a buffer with no copy.

#include <string.h>
#include "prov.h"
#include "include/fi_dimmnet.h"
#include "_cgo_export.h"

/* ours is the endpoint fid the provider made: fi_open_ops may hand the
 * ops to a caller that passes another provider's endpoint. */
static struct dn_ep *ours(struct fid_ep *ep)
{
	if (!ep || ep->fid.fclass != FI_CLASS_EP || !ep->fid.ops || ep->fid.ops->ops_open != dn_lm_ops_open)
		return NULL;
	return (struct dn_ep *)ep;
}

static int dn_lm_alloc(struct fid_ep *ep, size_t size, size_t align, void **buf)
{
	struct dn_ep *e = ours(ep);
	if (!e || !buf)
		return -FI_EINVAL;
	return goLmAlloc(e->h, size, align, buf);
}

static int dn_lm_free(struct fid_ep *ep, void *buf)
{
	struct dn_ep *e = ours(ep);
	if (!e)
		return -FI_EINVAL;
	return goLmFree(e->h, buf);
}

static int dn_lm_stats(struct fid_ep *ep, struct fi_dimmnet_linkmem_stats *st)
{
	struct dn_ep *e = ours(ep);
	if (!e || !st)
		return -FI_EINVAL;
	_Static_assert(sizeof(*st) == 8 * sizeof(uint64_t), "goLmStats fills eight words");
	return goLmStats(e->h, (uint64_t *)st);
}

static struct fi_dimmnet_linkmem_ops dn_lm_ops = {
	.size = sizeof(struct fi_dimmnet_linkmem_ops),
	.alloc = dn_lm_alloc,
	.free = dn_lm_free,
	.stats = dn_lm_stats,
};

int dn_lm_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
	(void)fid;
	(void)context;
	if (!name || !ops)
		return -FI_EINVAL;
	if (strcmp(name, FI_DIMMNET_LINKMEM_OPS))
		return -FI_ENOSYS;
	if (flags)
		return -FI_EBADFLAGS;
	*ops = &dn_lm_ops;
	return 0;
}
