/* halo3d: 3D domain decomposition with a 7-point halo exchange, for rankmap's
 * "does it pay?" lab (bench/benefit/README in the project README, section "Does it pay?").
 *
 * Usage: halo3d -d AxBxC [-p] [-s] [-b BYTES] [-i ITERATIONS] [-f FLOPS] [-v]
 *   -d  process grid (A*B*C must equal the number of ranks)
 *   -p  periodic in every dimension
 *   -s  exchange one dimension after the other (x, then y, then z; each waited for
 *       before the next starts), as codes that fill their halo's edges and corners
 *       with three pairs of messages do; rankmap's profile for it is stencil3d with
 *       exchange=axes, one phase per dimension
 *   -b  bytes per face message (default 65536)
 *   -i  iterations (default 20)
 *   -f  flops per iteration, simulated with smpi_execute_flops under SMPI (default 0)
 *   -v  every rank prints "rank R host H" (to check the hostfile order)
 *
 * Rank <-> coordinate convention, identical to rankmap's generator stencil3d
 * (numpy's C order, slurm_plugin/profiles/generators.py): rank = (x*B + y)*C + z with
 * x in [0,A), y in [0,B), z in [0,C); the last dimension varies fastest.
 * Neighbours along an axis of size s: +1 and -1; with -p the wrap-around pair is
 * added only when s > 2 (for s == 2 both neighbours are the same rank, and the
 * generator has one edge), as in the generator.
 *
 * Every iteration posts all receives and sends (MPI_Irecv/MPI_Isend) and waits for
 * them (with -s: those of one dimension at a time).  Rank 0 prints "rankmap-sim-time SECONDS": MPI_Wtime of the iteration loop,
 * between two barriers.  Buffers come from SMPI_SHARED_MALLOC under SMPI, so
 * thousands of simulated ranks fit in memory; the data are not meaningful.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_common.h"

static void usage(int rank, const char *msg)
{
  if (rank == 0)
    fprintf(stderr, "halo3d: %s\nusage: halo3d -d AxBxC [-p] [-s] [-b BYTES] [-i ITER] [-f FLOPS] [-v]\n", msg);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

int main(int argc, char **argv)
{
  int rank, size, dims[3] = {0, 0, 0}, periodic = 0, by_axis = 0, iters = 20, verbose = 0;
  long bytes = 65536;
  double flops = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-d") && i + 1 < argc) {
      if (sscanf(argv[++i], "%dx%dx%d", &dims[0], &dims[1], &dims[2]) != 3)
        usage(rank, "-d needs AxBxC");
    } else if (!strcmp(argv[i], "-p")) {
      periodic = 1;
    } else if (!strcmp(argv[i], "-s")) {
      by_axis = 1;
    } else if (!strcmp(argv[i], "-b") && i + 1 < argc) {
      bytes = atol(argv[++i]);
    } else if (!strcmp(argv[i], "-i") && i + 1 < argc) {
      iters = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "-f") && i + 1 < argc) {
      flops = atof(argv[++i]);
    } else if (!strcmp(argv[i], "-v")) {
      verbose = 1;
    } else {
      usage(rank, "unknown argument");
    }
  }
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || dims[0] * dims[1] * dims[2] != size)
    usage(rank, "-d AxBxC must multiply to the number of ranks");
  if (bytes < 0 || iters < 0)
    usage(rank, "-b and -i must not be negative");
  if (verbose) {
    char host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_processor_name(host, &len);
    printf("rank %d host %s\n", rank, host);
  }
  int coord[3] = {rank / (dims[1] * dims[2]), (rank / dims[2]) % dims[1], rank % dims[2]};
  int nbr[6], nn = 0, first[4] = {0, 0, 0, 0}; /* first[ax]: ax's first neighbour */
  for (int ax = 0; ax < 3; ax++) {
    first[ax] = nn;
    for (int dir = -1; dir <= 1; dir += 2) {
      int c[3] = {coord[0], coord[1], coord[2]};
      c[ax] += dir;
      if (c[ax] < 0 || c[ax] >= dims[ax]) {
        if (!periodic || dims[ax] <= 2)
          continue;
        c[ax] = (c[ax] + dims[ax]) % dims[ax];
      }
      int peer = (c[0] * dims[1] + c[1]) * dims[2] + c[2];
      if (peer != rank)
        nbr[nn++] = peer;
    }
  }
  first[3] = nn;
  /* the exchange's rounds: the three dimensions apart (-s), or all neighbours at once */
  int rounds = by_axis ? 3 : 1, bound[4] = {0, by_axis ? first[1] : nn, first[2], nn};
  char *sendbuf = ALLOC((size_t)bytes * 6 + 1);
  char *recvbuf = ALLOC((size_t)bytes * 6 + 1);
  MPI_Request req[12];
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int it = 0; it < iters; it++) {
    for (int round = 0; round < rounds; round++) {
      int lo = bound[round], m = bound[round + 1] - lo;
      for (int k = 0; k < m; k++)
        MPI_Irecv(recvbuf + (lo + k) * bytes, (int)bytes, MPI_BYTE, nbr[lo + k], 7,
                  MPI_COMM_WORLD, &req[k]);
      for (int k = 0; k < m; k++)
        MPI_Isend(sendbuf + (lo + k) * bytes, (int)bytes, MPI_BYTE, nbr[lo + k], 7,
                  MPI_COMM_WORLD, &req[m + k]);
      MPI_Waitall(2 * m, req, MPI_STATUSES_IGNORE);
    }
    sim_compute(flops);
  }
  sim_report(rank, t0);
  FREE(sendbuf);
  FREE(recvbuf);
  MPI_Finalize();
  return 0;
}
