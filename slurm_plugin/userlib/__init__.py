"""Libraries for the user's own programs: librankmap (C, MPI) and rankmap_mpi (mpi4py),
which renumber a job's ranks by the reorder files rankmap wrote."""
