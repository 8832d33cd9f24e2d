/* librankmap: rankmap's placement for jobs whose launcher places the ranks itself.
 *
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

#ifdef __cplusplus
}
#endif

#endif
