"""``reordered_comm()`` and ``dist_graph_comm()``: librankmap's ``rankmap_comm`` and
``rankmap_dist_graph`` for mpi4py programs.

::

    from slurm_plugin.userlib.rankmap_mpi import dist_graph_comm, reordered_comm
    comm = reordered_comm()          # instead of MPI.COMM_WORLD
    graph = dist_graph_comm(comm)    # optional: the group graph's topology, or None

The process the launcher started as rank r gets rank ``reorder[r]`` from the file
named by ``RANKMAP_REORDER`` (:mod:`mapper.io.reorder`), by ``Split(0, key)``.  Without
the variable: ``base.Dup()``.  An unreadable file, one that is not a permutation of
the communicator's size, or different files on different processes: ``base.Dup()``
and one warning line on stderr (from the lowest rank that found the problem).
Collective over ``base``.  mpi4py is imported only when no ``base`` is given.

``dist_graph_comm(comm)``: the distributed-graph communicator of the group graph file
named by ``RANKMAP_DIST_GRAPH`` (``dist_graph.groups``, numbered by new rank:
:func:`mapper.io.reorder.group_graph_text`), made as Sudhakar et al.'s Fig. 6 makes it: the
process of rank 0 reads and checks the file (:func:`mapper.io.reorder.parse_group_graph`)
and gives the whole weighted graph to ``comm.Create_dist_graph(..., reorder=True)``, the
others no edges; the MPI may renumber the processes.  ``None`` on every process when
rank 0 has no variable (silently) or a file that does not fit (one warning line on
stderr from rank 0).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mapper.io.reorder import ReorderError, parse_group_graph, parse_reorder

ENV = "RANKMAP_REORDER"
DIST_GRAPH_ENV = "RANKMAP_DIST_GRAPH"


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


def dist_graph_comm(comm: Any = None, environ: Mapping[str, str] | None = None) -> Any:
    """The group graph's distributed-graph communicator over ``comm`` (default
    ``MPI.COMM_WORLD``; pass :func:`reordered_comm`'s), or None; see the module
    docstring."""
    if comm is None:
        from mpi4py import MPI  # optional dependency, only for real programs
        comm = MPI.COMM_WORLD
    env = os.environ if environ is None else environ
    rank, size = comm.Get_rank(), comm.Get_size()
    state, problem, graph = "ok", None, None
    if rank == 0:
        path = env.get(DIST_GRAPH_ENV, "")
        if not path:
            state = "unset"
        else:
            try:
                graph = parse_group_graph(Path(path).read_text(), size, path)
            except OSError as exc:
                problem = f"{path}: cannot read: {exc.strerror or exc}"
            except UnicodeDecodeError:
                problem = f"{path}: not UTF-8 text"
            except ReorderError as exc:
                problem = str(exc)
            if problem:
                state = "bad"
    state = comm.bcast(state, root=0)  # every process takes rank 0's branch
    if state != "ok":
        if problem:
            _warn(problem, "no distributed-graph communicator")
        return None
    if graph is None:
        return comm.Create_dist_graph([], [], [], _weights_empty(), reorder=True)
    degrees, neighbours, weights = graph
    return comm.Create_dist_graph(list(range(size)), degrees.tolist(), neighbours.tolist(),
                                  weights.tolist() if len(weights) else _weights_empty(),
                                  reorder=True)


def _weights_empty() -> Any:
    """MPI_WEIGHTS_EMPTY, for a process that gives no edges of a weighted graph: mpi4py's
    constant when mpi4py is loaded (a real communicator), else an empty list."""
    mpi = sys.modules.get("mpi4py.MPI")
    return mpi.WEIGHTS_EMPTY if mpi is not None else []


def _warn(message: str, consequence: str = "keeping the launcher's rank order") -> None:
    print(f"rankmap: warning: {message}; {consequence}", file=sys.stderr, flush=True)
