/* librankmap: rankmap's placement for jobs whose launcher places the ranks itself.
 *
 * rankmap_comm: the reordered communicator.
 * When srun (or mpirun without rankmap's rankfile) starts the processes, rank r runs
 * where the launcher put it.  rankmap's prolog then writes a reorder file (line r: the
 * new rank of the process the launcher started as rank r) and exports its path as
 * RANKMAP_REORDER.  rankmap_comm() gives a communicator in which every process has its
 * new rank, so that new rank k runs on the core rankmap chose for rank k.  Use it
 * instead of base (usually MPI_COMM_WORLD) for the application's communication.
 *
 * RANKMAP_REORDER unset or empty: a duplicate of base, silently.  A file that cannot be
 * read, is not a permutation of 0..size-1 with one line per process, or differs between
 * processes: a duplicate of base and one warning line on stderr naming the file and
 * line.  Collective over base.  Returns an MPI error code (MPI_SUCCESS).
 */
#ifndef RANKMAP_H
#define RANKMAP_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RANKMAP_ENV "RANKMAP_REORDER"

int rankmap_comm(MPI_Comm base, MPI_Comm *reordered);

/* rankmap_dist_graph: Sudhakar et al.'s distributed-graph communicator (ICACC 2015,
 * Figs. 6 and 7).  When rankmap's placement is applied, the job directory holds
 * dist_graph.groups and the TaskProlog exports its path as RANKMAP_DIST_GRAPH: within
 * every group of the machine tree (switch, node, socket), the groups one level down
 * joined by the heaviest edge of the job's profile between them, with its weight.
 * Format: '#' comments and blank lines ignored; a line holding n; then one line per
 * process i (0..n-1): its degree d, then d pairs "neighbour weight" (weights are
 * integers 0..INT_MAX; every edge on both its ends with the same weight).  Processes
 * are numbered by new rank, so pass the communicator rankmap_comm() returned (or
 * MPI_COMM_WORLD when mpirun placed the ranks with rankmap's rankfile).
 *
 * The process of rank 0 in comm reads the file and checks it (n == the size of comm,
 * one line per process of 1 + 2d numbers, neighbours in 0..n-1 and not the process,
 * every edge listed on both ends once with one weight), then every process calls
 * MPI_Dist_graph_create(comm, ..., weights, MPI_INFO_NULL, reorder = 1, graph_comm),
 * rank 0 giving the whole graph: the MPI may renumber the processes to fit the graph to
 * the machine (ask graph_comm for your rank).  Collective over comm (an
 * intracommunicator).
 *
 * Returns MPI_SUCCESS with the new communicator in *graph_comm; otherwise *graph_comm is
 * MPI_COMM_NULL (use comm, as the seed does) and the code says why, the same on every
 * process for these: RANKMAP_ERR_UNSET when RANKMAP_DIST_GRAPH is unset or empty on
 * rank 0 (silently), RANKMAP_ERR_FILE when the file cannot be read or is not such a graph
 * (one warning line on stderr, from rank 0, naming the file and line), RANKMAP_ERR_ARG
 * when some process passed graph_comm == NULL, MPI_ERR_COMM for an intercommunicator;
 * else the error of an MPI call.  The RANKMAP_ERR_ codes are negative: no MPI error code
 * is. */
#define RANKMAP_DIST_GRAPH_ENV "RANKMAP_DIST_GRAPH"
#define RANKMAP_ERR_UNSET (-1)
#define RANKMAP_ERR_FILE (-2)
#define RANKMAP_ERR_ARG (-3)

int rankmap_dist_graph(MPI_Comm comm, MPI_Comm *graph_comm);

#ifdef __cplusplus
}
#endif

#endif
