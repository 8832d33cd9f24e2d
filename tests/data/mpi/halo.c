/* A program whose traffic is known to the byte, for the recorder's tests and bench.
 *
 *   halo [--iters N] [--pattern halo|alltoall|self|stencil3d] [--bytes B] [--collectives]
 *        [--rss] [--time]
 *
 * halo (default, n >= 2 ranks, N iterations, default 3), per iteration rank r sends:
 *   - MPI_Isend of B/8 doubles (B default 1000) to (r+1)%n on MPI_COMM_WORLD;
 *   - MPI_Sendrecv of 10 ints (40 bytes) to (r-1)%n;
 *   - MPI_Sendrecv_replace of 2 doubles (16 bytes) on REV, MPI_COMM_WORLD split in
 *     reverse order (local rank n-1-r), to local rank (local+1)%n: world (r-1)%n;
 *   - MPI_Start of a persistent MPI_Send_init of 50 MPI_BYTEs to (r+2)%n;
 *   - MPI_Send of 7 bytes to MPI_PROC_NULL (no traffic);
 * then once: MPI_Bcast of 100 doubles from root 1 (world), MPI_Allreduce of 8 doubles
 * (world), MPI_Alltoall of 4 ints per block (world), MPI_Bcast of 64 bytes from local
 * root 0 on REV (world rank n-1).
 * --collectives: also once each, on MPI_COMM_WORLD: Reduce 3 ints to root 0, Scan and
 * Exscan 2 doubles, Allgather 5 bytes, Gather 6 bytes to root n-1, Scatter 7 bytes
 * from root 0, Alltoallv rank r sends r+j+1 ints to j, Allgatherv rank j contributes
 * j+1 bytes, Gatherv rank j sends j+2 bytes to root 1, Scatterv root 0 sends j+3
 * bytes to j, Reduce_scatter j+1 ints to j, Reduce_scatter_block 2 ints,
 * Ibcast 9 bytes from root 0, Iallreduce 1 double, Barrier.
 * alltoall: N iterations of MPI_Alltoall of B bytes per block (the bench's other
 * program).
 * stencil3d: a periodic 3D halo exchange on the grid MPI_Dims_create(n, 3) makes
 * (MPI_Cart_create, reorder 0: grid ranks are world ranks, row-major), N iterations;
 * per iteration and per axis d of size > 1, rank r sends B*dims[d] bytes (a cube
 * split over the grid: the face normal to axis d is proportional to dims[d]) to each
 * of its two neighbours along d with MPI_Sendrecv on MPI_COMM_WORLD (a size-2 axis:
 * both to the same neighbour).  No collectives.
 * self: N iterations of MPI_Sendrecv of B bytes to the rank itself (the bench's
 * per-call cost; --time then also prints "cpu SECONDS", user+system of rank 0).
 * --rss: rank 0 prints "maxrss KB" (getrusage) before MPI_Finalize.
 * --time: rank 0 prints "elapsed SECONDS" (MPI_Wtime between a barrier after MPI_Init
 * and one after the pattern).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 +
           (double)u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    int rank, n, iters = 3, bytes = 1000, collectives = 0, rss = 0, a2a = 0, timed = 0;
    int self = 0, stencil = 0;
    double t0 = 0, c0 = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
            bytes = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pattern") && i + 1 < argc) {
            i++;
            a2a = !strcmp(argv[i], "alltoall");
            self = !strcmp(argv[i], "self");
            stencil = !strcmp(argv[i], "stencil3d");
        } else if (!strcmp(argv[i], "--collectives"))
            collectives = 1;
        else if (!strcmp(argv[i], "--rss"))
            rss = 1;
        else if (!strcmp(argv[i], "--time"))
            timed = 1;
    }
    if (timed) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        c0 = cpu_seconds();
    }
    if (self) {
        char *s = calloc((size_t)bytes + 1, 1), *r = calloc((size_t)bytes + 1, 1);
        for (int it = 0; it < iters; it++)
            MPI_Sendrecv(s, bytes, MPI_BYTE, rank, 6, r, bytes, MPI_BYTE, rank, 6,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        free(s);
        free(r);
    } else if (stencil) {
        int dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1};
        MPI_Comm cart;
        MPI_Dims_create(n, 3, dims);
        MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
        char *s = calloc((size_t)bytes * n + 1, 1), *r = calloc((size_t)bytes * n + 1, 1);
        for (int it = 0; it < iters; it++)
            for (int d = 0; d < 3; d++) {
                int lo, hi, count = bytes * dims[d];
                if (dims[d] < 2)
                    continue;
                MPI_Cart_shift(cart, d, 1, &lo, &hi);
                MPI_Sendrecv(s, count, MPI_BYTE, hi, 7, r, count, MPI_BYTE, lo, 7,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Sendrecv(s, count, MPI_BYTE, lo, 8, r, count, MPI_BYTE, hi, 8,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        MPI_Comm_free(&cart);
        free(s);
        free(r);
    } else if (a2a) {
        char *s = calloc((size_t)bytes * n, 1), *r = calloc((size_t)bytes * n, 1);
        for (int it = 0; it < iters; it++)
            MPI_Alltoall(s, bytes, MPI_BYTE, r, bytes, MPI_BYTE, MPI_COMM_WORLD);
        free(s);
        free(r);
    } else {
        int right = (rank + 1) % n, left = (rank + n - 1) % n;
        int nd = bytes / 8;
        double *out = calloc((size_t)nd + 1, sizeof(double));
        double *in = calloc((size_t)nd + 1, sizeof(double));
        int iout[10] = {0}, iin[10];
        double rep[2] = {0, 0};
        char pout[50] = {0}, pin[50], junk[7] = {0};
        MPI_Comm rev;
        MPI_Request req[2], preq[2];
        MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - rank, &rev);
        int lrank, lsize;
        MPI_Comm_rank(rev, &lrank);
        MPI_Comm_size(rev, &lsize);
        /* the send second: MPI_Startall's array must be read at the handle's width */
        MPI_Recv_init(pin, 50, MPI_BYTE, (rank + n - 2) % n, 3, MPI_COMM_WORLD, &preq[0]);
        MPI_Send_init(pout, 50, MPI_BYTE, (rank + 2) % n, 3, MPI_COMM_WORLD, &preq[1]);
        for (int it = 0; it < iters; it++) {
            MPI_Irecv(in, nd, MPI_DOUBLE, left, 1, MPI_COMM_WORLD, &req[0]);
            MPI_Isend(out, nd, MPI_DOUBLE, right, 1, MPI_COMM_WORLD, &req[1]);
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
            MPI_Sendrecv(iout, 10, MPI_INT, left, 2, iin, 10, MPI_INT, right, 2,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv_replace(rep, 2, MPI_DOUBLE, (lrank + 1) % lsize, 4,
                                 (lrank + lsize - 1) % lsize, 4, rev, MPI_STATUS_IGNORE);
            MPI_Startall(2, preq);
            MPI_Waitall(2, preq, MPI_STATUSES_IGNORE);
            MPI_Send(junk, 7, MPI_BYTE, MPI_PROC_NULL, 5, MPI_COMM_WORLD);
        }
        MPI_Request_free(&preq[0]);
        MPI_Request_free(&preq[1]);
        double b[100] = {0}, ar[8] = {0}, arr[8];
        int *a2s = calloc(4 * (size_t)n, sizeof(int)), *a2r = calloc(4 * (size_t)n, sizeof(int));
        char rb[64] = {0};
        MPI_Bcast(b, 100, MPI_DOUBLE, 1 % n, MPI_COMM_WORLD);
        MPI_Allreduce(ar, arr, 8, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Alltoall(a2s, 4, MPI_INT, a2r, 4, MPI_INT, MPI_COMM_WORLD);
        MPI_Bcast(rb, 64, MPI_BYTE, 0, rev);
        MPI_Comm_free(&rev);
        free(a2s);
        free(a2r);
        free(out);
        free(in);
    }
    if (collectives) {
        int big = 64 * n * n + 64;
        char *s = calloc((size_t)big, 1), *r = calloc((size_t)big, 1);
        int *sc = calloc((size_t)n, sizeof(int)), *rc = calloc((size_t)n, sizeof(int));
        int *sd = calloc((size_t)n, sizeof(int)), *rd = calloc((size_t)n, sizeof(int));
        MPI_Request q;
        MPI_Reduce(s, r, 3, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Scan(s, r, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Exscan(s, r, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allgather(s, 5, MPI_BYTE, r, 5, MPI_BYTE, MPI_COMM_WORLD);
        MPI_Gather(s, 6, MPI_BYTE, r, 6, MPI_BYTE, n - 1, MPI_COMM_WORLD);
        MPI_Scatter(s, 7, MPI_BYTE, r, 7, MPI_BYTE, 0, MPI_COMM_WORLD);
        for (int j = 0, so = 0, ro = 0; j < n; j++) {
            sc[j] = rank + j + 1;
            rc[j] = j + rank + 1; /* what j sends to me */
            sd[j] = so;
            rd[j] = ro;
            so += sc[j];
            ro += rc[j];
        }
        MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, MPI_COMM_WORLD);
        for (int j = 0, o = 0; j < n; j++) {
            rc[j] = j + 1;
            rd[j] = o;
            o += rc[j];
        }
        MPI_Allgatherv(s, rank + 1, MPI_BYTE, r, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        for (int j = 0, o = 0; j < n; j++) {
            rc[j] = j + 2;
            rd[j] = o;
            o += rc[j];
        }
        MPI_Gatherv(s, rank + 2, MPI_BYTE, r, rc, rd, MPI_BYTE, 1 % n, MPI_COMM_WORLD);
        for (int j = 0, o = 0; j < n; j++) {
            sc[j] = j + 3;
            sd[j] = o;
            o += sc[j];
        }
        MPI_Scatterv(s, sc, sd, MPI_BYTE, r, rank + 3, MPI_BYTE, 0, MPI_COMM_WORLD);
        for (int j = 0; j < n; j++)
            rc[j] = j + 1;
        MPI_Reduce_scatter(s, r, rc, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Reduce_scatter_block(s, r, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Ibcast(s, 9, MPI_BYTE, 0, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        MPI_Iallreduce(s, r, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &q);
        MPI_Wait(&q, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
        free(s);
        free(r);
        free(sc);
        free(rc);
        free(sd);
        free(rd);
    }
    if (timed) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            printf("elapsed %.6f\ncpu %.6f\n", MPI_Wtime() - t0, cpu_seconds() - c0);
    }
    if (rss && rank == 0) {
        struct rusage u;
        getrusage(RUSAGE_SELF, &u);
        printf("maxrss %ld\n", u.ru_maxrss);
    }
    MPI_Finalize();
    return 0;
}
