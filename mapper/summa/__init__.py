"""Topology-aware arrangement of a heterogeneous SUMMA's column-based data partition.

* :mod:`.tiling` — Beaumont et al.'s column-based partition from relative speeds
  (:class:`ColumnLayout`, an integer tiling of the N x N matrix);
* :mod:`.cost` — Malik et al.'s cost model (cost_A, cost_B, norm) on a two-level or
  hierarchical grouping of the ranks;
* :mod:`.arrange` — the group-permutation heuristic and exhaustive search
  (:class:`Arrangement`).

Scheduler-independent: the ``rankmap summa`` command (slurm_plugin.commands.summa_cli) reads
speeds and groups from files and writes the arrangement file (formats:
:mod:`mapper.io.summa_files`).
"""
