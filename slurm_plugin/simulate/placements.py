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
from mapper.objectives.congestion import UplinkLoad, uplink_loads
from mapper.objectives.qap import evaluate
from mapper.solve.aimed import aim_at_congestion_and_phases

from ..machine.distribution import DEFAULT, Distribution, default_placements, dist_label
from ..machine.layout import Layout
from ..modes.graph_job import make_plan, phase_capacities
from ..slurm.topology import SwitchTree


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
               distribution: Distribution = DEFAULT, unguarded: bool = False,
               objectives: Sequence[str] = ("congestion",),
               tree: SwitchTree | None = None,
               uplink_oversubscription: Sequence[float] = ()) -> list[Placement]:
    """Block (the job's default) first, then cyclic, scrambled, one per algorithm and
    objective.

    ``objectives`` (``[solver] objective`` values, the product's own first) give one
    row per algorithm each: ``rankmap ALG`` for the first, ``rankmap ALG [OBJ]`` for
    the others, what :func:`make_plan` applies with it, so that two objectives are
    compared in one run.

    ``unguarded`` adds, per algorithm and objective, the solver's own result before
    the comparison with Slurm's default (``ALG unguarded``, ``ALG unguarded [OBJ]``):
    under ``J`` the algorithm's result; under ``congestion`` that result brought under
    the default's link caps, and, for a profile with phases that the rule would refuse,
    under its phases' caps too (:func:`mapper.solve.aimed.aim_at_congestion_and_phases`:
    repaired, else the default polished under them), which the objective does before
    any comparison.
    What the product would apply without its never-worse rule, to measure that rule.

    ``tree`` and ``uplink_oversubscription`` reach :func:`make_plan` as the prolog
    gives them (LinkSpeed weights; link capacities for profiles with phases)."""
    defaults = default_placements(layout, distribution)
    default_name = dist_label(distribution)
    base = defaults[default_name]
    named: list[tuple[str, np.ndarray, str]] = [
        (name, m, "Slurm's default" if name == default_name else "Slurm")
        for name, m in defaults.items()]
    rng = np.random.default_rng(seed)
    named.append(("scrambled", base[rng.permutation(layout.n)], f"random, seed {seed}"))
    levels = list(layout.network_levels)
    for alg in algorithms:
        raw = map_processes(graph, layout.hierarchy, alg, seed, time_limit) if unguarded \
            else None
        for k, objective in enumerate(objectives):
            tag = "" if k == 0 else f" [{objective}]"
            plan = make_plan(layout, graph, algorithm=alg, time_limit=time_limit, seed=seed,
                             files=(), distribution=distribution, objective=objective,
                             tree=tree, uplink_oversubscription=uplink_oversubscription)
            if plan.applied:
                assert plan.result is not None
                named.append((f"rankmap {alg}{tag}",
                              np.asarray(plan.result.mapping, dtype=np.int64),
                              f"applied ({plan.result.origin})"))
            else:
                why = plan.fallback_reason or plan.summary
                named.append((f"rankmap {alg}{tag}", base, why))
            if raw is None:
                continue
            own, note = raw, "the solver's result, not compared with Slurm's default"
            if objective == "congestion" and levels:
                capacities, scenarios = phase_capacities(graph, layout, tree, True,
                                                         uplink_oversubscription)
                own, _ = aim_at_congestion_and_phases(graph, layout.hierarchy, raw, base,
                                                      levels, seed, time_limit,
                                                      link_capacities=capacities,
                                                      capacity_scenarios=scenarios)
                note = f"the solver's result, not compared with Slurm's default; {own.notes[-1]}"
            named.append((f"{alg} unguarded{tag}", np.asarray(own.mapping, dtype=np.int64),
                          note))
    return [Placement(name, m, evaluate(graph, layout.hierarchy, m).objective, note,
                      uplink_loads(graph, layout.hierarchy, m, levels))
            for name, m, note in named]


def hosts_per_rank(layout: Layout, mapping: np.ndarray) -> list[str]:
    """The node of every rank, in rank order (line r of a hostfile)."""
    hosts = np.array([s.host for s in layout.slots], dtype=object)
    return hosts[np.asarray(mapping)].tolist()
