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
from mapper.search import congested

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
               unguarded: bool = False, aimed: bool = False) -> list[Placement]:
    """Block (the job's default) first, then cyclic, scrambled, one per algorithm.

    ``unguarded`` adds, per algorithm, the solver's own result without the comparison
    with Slurm's default (no baseline, no congestion check): what the product would
    have applied without its never-worse rule, to measure that rule.

    ``aimed`` adds, per algorithm, two rows of the opt-in objective ``congestion``
    (:mod:`mapper.search.congested`: J under caps on every network level's busiest
    link, the caps being Slurm's default's): ``ALG aimed``, what the product would
    apply with it (``map_processes(..., objective="congestion")`` against the
    default), and ``ALG aimed unguarded``, the solver's own result repaired under the
    caps and nothing else (the default's row when the repair fails)."""
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
        raw = None
        if unguarded or aimed:
            raw = map_processes(graph, layout.hierarchy, alg, seed, time_limit)
        if unguarded:
            named.append((f"{alg} unguarded", np.asarray(raw.mapping, dtype=np.int64),
                          "the solver's result, not compared with Slurm's default"))
        if aimed:
            named += _aimed_rows(layout, graph, alg, raw, base, seed, time_limit)
    levels = layout.network_levels
    return [Placement(name, m, evaluate(graph, layout.hierarchy, m).objective, note,
                      uplink_loads(graph, layout.hierarchy, m, levels))
            for name, m, note in named]


def _aimed_rows(layout: Layout, graph: CommGraph, alg: str, raw, base: np.ndarray,
                seed: int, time_limit: float) -> list[tuple[str, np.ndarray, str]]:
    """The two rows of ``aimed`` (see :func:`placements`)."""
    levels = list(layout.network_levels)
    res = map_processes(graph, layout.hierarchy, alg, seed, time_limit, baseline=base,
                        congestion_levels=levels, objective="congestion")
    aim = [n for n in res.notes if n.startswith("aimed")]
    rows = [(f"{alg} aimed", np.asarray(res.mapping, dtype=np.int64),
             f"applied with objective congestion ({res.origin}); {'; '.join(aim)}")]
    pe = np.array(raw.mapping, dtype=np.int64)
    caps = congested.caps_of(graph, layout.hierarchy, base, levels)
    st = congested.constrained_search(graph, layout.hierarchy, pe, levels, caps, seed,
                                      time_limit)
    if st.feasible:
        rows.append((f"{alg} aimed unguarded", pe,
                     f"the solver's result repaired under the default's link caps "
                     f"({st.moves} swaps, {st.sweeps} sweeps)"))
    else:
        rows.append((f"{alg} aimed unguarded", base,
                     f"repair failed (violation {st.violation_before:.3g} -> "
                     f"{st.violation:.3g}): the default"))
    return rows


def hosts_per_rank(layout: Layout, mapping: np.ndarray) -> list[str]:
    """The node of every rank, in rank order (line r of a hostfile)."""
    hosts = np.array([s.host for s in layout.slots], dtype=object)
    return hosts[np.asarray(mapping)].tolist()
