"""Mesh mode (issue 10): partition an application's mesh onto the job's PEs.

Scheduler independent (never imports ``slurm_plugin``).  One module per job:

* :mod:`.mesh` — :class:`Mesh` (graph + work w(v) + communication size c(v)).
* :mod:`.metrics` — edge cut, volume, CompCost/CommCost/ElapseTime, SumElTime,
  MaxElTime, imbalance, the quotient graph and its J; :func:`evaluate_partition`.
* :mod:`.architecture` — the architecture graph: PE speeds, link costs e*, QPL.
* :mod:`.result` — the :class:`Partition` every partitioner returns.
* :mod:`.method_names` — the partitioning method and backend names.
* :mod:`.balance` — a METIS/KaHIP split (:mod:`mapper.partitioners`) and its
  balance repair.
* :mod:`.rb`, :mod:`.rms` — recursive bisection and hierarchical multisection.
* :mod:`.archaware` — VolS, VolNS, ElTS, ElTNS (Moulitsas & Karypis).

Mesh files (METIS with vertex weights/sizes, other graph formats plus a ``w [c]``
weights file) are read and written by :mod:`mapper.io.mesh_file`.

This package re-exports the names of :mod:`.mesh` and :mod:`.metrics`; import the other
modules directly.
"""

from .mesh import Mesh, MeshError, mesh_from_graph
from .metrics import (
    PartitionMetrics,
    check_partition,
    comm_cost,
    comp_cost,
    edge_cut,
    elapse_time,
    evaluate_partition,
    imbalance,
    max_el_time,
    max_volume,
    part_volumes,
    part_weights,
    quotient_graph,
    quotient_objective,
    sum_el_time,
    total_volume,
)

__all__ = [
    "Mesh", "MeshError", "PartitionMetrics", "check_partition", "comm_cost", "comp_cost",
    "edge_cut", "elapse_time", "evaluate_partition", "imbalance", "max_el_time", "max_volume",
    "mesh_from_graph", "part_volumes", "part_weights", "quotient_graph",
    "quotient_objective", "sum_el_time", "total_volume",
]
