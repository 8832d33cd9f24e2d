/* Shared by the "does it pay?" apps (halo3d.c, cg_like.c): buffers, simulated compute
 * and the one timing line bench/benefit/run_benefit.py and `rankmap simulate` read. */
#ifndef RANKMAP_SIM_COMMON_H
#define RANKMAP_SIM_COMMON_H
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Under SMPI buffers are shared between simulated ranks, so thousands of them fit in
 * memory; the data are not meaningful. */
#ifdef SMPI_SHARED_MALLOC
#define ALLOC(n) SMPI_SHARED_MALLOC(n)
#define FREE(p) SMPI_SHARED_FREE(p)
#else
#define ALLOC(n) malloc(n)
#define FREE(p) free(p)
#endif

/* FLOPS of computation per iteration, simulated under SMPI (nothing elsewhere). */
static inline void sim_compute(double flops)
{
#ifdef SMPI_SHARED_MALLOC
  if (flops > 0)
    smpi_execute_flops(flops);
#else
  (void)flops;
#endif
}

/* After the iteration loop that started at t0: a barrier, then rank 0 prints
 * "rankmap-sim-time SECONDS" (MPI_Wtime of the loop between two barriers). */
static inline void sim_report(int rank, double t0)
{
  MPI_Barrier(MPI_COMM_WORLD);
  double t1 = MPI_Wtime();
  if (rank == 0)
    printf("rankmap-sim-time %.9f\n", t1 - t0);
}
#endif
