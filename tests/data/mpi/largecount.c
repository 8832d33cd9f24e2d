/* The MPI-4 large-count functions as mpi4py 4 calls them: looked up at run time (a weak
 * reference in mpi4py), so that an MPI-3 library without them still runs the program
 * when a preloaded library defines them.  Two ranks: rank 0 sends 33 bytes to rank 1
 * with MPI_Send_c, then MPI_Bcast_c of 5 ints from rank 0, then MPI_Alltoallv_c where
 * rank r sends r+3 bytes to the other rank (1 to itself).  Prints "large-count: none"
 * when the functions are not there (nothing is sent then). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

typedef int (*send_c)(const void *, long long, MPI_Datatype, int, int, MPI_Comm);
typedef int (*bcast_c)(void *, long long, MPI_Datatype, int, MPI_Comm);
typedef int (*alltoallv_c)(const void *, const long long *, const MPI_Aint *, MPI_Datatype,
                           void *, const long long *, const MPI_Aint *, MPI_Datatype,
                           MPI_Comm);

int main(int argc, char **argv)
{
    int rank;
    char buf[64] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    send_c s = (send_c)dlsym(RTLD_DEFAULT, "MPI_Send_c");
    bcast_c b = (bcast_c)dlsym(RTLD_DEFAULT, "MPI_Bcast_c");
    alltoallv_c v = (alltoallv_c)dlsym(RTLD_DEFAULT, "MPI_Alltoallv_c");
    if (!s || !b || !v) {
        if (rank == 0)
            printf("large-count: none\n");
    } else {
        if (rank == 0)
            s(buf, 33, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        else if (rank == 1)
            MPI_Recv(buf, 33, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        b(buf, 5, MPI_INT, 0, MPI_COMM_WORLD);
        long long sc[2], rc[2];
        MPI_Aint sd[2] = {0, 8}, rd[2] = {0, 8};
        for (int j = 0; j < 2; j++) {
            sc[j] = j == rank ? 1 : rank + 3;
            rc[j] = j == rank ? 1 : j + 3;
        }
        char out[16] = {0}, in[16];
        v(out, sc, sd, MPI_BYTE, in, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
        if (rank == 0)
            printf("large-count: done\n");
    }
    MPI_Finalize();
    return 0;
}
