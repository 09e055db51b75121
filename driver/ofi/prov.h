/* Shared by the provider's C tables (prov.c) and its Go side (the cgo
 * preamble): the libfabric headers and the constants both sides agree on. */
#ifndef DIMMNET_OFI_PROV_H
#define DIMMNET_OFI_PROV_H

#include <stdint.h>
#include <stddef.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_collective.h>
#include <rdma/providers/fi_prov.h>

/* What the provider offers (primary and secondary capabilities). */
#define DN_CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | \
		 FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | \
		 FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM | \
		 FI_MULTI_RECV)

/* The message orders an endpoint keeps (tx and rx alike); a caller
 * asking for another gets no match, as libfabric's own providers answer. */
#define DN_MSG_ORDER (FI_ORDER_SAS | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | \
		      FI_ORDER_WAW | FI_ORDER_SAR | FI_ORDER_SAW)
/* The domain's capabilities: no FI_SHARED_AV. */
#define DN_DOMAIN_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)

/* The fixed length of an endpoint address (see addr.go). */
#define DN_ADDRLEN 16
/* The largest fi_inject: copied into link memory at once. */
#define DN_INJECT 4096
/* The largest message: a rendezvous body fits a quarter of the arena. */
#define DN_MAX_MSG (16UL << 20)

/* Marks a call without a flags argument (fi_send, fi_trecv, ...): it takes
 * the endpoint's default op_flags (bit 63 is no operation flag). */
#define DN_DEFAULT (1ULL << 63)

/* Marks the inject calls (fi_inject, fi_tinject, fi_injectdata,
 * fi_tinjectdata, fi_inject_write, fi_inject_writedata): they owe the caller
 * no completion once they return, only an error entry if they fail
 * (inject.go). FI_INJECT itself, as fi_sendmsg's flag, only frees the
 * buffer at once: such a send still completes (bit 62 is no operation
 * flag). */
#define DN_INJECT_CALL (1ULL << 62)

/* The bits above, which a caller's flags (fi_sendmsg's, ...) may not set. */
#define DN_PRIVATE_FLAGS (DN_DEFAULT | DN_INJECT_CALL)

const char *dn_param_str(const char *name);

/* Receives fi_recv and fi_trecv post without entering Go: a ring in the
 * endpoint's C memory that callers fill under a spinlock and the Go side
 * empties, in order, whenever it is entered for the endpoint (every
 * fi_cq_read progresses it). A C-to-Go call costs about 80 ns before the
 * provider's lock and lookup, and a ping-pong posts a receive per
 * message on its critical path. */
#define DN_RXQ 64 /* entries, a power of two */

struct dn_rxq_ent {
	void *buf;
	size_t len;
	fi_addr_t src;
	uint64_t tag, ignore, flags;
	void *ctx;
};

struct dn_ep {
	struct fid_ep ep;
	uintptr_t h;
	int ready;          /* enabled and open: receives may be queued (Go stores it) */
	char lock;          /* producers' spinlock */
	uint64_t rxq_tail;  /* entries queued (producers, under lock) */
	uint64_t rxq_head;  /* entries taken (Go, under its lock) */
	struct dn_rxq_ent rxq[DN_RXQ];
};

/* ---- wait objects (wait.c, wait.go): FI_WAIT_FD descriptors, fi_trywait,
 * the event queue. */
uintptr_t dn_fid_handle(struct fid *fid);
int dn_wait_control(struct fid *fid, int command, void *arg);
int dn_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq, void *context);
int dn_trywait(struct fid_fabric *fabric, struct fid **fids, int count);
int dn_cq_signal(struct fid_cq *cq);

/* fi_open_ops on an endpoint or a domain: the provider's own operations,
 * include/fi_dimmnet.h (linkmem.c). */
int dn_lm_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context);

#endif
