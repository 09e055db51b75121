/* measure.h: what the measuring tools (ppstat, rmastat, crossing) and
 * mpicheck's bench share: a nanosecond clock, the comparison qsort takes
 * for medians, and CK, which ends a tool at the first libfabric call that
 * fails, naming it. */
#ifndef DIMMNET_MEASURE_H
#define DIMMNET_MEASURE_H
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static inline int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* CK needs rdma/fi_errno.h (fi_strerror) where it is used. */
#define CK(x) do { int _r = (int)(x); if (_r) { fprintf(stderr, "%s: %d %s\n", #x, _r, fi_strerror(-_r)); exit(1); } } while (0)
#endif
