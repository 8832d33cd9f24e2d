"""Slurm integration of rankmap: scheduler readers, the job's machine, modes, outputs,
the job lifecycle and the ``rankmap`` command, one package per layer
(docs/architecture.md).  ``rankmap_mpi`` is the program-side helper for mpi4py."""
