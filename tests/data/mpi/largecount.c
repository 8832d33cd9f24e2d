/* The MPI-4 large-count functions as mpi4py 4 calls them: looked up at run time (a weak
 * reference in mpi4py), so that an MPI-3 library without them still runs the program
 * when a preloaded library defines them.  Two ranks: rank 0 sends 33 bytes to rank 1
 * with MPI_Send_c, then MPI_Bcast_c of 5 ints from rank 0.  Prints "large-count: none"
 * when the functions are not there (nothing is sent then). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>

typedef int (*send_c)(const void *, long long, MPI_Datatype, int, int, MPI_Comm);
typedef int (*bcast_c)(void *, long long, MPI_Datatype, int, MPI_Comm);

int main(int argc, char **argv)
{
    int rank;
    char buf[64] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    send_c s = (send_c)dlsym(RTLD_DEFAULT, "MPI_Send_c");
    bcast_c b = (bcast_c)dlsym(RTLD_DEFAULT, "MPI_Bcast_c");
    if (!s || !b) {
        if (rank == 0)
            printf("large-count: none\n");
    } else {
        if (rank == 0)
            s(buf, 33, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        else if (rank == 1)
            MPI_Recv(buf, 33, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        b(buf, 5, MPI_INT, 0, MPI_COMM_WORLD);
        if (rank == 0)
            printf("large-count: done\n");
    }
    MPI_Finalize();
    return 0;
}
