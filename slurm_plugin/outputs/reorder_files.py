"""The job's rank reordering: rankmap's mapping for launchers that place the ranks.

``srun`` starts rank r where Slurm's ``--distribution`` puts it.  The placement rankmap chose is
still honoured when the application renumbers its ranks with librankmap's
``rankmap_comm`` (or :func:`slurm_plugin.userlib.rankmap_mpi.reordered_comm`): the process that
the launcher started as rank r takes rank ``reorder[r]``, so that new rank k runs on the
PE the mapping gave rank k (:mod:`mapper.io.reorder`, the seed's rank reordering method:
Sudhakar, Adhikari, Ramesh, ICACC 2015, §III.C).

The prolog is not told the job's ``--distribution`` and a job's steps may each use
another, so the worker writes one reorder file per distribution a launcher may use —
nodes ``block`` or ``cyclic`` × sockets ``cyclic`` (Slurm's default; ``fcyclic`` starts
every task on the same socket) or ``block``: ``reorder.block``, ``reorder.cyclic``,
``reorder.block-block``, ``reorder.cyclic-block`` — the seed's Dist_graph file
(``dist_graph``: the plain adjacency, numbered by new rank) and its group graph
(``dist_graph.groups``, numbered by new rank: within every group of the machine tree,
the groups one level down joined by the heaviest edge between them, with weights;
:func:`mapper.io.reorder.group_tree`), which librankmap's ``rankmap_dist_graph`` (and
:func:`slurm_plugin.userlib.rankmap_mpi.dist_graph_comm`) hand to
``MPI_Dist_graph_create(..., reorder=1)`` as the seed's Fig. 6 does; the TaskProlog
exports its path as ``RANKMAP_DIST_GRAPH`` to every task of a job whose placement was
applied.  The TaskProlog, which sees the step's own ``SLURM_DISTRIBUTION``, exports the
matching reorder file as ``RANKMAP_REORDER``
(:func:`slurm_plugin.common.reorder_steps.reorder_exports`):

* a step of exactly the job's task count (``srun`` launching the ranks): the file of its
  ``SLURM_DISTRIBUTION`` (unset: Slurm's ``block:cyclic``); ``plane`` and ``arbitrary``
  get none (plane sizes vary; ``arbitrary`` follows ``SLURM_HOSTFILE``, which with
  ``export_slurm_hostfile`` is rankmap's own placement);
* any other task (the batch script, Open MPI's orted step with one task per node):
  ``reorder.block``, the placement ``mpirun`` would make without a rankfile (nodes in
  node-list order, ranks round-robin over a node's sockets: Slurm's block:cyclic;
  :mod:`slurm_plugin.machine.distribution`).  A batch script that unsets the rankfile
  variables runs mpirun without the rankfile; the TaskProlog exports those variables
  in the batch step only, so mpirun's daemons start without them too.

The TaskProlog runs once per task: the part it calls lives in
:mod:`slurm_plugin.common.reorder_steps` (standard library only); the solver stack
(numpy) is imported by the functions the worker calls.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..common.job_conventions import DIST_GRAPH_FILE, GROUP_GRAPH_FILE
from ..common.reorder_steps import REORDER_FILES, socket_method

if TYPE_CHECKING:  # numpy only when the worker calls in
    import numpy as np

    from mapper import CommGraph

    from ..machine.distribution import Distribution
    from ..machine.layout import Layout

def reorder_files(layout: Layout, mapping: np.ndarray, graph: CommGraph | None,
                  distributions: Sequence[Distribution] | None = None) -> dict[str, str]:
    """The texts of the job's reorder files (one per distribution, by file name) and,
    with a communication graph, of its Dist_graph and group graph files.

    For each distribution: ``reorder[r]`` = the new rank of the process Slurm starts as
    rank r, i.e. ``mapping⁻¹ ∘ slurm_placement(layout, dist)``
    (:func:`mapper.io.reorder.rank_reorder`).  ``distributions`` default to the four of
    :data:`REORDER_FILES` (``plane`` and ``arbitrary`` have no file).  ``graph`` is the
    profile in the mapping's numbering, so its Dist_graph lines are by new rank; the
    group graph's groups are those of ``layout.hierarchy`` (switches, nodes, sockets)
    holding the ranks where ``mapping`` puts them.

    Complexity: O(P log P) per distribution for P ranks (sorts), O(P + E log E) for
    the Dist_graph text, O(L (P + E) + (P + E) log(P + E)) for the group graph's L
    levels plus O(k²) per group of k children; whole-array operations throughout
    (2^20 ranks of a 3D stencil: a few seconds).
    """
    from mapper.io.reorder import (
        comm_graph_dist_graph_text,
        format_reorder,
        group_graph_text,
        group_tree,
        rank_reorder,
    )

    from ..machine.distribution import Distribution, slurm_placement

    if distributions is None:
        distributions = [Distribution(nodes, sockets) for nodes, sockets in REORDER_FILES]
    out = {}
    for dist in distributions:
        name = REORDER_FILES.get((dist.nodes, socket_method(dist.sockets)))
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
    O_NOFOLLOW, mode 0600 writes as the launcher files:
    :func:`slurm_plugin.common.files.write_files`)."""
    from ..common.files import write_files

    write_files(job_dir, reorder_files(layout, mapping, graph))
