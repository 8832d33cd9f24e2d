/* cg_like: the communication of NPB CG on a 2D process grid, plus one allreduce per
 * iteration, for rankmap's "does it pay?" lab.
 *
 * Usage: cg_like [-b BYTES] [-i ITERATIONS] [-f FLOPS] [-v]   (ranks: a power of two)
 *
 * Pattern, identical to rankmap's generator npb-cg (slurm_plugin/profiles/generators.py,
 * after NPB 3.x CG's setup_proc_info/setup_submatrix_info):
 *   nprows = 2^floor(log2(n)/2), npcols = n / nprows; rank = row*npcols + col;
 *   per iteration
 *   1. the row reduction by recursive doubling: log2(npcols) exchanges of BYTES with
 *      the rank whose column differs in bit k (MPI_Sendrecv);
 *   2. the transpose exchange: BYTES to partner(r) = (col % nprows)*npcols +
 *      row*(npcols/nprows) + col/nprows and from the rank whose partner is r
 *      (a permutation, not always an involution);
 *   3. MPI_Allreduce of one double over all ranks (the dot product).
 * Rank 0 prints "rankmap-sim-time SECONDS" (MPI_Wtime of the loop between barriers).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_common.h"

static int partner_of(int r, int rows, int cols)
{
  int row = r / cols, col = r % cols;
  return (col % rows) * cols + row * (cols / rows) + col / rows;
}

int main(int argc, char **argv)
{
  int rank, size, iters = 20, verbose = 0;
  long bytes = 65536;
  double flops = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-b") && i + 1 < argc)
      bytes = atol(argv[++i]);
    else if (!strcmp(argv[i], "-i") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-f") && i + 1 < argc)
      flops = atof(argv[++i]);
    else if (!strcmp(argv[i], "-v"))
      verbose = 1;
    else {
      if (rank == 0)
        fprintf(stderr, "cg_like: unknown argument %s\n", argv[i]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  if (size & (size - 1)) {
    if (rank == 0)
      fprintf(stderr, "cg_like: the number of ranks must be a power of two, got %d\n", size);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  if (verbose) {
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(host, &len);
    printf("rank %d host %s\n", rank, host);
  }
  int log2n = 0;
  while ((1 << log2n) < size)
    log2n++;
  int rows = 1 << (log2n / 2), cols = size / rows;
  int row = rank / cols, col = rank % cols;
  int to = partner_of(rank, rows, cols), from = rank;
  for (int q = 0; q < size; q++)
    if (partner_of(q, rows, cols) == rank)
      from = q;
  char *sendbuf = ALLOC((size_t)bytes + 1);
  char *recvbuf = ALLOC((size_t)bytes + 1);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int it = 0; it < iters; it++) {
    for (int k = 1; k < cols; k <<= 1) {
      int peer = row * cols + (col ^ k);
      MPI_Sendrecv(sendbuf, (int)bytes, MPI_BYTE, peer, 1, recvbuf, (int)bytes, MPI_BYTE, peer, 1,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    if (to != rank)
      MPI_Sendrecv(sendbuf, (int)bytes, MPI_BYTE, to, 2, recvbuf, (int)bytes, MPI_BYTE, from, 2,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double x = 1.0, y;
    MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    sim_compute(flops);
  }
  sim_report(rank, t0);
  FREE(sendbuf);
  FREE(recvbuf);
  MPI_Finalize();
  return 0;
}
