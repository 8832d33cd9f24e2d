/* Prints one line per process: "old R new K host H cpu C local L file F", R being the
 * rank the launcher gave it (MPI_COMM_WORLD), K its rank in librankmap's rankmap_comm()
 * communicator, C the CPU it runs on, L its SLURM_LOCALID (-1 without) and F its
 * RANKMAP_REORDER ("-" without); then, on the new rank 0, "reorder sum S" (the sum of
 * the new ranks over the new communicator, to show that it is usable).
 * Link with -lrankmap. */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rankmap.h"

int main(int argc, char **argv)
{
    int old, new_rank, sum = 0;
    char host[256];
    MPI_Comm comm;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &old);
    if (rankmap_comm(MPI_COMM_WORLD, &comm) != MPI_SUCCESS) {
        fprintf(stderr, "rankmap_comm failed\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(comm, &new_rank);
    MPI_Reduce(&new_rank, &sum, 1, MPI_INT, MPI_SUM, 0, comm);
    gethostname(host, sizeof host);
    const char *local = getenv("SLURM_LOCALID"), *file = getenv("RANKMAP_REORDER");
    printf("old %d new %d host %s cpu %d local %s file %s\n", old, new_rank, host,
           sched_getcpu(), local && *local ? local : "-1", file && *file ? file : "-");
    fflush(stdout);
    if (new_rank == 0)
        printf("reorder sum %d\n", sum);
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return 0;
}
