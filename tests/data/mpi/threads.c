/* Threads sending at once on many communicators (MPI_THREAD_MULTIPLE): the recorder's
 * counts must be exact and its communicator cache must ask the MPI once per
 * communicator.
 *
 *   threads NCOMM ITERS [NTHREADS]
 *
 * Communicator i is MPI_Comm_split(world, 0, key) with key = rank for even i (the
 * world's order) and key = -rank for odd i (reversed).  Thread t (of NTHREADS, default
 * 8) owns the communicators i with i % NTHREADS == t; ITERS times, for each of its
 * communicators in turn, local rank l sends 8 * (1 + i % 5) + t bytes to local rank
 * (l + 1) % n (MPI_Isend, then MPI_Recv from (l - 1) % n, then MPI_Wait).  A negative
 * NCOMM gives -NCOMM slots that are all MPI_COMM_WORLD (the threads' tags keep them
 * apart).  Rank 0 prints "threads: done SECONDS" (the time of the sending phase, for
 * bench/), then "threads: finalize SECONDS" (its MPI_Finalize, timed by the clock: where
 * a recorder claims its run directory and writes its file). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int ncomm, iters, nthreads = 8;
static MPI_Comm *comms;

static void *run(void *arg)
{
    int t = (int)(long)arg;
    char out[64] = {0}, in[64];
    for (int it = 0; it < iters; it++)
        for (int i = t; i < ncomm; i += nthreads) {
            int l, n;
            MPI_Request rq;
            MPI_Comm_rank(comms[i], &l);
            MPI_Comm_size(comms[i], &n);
            int bytes = 8 * (1 + i % 5) + t;
            MPI_Isend(out, bytes, MPI_BYTE, (l + 1) % n, t, comms[i], &rq);
            MPI_Recv(in, bytes, MPI_BYTE, (l - 1 + n) % n, t, comms[i], MPI_STATUS_IGNORE);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided < MPI_THREAD_MULTIPLE || argc < 3) {
        if (rank == 0)
            printf("threads: no MPI_THREAD_MULTIPLE (%d) or no arguments\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    ncomm = atoi(argv[1]);
    int world_only = ncomm < 0;
    if (world_only)
        ncomm = -ncomm;
    iters = atoi(argv[2]);
    if (argc > 3)
        nthreads = atoi(argv[3]);
    comms = malloc(sizeof *comms * (size_t)ncomm);
    pthread_t *th = malloc(sizeof *th * (size_t)nthreads);
    for (int i = 0; i < ncomm; i++)
        if (world_only)
            comms[i] = MPI_COMM_WORLD;
        else
            MPI_Comm_split(MPI_COMM_WORLD, 0, i % 2 ? -rank : rank, &comms[i]);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (long t = 0; t < nthreads; t++)
        pthread_create(&th[t], NULL, run, (void *)t);
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);
    double t1 = MPI_Wtime();
    for (int i = 0; i < ncomm && !world_only; i++)
        MPI_Comm_free(&comms[i]);
    if (rank == 0)
        printf("threads: done %.6f\n", t1 - t0);
    fflush(stdout);
    struct timespec f0, f1;
    clock_gettime(CLOCK_MONOTONIC, &f0);
    MPI_Finalize();
    clock_gettime(CLOCK_MONOTONIC, &f1);
    if (rank == 0)
        printf("threads: finalize %.6f\n",
               (double)(f1.tv_sec - f0.tv_sec) + 1e-9 * (double)(f1.tv_nsec - f0.tv_nsec));
    return 0;
}
