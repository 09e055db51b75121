/* side.h: what the provider's C tests share. A "side" is one endpoint
 * with its fabric, domain, AV and CQ (and the counters open_side_cntrs
 * binds), opened from the fi_info the test got; FAIL names the program
 * (PROG, defined before the include). */
#ifndef DIMMNET_OFI_TEST_SIDE_H
#define DIMMNET_OFI_TEST_SIDE_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_cm.h>

#define FAIL(...) do { fprintf(stderr, PROG ": line %d: ", __LINE__); fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); exit(1); } while (0)
#define OK(call) do { int _r = (int)(call); if (_r) FAIL("%s: %d %s", #call, _r, fi_strerror(-_r)); } while (0)

struct side {
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_cntr *cntr[2]; /* open_side_cntrs: bound with its flags[0] and flags[1] */
	char addr[64];
	size_t addrlen;
};

static struct fi_info *info;

/* open_side_cntrs opens a side with a counter bound for each nonzero
 * entry of flags (FI_SEND, FI_WRITE, ...): counters bind before
 * fi_enable. */
static void open_side_cntrs(struct side *s, const uint64_t flags[2])
{
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP};
	OK(fi_fabric(info->fabric_attr, &s->fab, NULL));
	OK(fi_domain(s->fab, info, &s->dom, NULL));
	OK(fi_av_open(s->dom, &ava, &s->av, NULL));
	OK(fi_cq_open(s->dom, &cqa, &s->cq, NULL));
	OK(fi_endpoint(s->dom, info, &s->ep, NULL));
	OK(fi_ep_bind(s->ep, &s->av->fid, 0));
	OK(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	for (int i = 0; i < 2 && flags; i++) {
		if (!flags[i])
			continue;
		OK(fi_cntr_open(s->dom, &ca, &s->cntr[i], NULL));
		OK(fi_ep_bind(s->ep, &s->cntr[i]->fid, flags[i]));
	}
	OK(fi_enable(s->ep));
	s->addrlen = sizeof s->addr;
	OK(fi_getname(&s->ep->fid, s->addr, &s->addrlen));
}

static void open_side(struct side *s) { open_side_cntrs(s, NULL); }

static void close_side(struct side *s)
{
	if (s->ep)
		OK(fi_close(&s->ep->fid));
	for (int i = 0; i < 2; i++)
		if (s->cntr[i])
			OK(fi_close(&s->cntr[i]->fid));
	OK(fi_close(&s->cq->fid));
	OK(fi_close(&s->av->fid));
	OK(fi_close(&s->dom->fid));
	OK(fi_close(&s->fab->fid));
	memset(s, 0, sizeof *s);
}
#endif
