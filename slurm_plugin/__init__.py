"""Slurm integration of rankmap: scheduler readers, the job's machine, modes, outputs,
the job lifecycle and the ``rankmap`` command, one package per layer
(docs/architecture.md).  ``userlib`` holds the program-side libraries (librankmap,
rankmap_mpi for mpi4py)."""
