"""The job's rank reordering: rankmap's mapping for launchers that place the ranks.

``srun`` starts rank r where Slurm's ``--distribution`` puts it.  The placement rankmap chose is
still honoured when the application renumbers its ranks with librankmap's
``rankmap_comm`` (or :func:`slurm_plugin.rankmap_mpi.reordered_comm`): the process that
the launcher started as rank r takes rank ``reorder[r]``, so that new rank k runs on the
PE the mapping gave rank k (:mod:`mapper.reorder`, the seed's rank reordering method:
Sudhakar, Adhikari, Ramesh, ICACC 2015, §III.C).

The prolog is not told the job's ``--distribution`` and a job's steps may each use
another, so the worker writes one reorder file per distribution a launcher may use —
nodes ``block`` or ``cyclic`` × sockets ``cyclic`` (Slurm's default; ``fcyclic`` starts
every task on the same socket) or ``block``: ``reorder.block``, ``reorder.cyclic``,
``reorder.block-block``, ``reorder.cyclic-block`` — the seed's Dist_graph file
(``dist_graph``: the plain adjacency, numbered by new rank) and its group graph
(``dist_graph.groups``, numbered by new rank: within every group of the machine tree,
the groups one level down joined by the heaviest edge between them, with weights;
:func:`mapper.reorder.group_tree`), which librankmap's ``rankmap_dist_graph`` (and
:func:`slurm_plugin.rankmap_mpi.dist_graph_comm`) hand to
``MPI_Dist_graph_create(..., reorder=1)`` as the seed's Fig. 6 does; the TaskProlog
exports its path as ``RANKMAP_DIST_GRAPH`` to every task of a job whose placement was
applied.  The TaskProlog, which sees the step's own ``SLURM_DISTRIBUTION``, exports the
matching reorder file as ``RANKMAP_REORDER`` (:func:`reorder_exports`):

* a step of exactly the job's task count (``srun`` launching the ranks): the file of its
  ``SLURM_DISTRIBUTION`` (unset: Slurm's ``block:cyclic``); ``plane`` and ``arbitrary``
  get none (plane sizes vary; ``arbitrary`` follows ``SLURM_HOSTFILE``, which with
  ``export_slurm_hostfile`` is rankmap's own placement);
* any other task (the batch script, Open MPI's orted step with one task per node):
  ``reorder.block``, the placement ``mpirun`` would make without a rankfile (nodes in
  node-list order, ranks round-robin over a node's sockets: Slurm's block:cyclic;
  :mod:`slurm_plugin.distribution`).  A batch script that unsets the rankfile
  variables runs mpirun without the rankfile; the TaskProlog exports those variables
  in the batch step only, so mpirun's daemons start without them too.

The TaskProlog runs once per task: the part it calls imports only the standard
library; the solver stack (numpy) is imported by the functions the worker calls.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .names import DIST_GRAPH_FILE, GROUP_GRAPH_FILE, REORDER_FILE_BY_METHOD
from .names import REORDER_FILES as NAMED_REORDER_FILES

if TYPE_CHECKING:  # the TaskProlog imports this module: no numpy at import time
    import numpy as np

    from mapper import CommGraph

    from .distribution import Distribution
    from .layout import Layout

#: the variable librankmap and rankmap_mpi read (deploy/librankmap/rankmap.h)
ENV = "RANKMAP_REORDER"
#: the group graph's variable (rankmap_dist_graph, rankmap_mpi.dist_graph_comm)
DIST_GRAPH_ENV = "RANKMAP_DIST_GRAPH"

#: (node method, socket method) → reorder file name, one per placement a launcher makes
REORDER_FILES = REORDER_FILE_BY_METHOD
#: every file the worker writes (FILE_NAMES roles = file names)
ALL_FILES = NAMED_REORDER_FILES
#: the file for tasks that do not say how they were placed: mpirun's default mapping
MPIRUN_FILE = REORDER_FILES[("block", "cyclic")]


def reorder_files(layout: Layout, mapping: np.ndarray, graph: CommGraph | None,
                  distributions: Sequence[Distribution] | None = None) -> dict[str, str]:
    """The texts of the job's reorder files (one per distribution, by file name) and,
    with a communication graph, of its Dist_graph and group graph files.

    For each distribution: ``reorder[r]`` = the new rank of the process Slurm starts as
    rank r, i.e. ``mapping⁻¹ ∘ slurm_placement(layout, dist)``
    (:func:`mapper.reorder.rank_reorder`).  ``distributions`` default to the four of
    :data:`REORDER_FILES` (``plane`` and ``arbitrary`` have no file).  ``graph`` is the
    profile in the mapping's numbering, so its Dist_graph lines are by new rank; the
    group graph's groups are those of ``layout.hierarchy`` (switches, nodes, sockets)
    holding the ranks where ``mapping`` puts them.

    Complexity: O(P log P) per distribution for P ranks (sorts), O(P + E) for the
    Dist_graph text, O(L (P + E) log E) for the group graph's L levels plus O(k²) per
    group of k children.
    """
    from mapper.reorder import (
        comm_graph_dist_graph_text,
        format_reorder,
        group_graph_text,
        group_tree,
        rank_reorder,
    )

    from .distribution import Distribution, slurm_placement

    if distributions is None:
        distributions = [Distribution(nodes, sockets) for nodes, sockets in REORDER_FILES]
    out = {}
    for dist in distributions:
        name = REORDER_FILES.get((dist.nodes, _socket_method(dist.sockets)))
        if name is None:
            raise ValueError(f"no reorder file for the {dist.name} distribution")
        out[name] = format_reorder(rank_reorder(mapping, slurm_placement(layout, dist)))
    if graph is not None:
        out[DIST_GRAPH_FILE] = comm_graph_dist_graph_text(graph)
        out[GROUP_GRAPH_FILE] = group_graph_text(
            graph.n, *group_tree(graph, layout.hierarchy, mapping))
    return out


def write_reorder_files(job_dir: str | os.PathLike, layout: Layout, mapping: np.ndarray,
                        graph: CommGraph | None) -> None:
    """Write :func:`reorder_files` into the job directory (the worker's edge; the same
    O_NOFOLLOW, mode 0600 writes as the launcher files: :func:`slurm_plugin.files.write_files`)."""
    from .files import write_files

    write_files(job_dir, reorder_files(layout, mapping, graph))


#: SLURM_STEP_ID of the steps that run the user's script: the batch step and salloc's
#: interactive step (SLURM_BATCH_SCRIPT, SLURM_INTERACTIVE_STEP), which Slurm 26.05
#: prints as signed integers and older releases do not set at all (unsigned forms too)
SCRIPT_STEP_IDS = frozenset({"", "-5", "-6", "4294967291", "4294967290", "batch",
                             "interactive"})


def is_script_step(env: Mapping[str, str]) -> bool:
    """True in the task that runs the job's script (where mpirun runs), not in an
    ``srun`` step.  Standard library only."""
    return env.get("SLURM_STEP_ID", "").strip() in SCRIPT_STEP_IDS


def step_reorder_file(env: Mapping[str, str], n: int | None) -> str | None:
    """The reorder file (name) for a task with environment ``env`` of a job of ``n``
    ranks, or None when none fits; see the module docstring for the rule."""
    step_tasks = env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS")
    if is_script_step(env) or n is None or step_tasks != str(n):
        return MPIRUN_FILE
    method = distribution_methods(env.get("SLURM_DISTRIBUTION"))
    return REORDER_FILES.get(method) if method else None


def reorder_exports(job_dir: Path, env: Mapping[str, str], n: object) -> list[str]:
    """The TaskProlog's lines for this task: ``export RANKMAP_REORDER=…``, or ``unset
    RANKMAP_REORDER`` when no file fits or it is missing (a step's tasks inherit the
    batch script's value, which is mpirun's file: wrong for, e.g., ``arbitrary``); then
    ``export RANKMAP_DIST_GRAPH=…`` when the group graph file is there (numbered by new
    rank, it fits every step).  Call it only when rankmap's placement was applied.
    Standard library only."""
    name = step_reorder_file(env, n if isinstance(n, int) and not isinstance(n, bool)
                             else None)
    if name is None or not (job_dir / name).is_file():
        lines = [f"unset {ENV}"]
    else:
        lines = [f"export {ENV}={job_dir / name}"]
    if (job_dir / GROUP_GRAPH_FILE).is_file():
        lines.append(f"export {DIST_GRAPH_ENV}={job_dir / GROUP_GRAPH_FILE}")
    return lines


_DIST = re.compile(r"^\s*(?P<nodes>[^:,\s]*)(?::(?P<sockets>[^:,\s]*))?", re.I)


def distribution_methods(text: str | None) -> tuple[str, str] | None:
    """(node method, socket method) of a ``SLURM_DISTRIBUTION`` value as Slurm places
    the ranks — ``None``/empty/``*`` → Slurm's ``block:cyclic``; ``fcyclic`` and ``*``
    sockets → ``cyclic``; None for ``plane``, ``arbitrary`` and what is not Slurm's
    syntax.  Agrees with :func:`slurm_plugin.distribution.parse_distribution` (which
    imports numpy; this runs once per task)."""
    m = _DIST.match(text or "")
    if not m:
        return None
    nodes = (m.group("nodes") or "*").lower()
    nodes = "block" if nodes == "*" else nodes
    sockets = _socket_method((m.group("sockets") or "*").lower())
    if nodes not in ("block", "cyclic") or sockets not in ("block", "cyclic"):
        return None
    return nodes, sockets


def _socket_method(sockets: str) -> str:
    # fcyclic spreads one task's CPUs over sockets; the socket each task starts on, the
    # one a slot names, is cyclic's (slurm_plugin.distribution)
    return "cyclic" if sockets in ("*", "fcyclic") else sockets
