"""The placements ``rankmap simulate`` compares, and their J.

Slurm's block and cyclic (:func:`slurm_plugin.machine.distribution.default_placements`), a
scrambled placement (a seeded random permutation of the block placement's slots) and,
per algorithm, the placement rankmap would *apply*:
:func:`slurm_plugin.modes.graph_job.make_plan`'s result, which is Slurm's default itself
when the solver found nothing better (``plan.kept_default``) or could not be used (a
fallback).  Pure: no I/O.

Complexity: the solver's, plus O(P log P) for the Slurm placements and O(m) per J.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mapper import CommGraph, map_processes
from mapper.congestion import UplinkLoad, uplink_loads
from mapper.objective import evaluate

from ..machine.distribution import DEFAULT, Distribution, default_placements, dist_label
from ..machine.layout import Layout
from ..modes.graph_job import make_plan


@dataclass(frozen=True)
class Placement:
    """One placement: rank → PE, its J, the heaviest link of each network level
    (:attr:`Layout.network_levels`) and what it is."""

    name: str
    mapping: np.ndarray
    j: float
    note: str = ""
    uplinks: tuple[UplinkLoad, ...] = ()


def placements(layout: Layout, graph: CommGraph, algorithms: Sequence[str], *,
               time_limit: float, seed: int = 0,
               distribution: Distribution = DEFAULT,
               unguarded: bool = False) -> list[Placement]:
    """Block (the job's default) first, then cyclic, scrambled, one per algorithm.

    ``unguarded`` adds, per algorithm, the solver's own result without the comparison
    with Slurm's default (no baseline, no congestion check): what the product would
    have applied without its never-worse rule, to measure that rule."""
    defaults = default_placements(layout, distribution)
    default_name = dist_label(distribution)
    base = defaults[default_name]
    named: list[tuple[str, np.ndarray, str]] = [
        (name, m, "Slurm's default" if name == default_name else "Slurm")
        for name, m in defaults.items()]
    rng = np.random.default_rng(seed)
    named.append(("scrambled", base[rng.permutation(layout.n)], f"random, seed {seed}"))
    for alg in algorithms:
        plan = make_plan(layout, graph, algorithm=alg, time_limit=time_limit, seed=seed,
                         files=(), distribution=distribution)
        if plan.applied:
            assert plan.result is not None
            named.append((f"rankmap {alg}", np.asarray(plan.result.mapping, dtype=np.int64),
                          f"applied ({plan.result.origin})"))
        else:
            why = plan.fallback_reason or plan.summary
            named.append((f"rankmap {alg}", base, why))
        if unguarded:
            raw = map_processes(graph, layout.hierarchy, alg, seed, time_limit)
            named.append((f"{alg} unguarded", np.asarray(raw.mapping, dtype=np.int64),
                          "the solver's result, not compared with Slurm's default"))
    levels = layout.network_levels
    return [Placement(name, m, evaluate(graph, layout.hierarchy, m).objective, note,
                      uplink_loads(graph, layout.hierarchy, m, levels))
            for name, m, note in named]


def hosts_per_rank(layout: Layout, mapping: np.ndarray) -> list[str]:
    """The node of every rank, in rank order (line r of a hostfile)."""
    hosts = np.array([s.host for s in layout.slots], dtype=object)
    return hosts[np.asarray(mapping)].tolist()
