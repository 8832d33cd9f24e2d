"""The never-worse rule on profiles with phases (issue 33 item 3): a candidate whose
phase time (model "runs", one level at a time) rises above the default's is refused.
Checked against the simulated verdicts of NPB-CG's pattern (docs/does-it-pay.md: the
solver's J-optimal placement simulates at 1.000 of block on the 2-level tree and
1.73-2.26x on the 3-level tree), and on random phased profiles that every applied
placement keeps each level's phase time, recomputed here by a plain loop."""

from __future__ import annotations

import numpy as np
import pytest

from mapper import CommGraph, Hierarchy, LinkModel, map_processes
from mapper.model.phased_graph import make_phase, phased_from_graphs, with_phases
from mapper.solve.never_worse import LINK_TOLERANCE, phase_refusal
from slurm_plugin.profiles.generators import generate

# 8-core nodes (2 sockets x 4), 4 nodes per leaf; tree3 adds middle switches
TREE2 = Hierarchy.homogeneous([4, 2, 4, 4], [1, 10, 100, 1000],
                              ["socket", "node", "leaf", "top"])
TREE3 = Hierarchy.homogeneous([4, 2, 4, 2, 2], [1, 10, 100, 1000, 10000],
                              ["socket", "node", "leaf", "mid", "top"])


@pytest.mark.parametrize("machine, levels, refused", [(TREE2, [1, 2], False),
                                                      (TREE3, [1, 2, 3], True)])
def test_cg_verdicts_follow_the_simulation(machine, levels, refused):
    graph = generate("npb-cg:bytes=262144", 128)
    assert graph.phases  # the generator gives CG by phase
    own = map_processes(graph, machine, "topdown+n10", 0, 30)  # no baseline: no rule
    why = phase_refusal(graph, machine, own.mapping, np.arange(128), levels, "J lower, but its")
    assert (why is not None) == refused, why
    if refused:
        assert "phase time" in why and "node links'" in why


def runs_time(phases, machine, mapping, level):
    """Model "runs" at one level, by loops: per phase, each group's cut; a sync group
    waits for the busiest cut among the groups its crossing edges touch; consecutive
    phases with the same groups add up per rank, the maximum taken at each change."""
    bounds = machine.bounds[level]
    grp = np.searchsorted(bounds, np.asarray(mapping), side="right") - 1
    total, acc, prev = 0.0, None, None
    for ph in phases:
        u, v, w = ph.graph.edges()
        cut: dict[int, float] = {}
        for a, b, x in zip(u.tolist(), v.tolist(), w.tolist(), strict=True):
            if grp[a] != grp[b]:
                cut[grp[a]] = cut.get(grp[a], 0.0) + x
                cut[grp[b]] = cut.get(grp[b], 0.0) + x
        lab = ph.labels()
        wait: dict[int, float] = {}
        for a, b in zip(u.tolist(), v.tolist(), strict=True):
            if grp[a] != grp[b]:
                seen = max(cut[grp[a]], cut[grp[b]])
                for s in (lab[a], lab[b]):
                    wait[s] = max(wait.get(s, 0.0), seen)
        t = ph.repeat * np.array([wait.get(s, 0.0) for s in lab])
        key = tuple(np.unique(lab, return_inverse=True)[1])
        if prev is not None and key == prev:
            acc = acc + t
            continue
        if acc is not None:
            total += acc.max()
        acc, prev = t, key
    return total + (acc.max() if acc is not None else 0.0)


def random_phased(seed: int, n: int):
    rng = np.random.default_rng(seed)
    graphs = []
    for _ in range(int(rng.integers(2, 5))):
        a, b = np.triu_indices(n, 1)
        keep = rng.random(len(a)) < 0.15
        graphs.append(CommGraph.from_edges(a[keep], b[keep],
                                           rng.integers(1, 10, keep.sum()).astype(float),
                                           n=n))
    phased = phased_from_graphs(graphs)
    if seed % 2:  # half of them: the first phase synchronises two halves only
        halves = [np.arange(n // 2), np.arange(n // 2, n)]
        phases = (make_phase(graphs[0], groups=halves),) + phased.phases[1:]
        phased = with_phases(phased, phases)
    return phased


def test_applied_placements_keep_every_levels_phase_time():
    machine = Hierarchy.homogeneous([2, 2, 2, 2], [1, 10, 100, 1000],
                                    ["core", "node", "leaf", "top"])
    levels, phase_refused = [1, 2], 0
    for seed in range(60):
        graph = random_phased(seed, 16)
        # a good baseline (another construction's), so that candidates differ from it
        # in how their load falls into phases more than in their total load
        base = map_processes(graph, machine, "greedyallc", seed + 7, None).mapping
        res = map_processes(graph, machine, "topdown+n10", seed, None, baseline=base,
                            links=LinkModel(congestion_levels=levels))
        phase_refused += any("phase time" in why for why in res.rejected.values())
        if res.origin == "baseline":
            continue
        for lv in levels:
            assert (runs_time(graph.phases, machine, res.mapping, lv)
                    <= runs_time(graph.phases, machine, base, lv) * (1 + LINK_TOLERANCE)
                    + 1e-9), (seed, lv)
    assert phase_refused  # the rule was exercised
