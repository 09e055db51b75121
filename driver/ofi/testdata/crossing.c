/* crossing: what one call into the provider costs, split into the
 * C-to-Go crossing alone (an exported Go function that does nothing) and
 * fi_cq_read on an idle CQ (crossing, lock, one pass of the device, the
 * status ring looked at). Prints ns per call, medians of 5. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include "measure.h"

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info;
	hints->caps = FI_TAGGED;
	hints->ep_attr->type = FI_EP_RDM;
	hints->fabric_attr->prov_name = strdup("dimmnet");
	if (fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info))
		return 1;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_av_attr ava = {.type = FI_AV_TABLE};
	if (fi_fabric(info->fabric_attr, &fab, NULL) || fi_domain(fab, info, &dom, NULL) || fi_av_open(dom, &ava, &av, NULL) ||
	    fi_cq_open(dom, &cqa, &cq, NULL) || fi_endpoint(dom, info, &ep, NULL) || fi_ep_bind(ep, &av->fid, 0) ||
	    fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) || fi_enable(ep))
		return 1;
	void *lib = dlopen(getenv("DIMMNET_FI_LIB"), RTLD_NOW | RTLD_NOLOAD);
	int (*nop)(void) = lib ? (int (*)(void))dlsym(lib, "dimmnet_nop") : NULL;
	if (!nop)
		return 1;
	int n = 1000000;
	double cross[5], read[5];
	struct fi_cq_tagged_entry e;
	for (int r = 0; r < 5; r++) {
		double t0 = now();
		for (int i = 0; i < n; i++)
			nop();
		cross[r] = (now() - t0) / n;
		t0 = now();
		for (int i = 0; i < n; i++)
			fi_cq_read(cq, &e, 1);
		read[r] = (now() - t0) / n;
	}
	qsort(cross, 5, sizeof cross[0], cmpd);
	qsort(read, 5, sizeof read[0], cmpd);
	printf("crossing: C->Go nop %.1f ns, fi_cq_read idle %.1f ns (medians of 5 x %d)\n", cross[2], read[2], n);
	fi_close(&ep->fid);
	fi_close(&cq->fid);
	fi_close(&av->fid);
	fi_close(&dom->fid);
	fi_close(&fab->fid);
	return 0;
}
