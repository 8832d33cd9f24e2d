"""``reordered_comm()``: librankmap's ``rankmap_comm`` for mpi4py programs.

::

    from slurm_plugin.rankmap_mpi import reordered_comm
    comm = reordered_comm()          # instead of MPI.COMM_WORLD

The process the launcher started as rank r gets rank ``reorder[r]`` from the file
named by ``RANKMAP_REORDER`` (:mod:`mapper.reorder`), by ``Split(0, key)``.  Without
the variable: ``base.Dup()``.  An unreadable file, one that is not a permutation of
the communicator's size, or different files on different processes: ``base.Dup()``
and one warning line on stderr (from the lowest rank that found the problem).
Collective over ``base``.  mpi4py is imported only when no ``base`` is given.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mapper.reorder import ReorderError, parse_reorder

ENV = "RANKMAP_REORDER"


def reordered_comm(base: Any = None, environ: Mapping[str, str] | None = None) -> Any:
    """A communicator in which every process has the rank rankmap chose for it."""
    if base is None:
        from mpi4py import MPI  # optional dependency, only for real programs
        base = MPI.COMM_WORLD
    env = os.environ if environ is None else environ
    path = env.get(ENV, "")
    if not path:
        return base.Dup()
    rank, size = base.Get_rank(), base.Get_size()
    problem, digest, key = None, "", rank
    try:
        reorder = parse_reorder(Path(path).read_text(), size, path)
        key = int(reorder[rank])
        digest = hashlib.sha256(reorder.tobytes()).hexdigest()
    except OSError as exc:
        problem = f"{path}: cannot read: {exc.strerror or exc}"
    except ReorderError as exc:
        problem = str(exc)
    # every process must take the same branch: share what each one found
    found = base.allgather((problem, digest))
    failed = [r for r, (p, _) in enumerate(found) if p]
    if failed:
        if rank == failed[0]:
            _warn(str(problem))
        return base.Dup()
    if len({d for _, d in found}) > 1:
        if rank == 0:
            _warn(f"{path}: the processes read different files")
        return base.Dup()
    return base.Split(0, key)


def _warn(message: str) -> None:
    print(f"rankmap: warning: {message}; keeping the launcher's rank order", file=sys.stderr,
          flush=True)
