/* Prints one line per rank: "rank R host H cpu C", C being the CPU the rank runs on.
 * With --ring BYTES it first passes BYTES to the next rank in a ring (for the
 * Open MPI monitoring importer's tests). */
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size;
    char host[256];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 2 && strcmp(argv[1], "--ring") == 0 && size > 1) {
        int bytes = atoi(argv[2]);
        char *buf = calloc((size_t)bytes, 1);
        MPI_Sendrecv_replace(buf, bytes, MPI_BYTE, (rank + 1) % size, 0,
                             (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        free(buf);
    }
    gethostname(host, sizeof host);
    printf("rank %d host %s cpu %d\n", rank, host, sched_getcpu());
    MPI_Finalize();
    return 0;
}
