/* A hybrid MPI + OpenMP rank reports where it and its threads run: one line per rank,
 *   "omp rank R host H start LIST places P bind B threads L0;L1"
 * START is the CPUs the program was started on (its mask on entering main, which is what
 * an OpenMP runtime builds its places from), P and B the OMP_PLACES and OMP_PROC_BIND it
 * was given ("-" when unset), and Lt the CPUs thread t of a parallel region of two
 * threads may run on (sched_getaffinity in the thread).  Build: mpicc -fopenmp. */
#define _GNU_SOURCE
#include <mpi.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_list.h"

#define THREADS 2

int main(int argc, char **argv)
{
    char start[256], host[256], threads[THREADS][256];
    int rank;
    cpu_list(0, start, sizeof start);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#pragma omp parallel num_threads(THREADS)
    cpu_list(0, threads[omp_get_thread_num()], sizeof threads[0]);
    gethostname(host, sizeof host);
    const char *places = getenv("OMP_PLACES"), *bind = getenv("OMP_PROC_BIND");
    printf("omp rank %d host %s start %s places %s bind %s threads %s;%s\n", rank, host,
           start, places ? places : "-", bind ? bind : "-", threads[0], threads[1]);
    MPI_Finalize();
    return 0;
}
