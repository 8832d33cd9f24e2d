/* A tool that blocks inside an MPI call must not stop another thread's MPI calls: a
 * recorder that asks the MPI for a communicator's group while holding its own lock
 * would.  One rank, MPI_THREAD_MULTIPLE, with tests/data/mpi/interposer.c preloaded
 * after the recorder and INTERPOSER_HOLD_GROUPS=1:
 *   - thread A sends to itself on a duplicate of MPI_COMM_WORLD: the recorder, seeing
 *     the communicator for the first time, asks for its group, and the interposer
 *     holds that call;
 *   - meanwhile the main thread sends to itself on MPI_COMM_WORLD, then releases the
 *     interposer.
 * Prints "lockorder: done" when both finished; a recorder holding a lock around the
 * group query never lets the main thread's send through (the launch then times out). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static MPI_Comm twin;

static void self_message(MPI_Comm comm, int bytes)
{
    char out[64] = {0}, in[64];
    MPI_Request rq;
    MPI_Isend(out, bytes, MPI_BYTE, 0, 0, comm, &rq);
    MPI_Recv(in, bytes, MPI_BYTE, 0, 0, comm, MPI_STATUS_IGNORE);
    MPI_Wait(&rq, MPI_STATUS_IGNORE);
}

static void *thread_a(void *arg)
{
    (void)arg;
    self_message(twin, 16);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    void (*release)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "interposer_release");
    if (provided < MPI_THREAD_MULTIPLE || !release) {
        printf("lockorder: no MPI_THREAD_MULTIPLE or no interposer\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &twin);
    pthread_t a;
    pthread_create(&a, NULL, thread_a, NULL);
    usleep(200000); /* thread A is held in PMPI_Comm_group */
    self_message(MPI_COMM_WORLD, 8);
    release();
    pthread_join(a, NULL);
    MPI_Comm_free(&twin);
    printf("lockorder: done\n");
    MPI_Finalize();
    return 0;
}
