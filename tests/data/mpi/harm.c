/* What a preloaded library must never change: how an MPI program that does unusual
 * things ends.  One mode a run (2 ranks or more); every line the program prints starts
 * with "harm:".
 *
 *   harm never       never calls MPI_Init (MPI_Initialized says 0), exits 0
 *   harm twice       calls MPI_Init twice (the MPI's own error handling decides)
 *   harm abort       rank 1 calls MPI_Abort(MPI_COMM_WORLD, 3), the others wait
 *   harm killed      rank 1 kills itself with SIGKILL, the others wait
 *   harm fork        rank 0 forks a child that execs /bin/echo and one that _exits,
 *                    waits for both; then a ring and MPI_Finalize */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int rank = -1, size = 0, flag = -1;
    if (!strcmp(mode, "never")) {
        MPI_Initialized(&flag);
        printf("harm: never initialized %d\n", flag);
        return 0;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!strcmp(mode, "twice")) {
        printf("harm: rank %d before the second MPI_Init\n", rank);
        fflush(stdout);
        int rc = MPI_Init(&argc, &argv);
        printf("harm: rank %d second MPI_Init returned %s\n", rank, rc ? "an error" : "0");
    } else if (!strcmp(mode, "abort") || !strcmp(mode, "killed")) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1) {
            printf("harm: rank 1 ends now\n");
            fflush(stdout);
            if (!strcmp(mode, "abort"))
                MPI_Abort(MPI_COMM_WORLD, 3);
            raise(SIGKILL);
        }
        MPI_Barrier(MPI_COMM_WORLD); /* never completes */
    } else if (!strcmp(mode, "fork")) {
        if (rank == 0) {
            fflush(stdout);
            pid_t a = fork();
            if (a == 0) {
                execl("/bin/echo", "echo", "harm: the child exec'd", (char *)NULL);
                _exit(127);
            }
            pid_t b = fork();
            if (b == 0)
                _exit(7);
            int sa = 0, sb = 0;
            waitpid(a, &sa, 0);
            waitpid(b, &sb, 0);
            printf("harm: children exited %d and %d\n", WEXITSTATUS(sa), WEXITSTATUS(sb));
        }
        int token = rank, got = -1;
        MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % size, 0, &got, 1, MPI_INT,
                     (rank - 1 + size) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("harm: rank %d got %d\n", rank, got);
    }
    MPI_Finalize();
    return 0;
}
