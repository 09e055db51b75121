/* fi_dimmnet.h: the dimmnet libfabric provider's own operations, for
 * applications built on stock libfabric (they link nothing of ours).
 *
 * A dimmnet device reaches only its link memory, as DIMMnet's SO-DIMM
 * does: a buffer in ordinary memory moves through bounce copies in link
 * memory, a buffer allocated here moves with no copy. Open the operations
 * on an endpoint or its domain and allocate from the endpoint's link
 * memory (each endpoint embeds a device of its own):
 *
 *	struct fi_dimmnet_linkmem_ops *lm;
 *	fi_open_ops(&domain->fid, FI_DIMMNET_LINKMEM_OPS, 0, (void **)&lm, NULL);
 *	void *buf;
 *	lm->alloc(ep, 1 << 20, 0, &buf);  // before or after fi_enable
 *	... fi_tsend(ep, buf, n, NULL, dst, tag, ctx) ...
 *	lm->free(ep, buf);                  // before fi_close(&ep->fid)
 *
 * Rules (docs/ofi.md, "Link memory for applications"):
 * - alloc returns -FI_EINVAL for size 0 or an alignment that is not a
 *   power of two, -FI_ENOMEM when the endpoint's link memory cannot hold
 *   size (part of it stays reserved for the provider's own bounce copies);
 *   buffers are aligned to at least 64 bytes.
 * - free takes exactly a pointer alloc returned; anything else (a pointer
 *   inside a buffer, one freed already, ordinary memory) is -FI_EINVAL.
 * - A buffer stays valid until freed; fi_close of its endpoint returns
 *   -FI_EBUSY while any of its buffers is allocated (closing unmaps link
 *   memory).
 * - A send (fi_send, fi_tsend, fi_senddata, ...) whose whole [buf, buf+len)
 *   lies in one allocated buffer leaves from there: a rendezvous body
 *   (over 16 KiB) from anywhere in the buffer, an eager body when buf is
 *   the buffer's start (the wire header goes in room kept before it; a
 *   second eager send from the same start while the first is in flight is
 *   copied). fi_inject and FI_INJECT always copy: the caller may reuse its
 *   buffer when inject returns, while the device reads its source until
 *   the peer acknowledges (a retransmission reads it again).
 * - A receive whose buffer lies in one allocated buffer gets a
 *   rendezvous body PULLed straight into it; eager bodies land in the
 *   device's receive ring and are copied out whatever the buffer.
 * - A buffer that is not wholly inside one allocation (for example one
 *   that straddles an allocation's end) is ordinary memory: copied.
 * - fi_mr_reg of a region inside one allocation (8-byte aligned, below
 *   128 MiB) gives a key of the provider's (bit 63 set; read it with
 *   fi_mr_key, the requested key is not used): fi_read, fi_write without
 *   remote CQ data and the 8-byte atomics on it are done by the
 *   initiator's device (PUSH, PULL, FADD8, CAS8), with no work of the
 *   target's provider. Ordinary memory may not be registered under a
 *   requested key with bit 63 set (-FI_ENOKEY).
 */
#ifndef FI_DIMMNET_H
#define FI_DIMMNET_H

#include <stddef.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>

#define FI_DIMMNET_LINKMEM_OPS "dimmnet_linkmem_v1"

/* What an endpoint moved with and without copies, since it opened. */
struct fi_dimmnet_linkmem_stats {
	uint64_t zc_sends;     /* sends whose body left from the caller's link memory */
	uint64_t copied_sends; /* sends whose body was copied into link memory first */
	uint64_t zc_pulls;     /* rendezvous bodies pulled straight into the caller's buffer */
	uint64_t copied_pulls; /* rendezvous bodies pulled into a bounce, then copied out */
	uint64_t device_rma;   /* RMA reads, writes and 8-byte atomics the device did on a region in the peer's link memory */
	uint64_t copied_rma;   /* of those, ones whose local buffer was not in link memory (bounced) */
	uint64_t allocated;    /* bytes of link memory the caller holds (with their 64-byte rooms) */
	uint64_t avail;        /* bytes alloc could still hand out, at most, in one piece */
};

struct fi_dimmnet_linkmem_ops {
	size_t size; /* sizeof(struct fi_dimmnet_linkmem_ops) */
	int (*alloc)(struct fid_ep *ep, size_t size, size_t align, void **buf);
	int (*free)(struct fid_ep *ep, void *buf);
	int (*stats)(struct fid_ep *ep, struct fi_dimmnet_linkmem_stats *st);
};

#endif
