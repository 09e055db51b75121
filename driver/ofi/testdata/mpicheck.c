/* mpicheck: the point-to-point and collective operations an MPI program
 * leans on, each checked byte for byte, for running Open MPI over the
 * dimmnet libfabric provider (and over its own transports, the baseline).
 *
 *   mpicheck          check; rank 0 prints "mpicheck: ok <size>"
 *   mpicheck bench    also measure 8-byte one-way latency (ranks 0 and 1,
 *                     half the round trip) and 1 MiB bandwidth, median of
 *                     5 runs, printed as "bench: lat8_us=... bw1m_MBps=..."
 *   mpicheck rma      check MPI one-sided: Put, Get, Fetch_and_op and
 *                     Compare_and_swap on a window
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "measure.h"

static int rank, size;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "rank %d: check failed at line %d: ", rank, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); MPI_Abort(MPI_COMM_WORLD, 2); } } while (0)

static unsigned char pat(int src, int tag, size_t i) { return (unsigned char)(src * 31 + tag * 7 + i * 13 + 1); }

static void fill(unsigned char *b, size_t n, int src, int tag)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(src, tag, i);
}

static void verify(const unsigned char *b, size_t n, int src, int tag)
{
	for (size_t i = 0; i < n; i++)
		CHECK(b[i] == pat(src, tag, i), "byte %zu of %zu from %d tag %d: %d, want %d", i, n, src, tag, b[i], pat(src, tag, i));
}

static void p2p(void)
{
	size_t sizes[] = {0, 1, 8, 100, 4096, 16384, 16385, 65536, 1 << 20, 3 << 20};
	int ns = sizeof sizes / sizeof sizes[0];
	size_t max = 3 << 20;
	unsigned char *buf = malloc(max + 64);
	MPI_Status st;
	int count;

	/* every rank sends each size to rank 0, which takes them from ANY_SOURCE */
	for (int k = 0; k < ns; k++) {
		int tag = 100 + k;
		if (rank == 0) {
			for (int r = 1; r < size; r++) {
				memset(buf, 0, sizes[k] + 64);
				MPI_Recv(buf, (int)max, MPI_BYTE, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_BYTE, &count);
				CHECK((size_t)count == sizes[k], "size %zu from %d: got %d", sizes[k], st.MPI_SOURCE, count);
				CHECK(st.MPI_TAG == tag, "tag %d", st.MPI_TAG);
				verify(buf, sizes[k], st.MPI_SOURCE, tag);
			}
		} else {
			fill(buf, sizes[k], rank, tag);
			MPI_Send(buf, (int)sizes[k], MPI_BYTE, 0, tag, MPI_COMM_WORLD);
		}
	}

	/* MPI_Probe then a receive of exactly the probed size */
	if (rank == 0) {
		for (int r = 1; r < size; r++) {
			MPI_Probe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
			MPI_Get_count(&st, MPI_BYTE, &count);
			CHECK(count == 1000 + st.MPI_SOURCE, "probe count %d from %d", count, st.MPI_SOURCE);
			unsigned char *b = malloc(count);
			MPI_Recv(b, count, MPI_BYTE, st.MPI_SOURCE, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			verify(b, count, st.MPI_SOURCE, 7);
			free(b);
		}
	} else {
		fill(buf, 1000 + rank, rank, 7);
		MPI_Send(buf, 1000 + rank, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
	}

	/* MPI_Ssend: completes only once the receive matched */
	if (rank == 1) {
		fill(buf, 64, rank, 8);
		MPI_Ssend(buf, 64, MPI_BYTE, 0, 8, MPI_COMM_WORLD);
	} else if (rank == 0) {
		MPI_Recv(buf, 64, MPI_BYTE, 1, 8, MPI_COMM_WORLD, &st);
		verify(buf, 64, 1, 8);
	}

	/* a truncated receive: the error is named, and the rank goes on */
	if (rank == 1) {
		fill(buf, 256, rank, 9);
		MPI_Send(buf, 256, MPI_BYTE, 0, 9, MPI_COMM_WORLD);
		fill(buf, 300000, rank, 10);
		MPI_Send(buf, 300000, MPI_BYTE, 0, 10, MPI_COMM_WORLD);
	} else if (rank == 0) {
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
		int rc = MPI_Recv(buf, 100, MPI_BYTE, 1, 9, MPI_COMM_WORLD, &st);
		int cls;
		MPI_Error_class(rc, &cls);
		CHECK(cls == MPI_ERR_TRUNCATE, "eager truncated receive: error class %d, want MPI_ERR_TRUNCATE", cls);
		verify(buf, 100, 1, 9);
		rc = MPI_Recv(buf, 1000, MPI_BYTE, 1, 10, MPI_COMM_WORLD, &st);
		MPI_Error_class(rc, &cls);
		CHECK(cls == MPI_ERR_TRUNCATE, "rendezvous truncated receive: error class %d", cls);
		verify(buf, 1000, 1, 10);
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
	}

	/* to itself */
	{
		MPI_Request rq;
		fill(buf, 5000, rank, 11);
		unsigned char *b = malloc(5000);
		MPI_Irecv(b, 5000, MPI_BYTE, rank, 11, MPI_COMM_WORLD, &rq);
		MPI_Send(buf, 5000, MPI_BYTE, rank, 11, MPI_COMM_WORLD);
		MPI_Wait(&rq, MPI_STATUS_IGNORE);
		verify(b, 5000, rank, 11);
		free(b);
	}
	free(buf);
}

static void collectives(void)
{
	long v[1000], sum[1000];
	for (int i = 0; i < 1000; i++)
		v[i] = (long)rank * 1000 + i;
	MPI_Allreduce(v, sum, 1000, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < 1000; i++)
		CHECK(sum[i] == (long)size * (size - 1) / 2 * 1000 + (long)size * i, "allreduce[%d] = %ld", i, sum[i]);

	size_t n = 1 << 20;
	unsigned char *b = malloc(n);
	if (rank == 0)
		fill(b, n, 0, 12);
	else
		memset(b, 0, n);
	MPI_Bcast(b, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
	verify(b, n, 0, 12);
	free(b);
	for (int i = 0; i < 10; i++)
		MPI_Barrier(MPI_COMM_WORLD);
}

static void rma(void)
{
	long *base;
	MPI_Win win;
	MPI_Win_allocate(1024 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
	for (int i = 0; i < 1024; i++)
		base[i] = 0;
	MPI_Win_fence(0, win);
	int peer = (rank + 1) % size;
	long src[16];
	for (int i = 0; i < 16; i++)
		src[i] = rank * 100 + i;
	MPI_Put(src, 16, MPI_LONG, peer, 16 * 0, 16, MPI_LONG, win);
	MPI_Win_fence(0, win);
	int from = (rank + size - 1) % size;
	for (int i = 0; i < 16; i++)
		CHECK(base[i] == from * 100 + i, "put: base[%d] = %ld", i, base[i]);
	long got[16];
	MPI_Get(got, 16, MPI_LONG, peer, 0, 16, MPI_LONG, win);
	MPI_Win_fence(0, win);
	for (int i = 0; i < 16; i++)
		CHECK(got[i] == rank * 100 + i, "get: got[%d] = %ld", i, got[i]);
	/* every rank adds rank+1 to word 100 of rank 0 */
	long one = rank + 1, old;
	MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
	MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 100, MPI_SUM, win);
	MPI_Win_unlock(0, win);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Win_unlock(0, win);
		CHECK(base[100] == (long)size * (size + 1) / 2, "fetch_and_op sum: %ld", base[100]);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	/* compare-and-swap: exactly one rank swaps 0 -> rank+1, and the word
	 * holds the winner's value */
	long cmp = 0, swp = rank + 1, res = -1;
	MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
	MPI_Compare_and_swap(&swp, &cmp, &res, MPI_LONG, 0, 200, win);
	MPI_Win_unlock(0, win);
	int won = res == 0, winners;
	MPI_Allreduce(&won, &winners, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	CHECK(winners == 1, "compare_and_swap: %d winners", winners);
	long mine = won ? swp : 0, want;
	MPI_Allreduce(&mine, &want, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
		MPI_Win_unlock(0, win);
		CHECK(base[200] == want, "compare_and_swap: word %ld, winner's value %ld", base[200], want);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_free(&win);
}

static void bench(void)
{
	double lat[5], bw[5];
	char b8[8] = {0};
	size_t n = 1 << 20;
	char *big = malloc(n);
	memset(big, 1, n);
	for (int run = 0; run < 5; run++) {
		int iters = 10000;
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		for (int i = 0; i < iters + 100; i++) {
			if (i == 100)
				t0 = MPI_Wtime();
			if (rank == 0) {
				MPI_Send(b8, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
				MPI_Recv(b8, 8, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else if (rank == 1) {
				MPI_Recv(b8, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(b8, 8, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
			}
		}
		lat[run] = (MPI_Wtime() - t0) / iters / 2 * 1e6;
		int window = 16, reps = 20;
		MPI_Request rq[16];
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int r = 0; r < reps; r++) {
			if (rank == 0) {
				for (int w = 0; w < window; w++)
					MPI_Isend(big, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &rq[w]);
				MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
				MPI_Recv(b8, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else if (rank == 1) {
				for (int w = 0; w < window; w++)
					MPI_Irecv(big, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &rq[w]);
				MPI_Waitall(window, rq, MPI_STATUSES_IGNORE);
				MPI_Send(b8, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
			}
		}
		bw[run] = (double)n * window * reps / (MPI_Wtime() - t0) / 1e6;
	}
	qsort(lat, 5, sizeof lat[0], cmpd);
	qsort(bw, 5, sizeof bw[0], cmpd);
	if (rank == 0)
		printf("bench: lat8_us=%.3f bw1m_MBps=%.1f\n", lat[2], bw[2]);
	free(big);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	CHECK(size >= 2, "need at least 2 ranks");
	if (argc > 1 && !strcmp(argv[1], "rma")) {
		rma();
	} else if (argc > 1 && !strcmp(argv[1], "bench")) {
		bench();
	} else {
		p2p();
		collectives();
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpicheck: ok %d\n", size);
	MPI_Finalize();
	return 0;
}
